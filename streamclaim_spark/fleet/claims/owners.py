"""Who a batched claim gives each entry to, and what it did per group: shared by claims and recovery.

Several new owners share a group's stale entries by a hash of each entry's stream, group and ID, so a
re-run gives an entry to the same consumer; the tally counts a classified frame per group and outcome
in one aggregation collected to the driver.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C

Pair = tuple[str, str]


def spread_over(owners: Column) -> Column:
    """One consumer of ``owners`` (an array column) per entry, stable by a hash of its stream, group and ID."""
    spread = F.pmod(F.xxhash64(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ), F.size(owners)) + 1
    return F.element_at(owners, spread.cast("int"))


@dataclass
class GroupTally:
    """One group's rows counted by outcome, and the consumers its claims went to."""

    outcomes: Counter[object] = field(default_factory=Counter)
    owners: set[str] = field(default_factory=set)


def tally(frame: DataFrame, outcome: str, owner: str) -> dict[Pair, GroupTally]:
    """Counts ``frame`` per (stream, group) and value of ``outcome``, noting each non-null ``owner``."""
    tallies: dict[Pair, GroupTally] = {}
    for row in frame.groupBy(C.STREAM, C.GROUP, outcome, owner).count().collect():
        group_tally = tallies.setdefault((row[C.STREAM], row[C.GROUP]), GroupTally())
        group_tally.outcomes[row[outcome]] += row["count"]
        if row[owner] is not None:
            group_tally.owners.add(row[owner])
    return tallies

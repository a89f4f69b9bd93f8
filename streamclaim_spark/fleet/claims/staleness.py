"""When a pending entry is stale: idle at least ``min_idle``, or, with a backoff, the step of its delivery count.

A batched claim and a recovery run decide with these expressions (the counts, the dead-letter copy, the
classification) and commit under them (the MERGE source's per-row cutoff, an UPDATE's condition), so the
decision and the commit cannot drift. Without a backoff both are literals, as they always were.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.backoff import Backoff


def idle_cutoff(now: int, min_idle_ms: int, backoff: Backoff | None) -> Column:
    """The latest delivery time at which a pending row is stale at ``now``.

    A literal without a backoff; with one, per row: ``now`` less the larger of ``min_idle_ms`` and the
    step of the row's delivery count (``Backoff.wait_ms``, the last step repeating).
    """
    if backoff is None:
        return F.lit(now - min_idle_ms)
    steps = [max(min_idle_ms, step) for step in backoff.steps_ms]
    if len(set(steps)) == 1:
        return F.lit(now - steps[0])
    position = F.least(F.greatest(F.col(C.DELIVERY_COUNT), F.lit(1)), F.lit(len(steps))).cast("int")
    wait = F.element_at(F.array(*(F.lit(step).cast("long") for step in steps)), position)
    return F.lit(now) - wait


def is_stale(now: int, min_idle_ms: int, backoff: Backoff | None) -> Column:
    """Whether a pending row is stale at ``now`` (its delivery time at or before ``idle_cutoff``).

    With a backoff the shortest wait is also stated as a literal bound, which Delta's file statistics can
    skip files by (the per-row bound reads two columns, which they cannot).
    """
    shortest = max(min_idle_ms, backoff.shortest_ms) if backoff is not None else min_idle_ms
    bound = F.col(C.DELIVERY_TIME_MS) <= F.lit(now - shortest)
    if backoff is None or max(backoff.steps_ms) <= min_idle_ms:
        return bound
    return bound & (F.col(C.DELIVERY_TIME_MS) <= idle_cutoff(now, min_idle_ms, backoff))

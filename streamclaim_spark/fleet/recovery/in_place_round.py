"""Recovery claims without a MERGE: a round's stale entries claimed where they lie by one Delta UPDATE.

The groups of a round that only claim — nothing to acknowledge as dead-lettered, nothing to purge — to
the one recovery consumer (``assign="consumer"``) have their rows rewritten in place, as ``claim_stale``
does: the MERGE joined every claimed row with its target and rewrote it through the join (10,000
groups, 1M entries: 17.4 s of a 29.3 s run, CHANGELOG.md, "The in-place recovery round"). An UPDATE
cannot insert, so the round's MERGE (which applies its other groups) first creates the recovery consumer
where one of them lacks it (``missing_consumers``), as ``claims.in_place`` does in a commit of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.file_changes import Rewrite
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import group_partition, shares_buckets
from streamclaim_spark.engine.merge_commit import InPlaceUpdate
from streamclaim_spark.fleet.claims.driver_claim import claimed_on_driver, stale_mask
from streamclaim_spark.fleet.claims.in_place import claim_assignments, consumers_named
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair
from streamclaim_spark.fleet.claims.selection import StaleSelection
from streamclaim_spark.fleet.claims.staleness import is_stale
from streamclaim_spark.fleet.recovery.plan import ACK, CLAIM, PURGE
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.schema import in_partitions
from streamclaim_spark.state.snapshot import Snapshot

# Claims below which a round stays one MERGE: the UPDATE is a second commit (a third when the recovery
# consumer is new), about 1.5 s each here, and rewrites rows faster only in bulk (10,000 groups of 100
# entries: claim commit 17.4 s -> 5.3 s; 1,000 groups: run 25.9 s -> 22.0 s; CHANGELOG.md, "The in-place
# recovery round").
MIN_CLAIMS = 100_000


def claims_only(rules: GroupRules, tallies: Mapping[Pair, GroupTally], changed: Sequence[Pair]) -> list[Pair]:
    """The groups among ``changed`` to claim in place: their writes are claims to the recovery consumer
    only (nothing to acknowledge or purge, ``assign="consumer"`` by their rule), and at least MIN_CLAIMS in all."""
    eligible = rules.where(lambda rule: rule.assign == "consumer", changed)
    only = [pair for pair in eligible if tallies[pair].outcomes[ACK] == 0 and tallies[pair].outcomes[PURGE] == 0]
    return only if sum(tallies[pair].outcomes[CLAIM] for pair in only) >= MIN_CLAIMS else []


def missing_consumers(snapshot: Snapshot, changed: Sequence[Pair], consumer: str) -> list[Pair]:
    """The groups among ``changed`` that have no consumer named ``consumer`` yet (``in_place.consumers_named``)."""
    present = consumers_named(snapshot, changed, [consumer])
    return [pair for pair in changed if (*pair, consumer) not in present]


def claim_update(heads: Mapping[Pair, GroupMeta], rules: GroupRules, now: int, txn: str) -> InPlaceUpdate:
    """One UPDATE that claims the groups' stale entries to the recovery consumer, as the MERGE would.

    Selects exactly what classification calls CLAIM when there is nothing to acknowledge or purge:
    stale pending rows, minus the poison ones when dead-lettering (each group by its rule). Each claimed
    entry gets the recovery consumer, delivery time ``now`` and one more delivery; the consumer is seen
    and active ``now``; each head's version moves on, guarded on ``heads`` (as read, or as the round's
    MERGE left them), so a group written since the decision makes the UPDATE a lost race.
    """
    partitions = [group_partition(*pair) for pair in sorted(heads)]
    kind = F.col(C.ROW_KIND)
    is_pending, is_group, is_consumer = (kind == C.KIND_PENDING), (kind == C.KIND_GROUP), (kind == C.KIND_CONSUMER)
    options = rules.options
    claimed = is_pending & _claimable(rules, sorted(heads), now)
    condition = in_partitions(partitions) & (
        claimed | is_group | (is_consumer & (F.col(C.CONSUMER) == F.lit(options.consumer)))
    )
    assignments = claim_assignments((head for _, head in sorted(heads.items())), F.lit(options.consumer), 1, now, txn)
    return InPlaceUpdate(condition, assignments)


def claim_rewrite(pairs: Sequence[Pair], rules: GroupRules, now: int, txn: str, every_group: Iterable[Pair]) -> Rewrite:
    """The PEL rows ``claim_update`` claims, as a ``Rewrite`` of the files holding them: for a round whose
    every changed group claims in place on a classic session, committed as files with the heads and
    recovery consumers as the plan's writes (one commit, no Delta UPDATE: its pass that finds the files
    to rewrite read every PEL row first; CHANGELOG.md, "Heads rewritten on the driver").

    ``every_group`` is every group of the store: the condition names the partitions only when the
    buckets it rewrites hold other groups' rows too. Named, 10,000 of them cost 5-6 s in a new process
    (the first plan of an ``IN`` of 10,000 literals) against 1 s for the whole rewrite without them.
    """
    partitions = tuple(group_partition(*pair) for pair in sorted(pairs))
    condition = (F.col(C.ROW_KIND) == C.KIND_PENDING) & _claimable(rules, sorted(pairs), now)
    if shares_buckets(partitions, (group_partition(*pair) for pair in every_group), C.KIND_PENDING):
        condition = in_partitions(partitions) & condition
    assignments = {
        C.OWNER: F.lit(rules.options.consumer),
        C.DELIVERY_COUNT: F.col(C.DELIVERY_COUNT) + 1,
        C.DELIVERY_TIME_MS: F.lit(now).cast(LongType()),
        C.TXN: F.lit(txn),
    }
    on_driver = claimed_on_driver(_claimable_rows(rules, pairs, now), now, rules.options.consumer, 1, txn)
    return Rewrite(C.KIND_PENDING, partitions, condition, assignments, on_driver=on_driver)


def _claimable_rows(rules: GroupRules, pairs: Sequence[Pair], now: int) -> Callable[[pa.Table], pa.Array]:
    """``_claimable`` over Arrow rows, each group by its rule: the rows of ``pairs`` it selects
    (``driver_claim.stale_mask`` with the rule's idle time, backoff and, when it dead-letters, its
    delivery bound)."""
    selections = [
        (
            [group_partition(*pair) for pair in members],
            StaleSelection(
                min_idle_ms=rule.min_idle_ms,
                max_deliveries=rule.max_deliveries if rule.dead_letter else None,
                backoff=rule.backoff,
            ),
        )
        for rule, members in rules.grouped(pairs)
    ]

    def claimable(rows: pa.Table) -> pa.Array:
        masks = [stale_mask(rows, partitions, selection, now) for partitions, selection in selections]
        return functools.reduce(pc.or_, masks)

    return claimable


def _claimable(rules: GroupRules, pairs: Sequence[Pair], now: int) -> Column:
    """A pending row that classification calls CLAIM when nothing is acknowledged or purged: stale, and
    not poison when its group dead-letters (each group by its rule)."""

    def claimable(rule: RecoveryOptions) -> Column:
        stale = is_stale(now, rule.min_idle_ms, rule.backoff)
        return stale & (F.col(C.DELIVERY_COUNT) <= F.lit(rule.max_deliveries)) if rule.dead_letter else stale

    return rules.column(claimable, pairs)

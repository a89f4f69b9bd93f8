"""``claim_stale``'s fast path: one count, then the stale rows rewritten where they lie.

On a classic session one commit of files rewrites the PEL files holding them, with the group heads
and the new owners' consumer rows (``_claim_as_files``). On Spark Connect a Delta UPDATE rewrites the
touched files in one pass (the MERGE joined a million-row source with its target twice,
CHANGELOG.md, "Bulk claim"); an UPDATE cannot insert, so new owners that are not yet consumers
of a group are created first, in a commit of their own. A selection that meets entries deleted from
their stream is left to the MERGE path, which purges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Rewrite
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_commit import InPlaceUpdate
from streamclaim_spark.engine.merge_source import CLAIM_LIVE
from streamclaim_spark.engine.retries import RetryPolicy, reraising_lost_race, run_with_retries
from streamclaim_spark.engine.transaction import rows_changed
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.errors import CommitMismatchError
from streamclaim_spark.fleet.claims.driver_claim import claimed_on_driver, counted_on_driver, driver_form, stale_mask
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.claims.selection import (
    NEW_OWNER,
    BatchClaim,
    StaleSelection,
    claim_counts,
    claimed_frame,
    new_owner,
    selected_groups,
    stale_condition,
    with_entry_exists,
)
from streamclaim_spark.state.commit_rows import pending_rows_written
from streamclaim_spark.state.conflicts import stale_snapshot_error
from streamclaim_spark.state.delta_txn import commits_files
from streamclaim_spark.state.schema import in_partitions, kind_in
from streamclaim_spark.state.snapshot import Snapshot

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner

# Each of the path's two commits runs once per attempt; a lost race re-runs both, from the count.
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class InPlaceDecision:
    """What an in-place claim decided on one snapshot: per-group counts, new owners, head versions."""

    groups: dict[Pair, GroupMeta]
    counts: dict[Pair, tuple[int, int]]
    winners: dict[Pair, set[str]]
    missing_consumers: dict[Pair, set[str]]
    now: int
    # Per group, the claimed rows per previous owner, where the count was taken on the driver
    # (driver_claim.counted_on_driver): the commit then keeps the groups' pending counts exact.
    previous_owners: dict[Pair, dict[str | None, int]] | None = None

    @property
    def purges(self) -> bool:
        return any(purged for _, purged in self.counts.values())

    @property
    def claimed_pairs(self) -> list[Pair]:
        return sorted(pair for pair, (claimed, _) in self.counts.items() if claimed)


def decide_in_place(ctx: Context, selection: StaleSelection, owners: Sequence[str]) -> InPlaceDecision:
    """Counts the stale entries by group and new owner, and finds the new owners a group lacks.

    On the driver where it can (driver_claim.counted_on_driver: per previous owner too), else by a
    query that joins the stale rows' IDs with the streams' entry IDs only (whether each entry lives; no
    fields are read); then one lookup of the owners' consumer rows.
    """
    groups = selected_groups(ctx, selection)
    if not groups:
        return InPlaceDecision({}, {}, {}, {}, ctx.now)
    by_partition = {group_partition(g.key, g.name): (g.key, g.name) for g in groups}
    on_driver = counted_on_driver(ctx.snapshot, groups, selection, ctx.now) if driver_form(selection, owners) else None
    previous: dict[Pair, dict[str | None, int]] | None = None
    if on_driver is not None:  # one new owner, no deleted entry: every stale row is claimed by it
        previous = {by_partition[part]: owned for part, owned in on_driver.items() if sum(owned.values())}
        counts = {pair: (sum(owned.values()), 0) for pair, owned in previous.items()}
        winners = {pair: {owners[0]} for pair in counts}
    else:
        stale = ctx.snapshot.frame().where(stale_condition(groups, selection, ctx.now))
        counts, winners = claim_counts(
            with_entry_exists(
                ctx.snapshot,
                stale.select(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, new_owner(owners).alias(NEW_OWNER)),
                (g.key for g in groups),
                CLAIM_LIVE,
            )
        )
    by_pair = {(g.key, g.name): g for g in groups}
    missing: dict[Pair, set[str]] = {}
    if winners:
        known = consumers_named(ctx.snapshot, list(winners), sorted(set(owners)))
        for pair, names in winners.items():
            absent = {name for name in names if (*pair, name) not in known}
            if absent:
                missing[pair] = absent
    return InPlaceDecision(by_pair, counts, winners, missing, ctx.now, previous)


def consumers_named(snapshot: Snapshot, pairs: Sequence[Pair], names: Sequence[str]) -> set[tuple[str, str, str]]:
    """The (stream, group, consumer) of ``pairs``' consumers called one of ``names``: from the kept ``h``
    files on the driver where it can (no Spark job), else by a query."""
    partitions = [group_partition(*pair) for pair in pairs]
    columns = (C.ROW_KIND, C.STREAM, C.GROUP, C.CONSUMER, C.PARTITION_ID)
    stored = snapshot.stored_rows(
        [FileQuery(tuple(partitions), (C.KIND_CONSUMER,))], columns, placement().rows_max(Work.PREFETCH)
    )
    if stored is not None:
        rows = stored.filter(
            pc.and_kleene(
                pc.and_kleene(
                    pc.equal(stored.column(C.ROW_KIND), C.KIND_CONSUMER),
                    pc.is_in(stored.column(C.PARTITION_ID), value_set=pa.array(partitions, pa.string())),
                ),
                pc.is_in(stored.column(C.CONSUMER), value_set=pa.array(list(names), pa.string())),
            )
        ).to_pylist()
    else:
        named = kind_in(partitions, C.KIND_CONSUMER) & F.col(C.CONSUMER).isin(list(names))
        rows = [row.asDict() for row in snapshot.frame().where(named).select(*columns).collect()]
    return {(row[C.STREAM], row[C.GROUP], row[C.CONSUMER]) for row in rows}


def _in_place_update(
    decision: InPlaceDecision, selection: StaleSelection, owners: Sequence[str], just_id: bool, txn: str
) -> InPlaceUpdate:
    """One UPDATE that claims the decided entries, touches their new owners and bumps each group's head.

    The head's new version is guarded: if any write reached a group since the decision (every write
    bumps its head), the UPDATE aborts as a lost race, so the decision's counts are what it commits.
    """
    pairs = decision.claimed_pairs
    groups = [decision.groups[pair] for pair in pairs]
    kind = F.col(C.ROW_KIND)
    is_group, is_consumer = (kind == C.KIND_GROUP), (kind == C.KIND_CONSUMER)
    by_owners: dict[frozenset[str], list[str]] = {}
    for pair in pairs:
        by_owners.setdefault(frozenset(decision.winners[pair]), []).append(group_partition(*pair))
    touched = F.lit(False)
    for names, partitions in by_owners.items():
        in_groups = F.expr(f"{C.PARTITION_ID} IN ({', '.join(repr(p) for p in sorted(partitions))})")
        touched = touched | (in_groups & F.col(C.CONSUMER).isin(sorted(names)))
    condition = in_partitions([group_partition(*pair) for pair in pairs]) & (
        stale_condition(groups, selection, decision.now) | is_group | (is_consumer & touched)
    )
    assignments = claim_assignments(groups, new_owner(owners), 0 if just_id else 1, decision.now, txn)
    return InPlaceUpdate(condition, assignments)


def claim_assignments(heads: Iterable[GroupMeta], owner: Column, steps: int, now: int, txn: str) -> dict[str, Column]:
    """What an in-place claim sets: on pending rows ``owner``, delivery time ``now`` and ``steps`` more
    deliveries; on consumer rows seen and active ``now``; on each group head of ``heads`` its version
    plus one, guarded: a head whose version moved since it was read aborts the UPDATE as a lost race."""
    kind = F.col(C.ROW_KIND)
    is_pending, is_group, is_consumer = (kind == C.KIND_PENDING), (kind == C.KIND_GROUP), (kind == C.KIND_CONSUMER)
    # Partition IDs are hex digests and versions integers: one SQL map, one py4j call for any fleet.
    expected = ", ".join(f"'{group_partition(g.key, g.name)}', {g.version}" for g in heads)
    version = F.col(C.VERSION)
    guarded = F.when(version == F.expr(f"map({expected})[{C.PARTITION_ID}]"), version + 1).otherwise(
        stale_snapshot_error().cast(LongType())
    )
    at_now = F.lit(now).cast(LongType())
    return {
        C.OWNER: F.when(is_pending, owner).otherwise(F.col(C.OWNER)),
        C.DELIVERY_COUNT: F.when(is_pending, F.col(C.DELIVERY_COUNT) + steps).otherwise(F.col(C.DELIVERY_COUNT)),
        C.DELIVERY_TIME_MS: F.when(is_pending, at_now).otherwise(F.col(C.DELIVERY_TIME_MS)),
        C.SEEN_TIME_MS: F.when(is_consumer, at_now).otherwise(F.col(C.SEEN_TIME_MS)),
        C.ACTIVE_TIME_MS: F.when(is_consumer, at_now).otherwise(F.col(C.ACTIVE_TIME_MS)),
        C.VERSION: F.when(is_group, guarded).otherwise(version),
        C.TXN: F.lit(txn),
    }


def claim_in_place(
    runner: Runner, selection: StaleSelection, owners: Sequence[str], just_id: bool
) -> BatchClaim | None:
    """``claim_stale`` without a MERGE: one count, then one UPDATE of the stale rows where they lie.

    New owners a group lacks are created first, in a commit of their own (a crash after it leaves an
    idle consumer, as XGROUP CREATECONSUMER would). A selection that meets entries deleted from their
    stream returns None: the MERGE path purges them, as XAUTOCLAIM does.
    """

    def attempt(_: int) -> tuple[InPlaceDecision, int | None, str]:
        if commits_files(runner.session()):
            return _claim_as_files(runner, selection, owners, just_id)
        decided: list[InPlaceDecision] = []

        def decide(ctx: Context) -> None:
            decision = decide_in_place(ctx, selection, owners)
            decided[:] = [decision]
            if decision.purges:
                return
            for pair, names in sorted(decision.missing_consumers.items()):
                group = decision.groups[pair]
                put_group(ctx, group, group)
                for name in sorted(names):
                    touch_consumer(ctx, *pair, name)

        runner.transact("CLAIM STALE CONSUMERS", decide, policy=_ONE_ATTEMPT)
        decision = decided[0]
        if decision.purges or not decision.claimed_pairs:
            return decision, None, ""
        if decision.missing_consumers:
            # The consumers' commit bumped those heads; it was guarded, so nothing else moved them.
            bumped = {
                pair: replace(decision.groups[pair], version=decision.groups[pair].version + 1)
                for pair in decision.missing_consumers
            }
            decision = replace(decision, groups={**decision.groups, **bumped})
        txn: list[str] = []

        def rewrite(ctx: Context) -> None:
            txn[:] = [ctx.txn]
            pairs = decision.claimed_pairs
            update = _in_place_update(decision, selection, owners, just_id, ctx.txn)
            ctx.plan.set_update(update, *(group_partition(*pair) for pair in pairs))

        runner.transact("CLAIM STALE", rewrite, policy=_ONE_ATTEMPT)
        return decision, runner.last_commit_version, txn[0]

    outcome, attempts = run_with_retries(reraising_lost_race(attempt), runner.retry_policy, "CLAIM STALE")
    decision, version, txn = outcome
    if decision.purges:
        return None
    if version is None:
        return BatchClaim(runner.snapshot().frame().limit(0), {}, None, attempts)
    pairs = decision.claimed_pairs
    counts = {pair: decision.counts[pair] for pair in pairs}
    _check_in_place_commit(runner, version, decision, txn)
    claimed = claimed_frame(runner.table_at(version), [group_partition(*pair) for pair in pairs], txn)
    return BatchClaim(claimed, counts, version, attempts)


def _claim_as_files(
    runner: Runner, selection: StaleSelection, owners: Sequence[str], just_id: bool
) -> tuple[InPlaceDecision, int | None, str]:
    """One attempt on a classic session: the count, then one commit of files that rewrites the PEL files
    holding the stale rows (``Plan.rewrites``) and writes the heads and the new owners' consumer rows
    (created where missing): one commit where a commit of consumers and a Delta UPDATE took two, and no
    pass to find the files first (CHANGELOG.md, "Heads rewritten on the driver")."""
    decided: list[InPlaceDecision] = []
    txn: list[str] = []

    def decide(ctx: Context) -> None:
        decision = decide_in_place(ctx, selection, owners)
        decided[:] = [decision]
        if decision.purges or not decision.claimed_pairs:
            return
        txn[:] = [ctx.txn]
        pairs = decision.claimed_pairs
        for pair in pairs:
            group = decision.groups[pair]
            put_group(ctx, group, group)
            for name in sorted(decision.winners[pair]):
                touch_consumer(ctx, *pair, name)
        groups = [decision.groups[pair] for pair in pairs]
        steps = 0 if just_id else 1
        assignments = {
            C.OWNER: new_owner(owners),
            C.DELIVERY_COUNT: F.col(C.DELIVERY_COUNT) + steps,
            C.DELIVERY_TIME_MS: F.lit(decision.now).cast(LongType()),
            C.TXN: F.lit(ctx.txn),
        }
        partitions = tuple(group_partition(*pair) for pair in pairs)
        condition = stale_condition(groups, selection, decision.now)
        arrow = (
            claimed_on_driver(
                lambda rows: stale_mask(rows, partitions, selection, decision.now),
                decision.now,
                owners[0],
                steps,
                ctx.txn,
            )
            if driver_form(selection, owners)
            else None
        )
        rewrite = Rewrite(C.KIND_PENDING, partitions, condition, assignments, on_driver=arrow)
        ctx.plan.add_rewrite(rewrite, _moved(decision, owners[0]) if decision.previous_owners is not None else None)

    runner.transact("CLAIM STALE", decide, policy=_ONE_ATTEMPT)
    decision = decided[0]
    if decision.purges or not decision.claimed_pairs:
        return decision, None, ""
    return decision, runner.last_commit_version, txn[0]


def _moved(decision: InPlaceDecision, owner: str) -> dict[str, dict[str | None, int]]:
    """Per claimed group partition, the PEL rows the claim moves: each previous owner's taken, all
    given to ``owner`` (a row it owned already stays its own)."""
    moved: dict[str, dict[str | None, int]] = {}
    for pair in decision.claimed_pairs:
        previous = (decision.previous_owners or {}).get(pair, {})
        change = {name: -n for name, n in previous.items()}
        change[owner] = change.get(owner, 0) + sum(previous.values())
        moved[group_partition(*pair)] = change
    return moved


def _check_in_place_commit(runner: Runner, version: int, decision: InPlaceDecision, txn: str) -> None:
    """Fails loudly if the commit changed other rows than decided: an UPDATE's metrics against the claimed
    entries, heads and new owners' rows; a commit of files (``_claim_as_files``), whose metrics count
    files, by the claimed rows it wrote with its token, read back (state/commit_rows.py)."""
    pairs = decision.claimed_pairs
    claimed = sum(decision.counts[pair][0] for pair in pairs)
    changed = rows_changed(runner.session(), runner.state_path, version)
    if changed is None:
        written = pending_rows_written(runner.session(), runner.state_path, version, txn)
        if written != claimed:
            raise CommitMismatchError(
                f"CLAIM STALE committed version {version} with {written} claimed PEL rows where it decided "
                f"{claimed}; the table's history shows the commit"
            )
        return
    expected = claimed + len(pairs)
    expected += sum(len(decision.winners[pair]) for pair in pairs)
    updated = changed.updated
    if updated != expected:
        raise CommitMismatchError(
            f"CLAIM STALE committed version {version} updating {updated} rows where it decided {expected} "
            "(claimed entries, group heads and new owners' consumer rows); the table's history shows the commit"
        )

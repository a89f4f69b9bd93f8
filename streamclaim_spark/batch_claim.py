"""Batched claims beyond Redis: many streams, groups and entries claimed in one Delta MERGE.

``claim_stale`` recovers every stale pending entry that a selection names — streams and groups by
name or glob pattern, current owners, a delivery-count range, any SQL predicate — handing each to one
consumer or spreading them over several, without collecting entries to the driver. ``claim_batch``
runs many Redis-style XCLAIM/XAUTOCLAIM requests in one transaction and returns Redis replies for
each. Both commit one guarded MERGE whose conditions carry the idle predicate (see claim.py).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streamclaim_spark import _constants as C
from streamclaim_spark.columns import id_text
from streamclaim_spark.commands import claim as claims
from streamclaim_spark.context import Context
from streamclaim_spark.model import ConsumerMeta, GroupMeta, Write, consumer_row
from streamclaim_spark.partitions import group_partition, stream_partition
from streamclaim_spark.schema import in_partitions
from streamclaim_spark.transaction import (
    CLAIM_CUTOFF,
    CLAIM_FORCE,
    CLAIM_JUST_ID,
    CLAIM_LIVE,
    CLAIM_RETRY,
    CLAIM_STEPS,
    OP_CLAIM,
    OP_DELETE,
    OP_EXPECT,
    OP_GUARD,
    ConflictRetriesExhaustedError,
    InPlaceUpdate,
    RetryPolicy,
    commit_metrics,
    is_lost_race,
    run_with_retries,
    stale_snapshot_error,
)
from streamclaim_spark.writes import put_group

if TYPE_CHECKING:
    from streamclaim_spark.runner import Runner

T = TypeVar("T")


@dataclass(frozen=True)
class StaleSelection:
    """Which pending entries ``claim_stale`` considers.

    Args:
        min_idle_ms: Only entries idle at least this long (``now - delivery_time >= min_idle_ms``).
        streams: Stream names or glob patterns (``orders-*``); default every stream.
        groups: Group names or glob patterns; default every group.
        owners: Only entries currently owned by one of these consumers (default any owner).
        min_deliveries: Only entries delivered at least this often (default no bound).
        max_deliveries: Only entries delivered at most this often (default no bound).
        where: Extra Spark SQL predicate over the pending rows' columns (``owner``,
            ``delivery_count``, ``delivery_time_ms``, ``stream``, ``group_name``), default none.
    """

    min_idle_ms: int
    streams: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ("*",)
    owners: tuple[str, ...] | None = None
    min_deliveries: int | None = None
    max_deliveries: int | None = None
    where: str | None = None

    def __post_init__(self) -> None:
        if self.min_idle_ms < 0:
            raise ValueError(f"min_idle_ms={self.min_idle_ms}: give 0 or more milliseconds")
        for name in ("streams", "groups"):
            if isinstance(getattr(self, name), str):
                raise ValueError(f"{name}: give a tuple of names or patterns, e.g. ({getattr(self, name)!r},)")
        if self.owners is not None and isinstance(self.owners, str):
            raise ValueError(f"owners: give a tuple of consumer names, e.g. ({self.owners!r},)")
        low, high = self.min_deliveries, self.max_deliveries
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_deliveries={low} is above max_deliveries={high}: the range is empty")


@dataclass(frozen=True)
class BatchClaim:
    """The outcome of a batched claim.

    ``claimed`` is a DataFrame (stream, group_name, id, owner, delivery_count, delivery_time_ms,
    fields) of the entries the commit moved, read at the committed version; with ``dry_run`` it lists
    what would be claimed. ``counts`` maps (stream, group) to (claimed, purged) numbers.
    """

    claimed: DataFrame
    counts: dict[tuple[str, str], tuple[int, int]]
    version: int | None
    attempts: int
    replies: list[Any] = field(default_factory=list)

    @property
    def total_claimed(self) -> int:
        return sum(claimed for claimed, _ in self.counts.values())

    @property
    def total_purged(self) -> int:
        return sum(purged for _, purged in self.counts.values())


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def selected_groups(ctx: Context, selection: StaleSelection) -> list[GroupMeta]:
    """The (stream, group) heads the selection names, read with every other head in one query."""
    selected: list[GroupMeta] = []
    for meta in ctx.snapshot.all_streams():
        if not _matches(meta.key, selection.streams):
            continue
        names = [g for g in meta.groups if _matches(g, selection.groups)]
        selected.extend(g for g in (ctx.snapshot.group(meta.key, name) for name in names) if g is not None)
    return selected


def _new_owner(owners: Sequence[str]) -> Column:
    """One consumer, or a stable spread over several (by a hash of the entry's stream, group and ID)."""
    if len(owners) == 1:
        return F.lit(owners[0])
    bucket = F.pmod(F.xxhash64(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ), F.lit(len(owners))) + 1
    return F.element_at(F.array(*(F.lit(o) for o in owners)), bucket.cast("int"))


def _stale_condition(groups: Sequence[GroupMeta], selection: StaleSelection, cutoff: int) -> Column:
    """The pending rows of ``groups`` the selection names that are idle since ``cutoff`` or earlier.

    One predicate serves the decision's count and the commit's own condition, so the two cannot drift.
    """
    condition = (
        in_partitions([group_partition(g.key, g.name) for g in groups])
        & (F.col(C.ROW_KIND) == C.KIND_PENDING)
        & (F.col(C.DELIVERY_TIME_MS) <= cutoff)
    )
    if selection.owners is not None:
        condition = condition & F.col(C.OWNER).isin(list(selection.owners))
    if selection.min_deliveries is not None:
        condition = condition & (F.col(C.DELIVERY_COUNT) >= selection.min_deliveries)
    if selection.max_deliveries is not None:
        condition = condition & (F.col(C.DELIVERY_COUNT) <= selection.max_deliveries)
    if selection.where:
        condition = condition & F.expr(selection.where)
    return condition


def _stream_entries(ctx: Context, groups: Sequence[GroupMeta]) -> DataFrame:
    """Entry rows of the streams ``groups`` belong to."""
    streams = sorted({g.key for g in groups})
    return ctx.snapshot.frame().where(
        in_partitions([stream_partition(s) for s in streams]) & (F.col(C.ROW_KIND) == C.KIND_ENTRY)
    )


def _candidates(ctx: Context, groups: list[GroupMeta], selection: StaleSelection, owners: Sequence[str]) -> DataFrame:
    """Stale pending rows of the selected groups, each with its new owner and whether its entry lives."""
    pel = ctx.snapshot.frame().where(_stale_condition(groups, selection, ctx.now - selection.min_idle_ms))
    entries = _stream_entries(ctx, groups).select(C.STREAM, C.ID_MS, C.ID_SEQ, F.col(C.FIELDS).alias("_fields"))
    joined = pel.drop(C.FIELDS).join(entries, on=[C.STREAM, C.ID_MS, C.ID_SEQ], how="left")
    return joined.withColumn("_new_owner", _new_owner(owners)).withColumn(CLAIM_LIVE, F.col("_fields").isNotNull())


def _tally(
    rows: Sequence[Row],
) -> tuple[dict[tuple[str, str], tuple[int, int]], dict[tuple[str, str], set[str]]]:
    """(claimed, purged) per group and each group's new owners, from counts by (group, owner, entry lives)."""
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    winners: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        pair = (row[C.STREAM], row[C.GROUP])
        claimed, purged = counts.get(pair, (0, 0))
        if row[CLAIM_LIVE]:
            counts[pair] = (claimed + row["count"], purged)
            winners.setdefault(pair, set()).add(row["_new_owner"])
        else:
            counts[pair] = (claimed, purged + row["count"])
    return counts, winners


def _claim_source(candidates: DataFrame, ctx: Context, cutoff: int, just_id: bool) -> DataFrame:
    """MERGE source rows that claim (or purge) each candidate under the MERGE's own idle condition."""
    from streamclaim_spark.schema import STATE_SCHEMA
    from streamclaim_spark.transaction import SOURCE_SCHEMA

    values = {
        C.OWNER: F.col("_new_owner"),
        C.DELIVERY_TIME_MS: F.lit(ctx.now).cast(LongType()),
        C.TXN: F.lit(ctx.txn),
        C.FIELDS: F.lit(None).cast(STATE_SCHEMA[C.FIELDS].dataType),
    }
    columns = [values.get(f.name, F.col(f.name)).alias(f.name) for f in STATE_SCHEMA.fields]
    return candidates.select(
        *columns,
        F.lit(False).alias(OP_DELETE),
        F.lit(False).alias(OP_GUARD),
        F.lit(None).cast(LongType()).alias(OP_EXPECT),
        F.lit(True).alias(OP_CLAIM),
        F.col(CLAIM_LIVE),
        F.lit(cutoff).cast(LongType()).alias(CLAIM_CUTOFF),
        F.lit(1).cast(LongType()).alias(CLAIM_STEPS),
        F.lit(None).cast(LongType()).alias(CLAIM_RETRY),
        F.lit(just_id).alias(CLAIM_JUST_ID),
        F.lit(False).alias(CLAIM_FORCE),
    ).select(*SOURCE_SCHEMA.names)


def claimed_frame(table: DataFrame, partitions: Sequence[str], txn: str) -> DataFrame:
    """The PEL rows a commit wrote (its ``txn``), with each entry's ID as text and its fields."""
    pel = table.where(in_partitions(partitions) & (F.col(C.ROW_KIND) == C.KIND_PENDING) & (F.col(C.TXN) == txn))
    entries = table.where(F.col(C.ROW_KIND) == C.KIND_ENTRY).select(C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
    return pending_with_fields(pel, entries, [C.STREAM, C.ID_MS, C.ID_SEQ])


def pending_with_fields(pending: DataFrame, entries: DataFrame, on: Sequence[str]) -> DataFrame:
    """PEL rows as users see them: stream, group, ID text, owner, delivery count and time, entry fields.

    ``entries`` holds the ``on`` columns and ``fields``; fields are null for an entry deleted from the stream.
    """
    return (
        pending.drop(C.FIELDS)
        .join(entries, on=list(on), how="left")
        .select(
            C.STREAM,
            C.GROUP,
            id_text(C.ID_MS, C.ID_SEQ).alias("id"),
            C.OWNER,
            C.DELIVERY_COUNT,
            C.DELIVERY_TIME_MS,
            C.FIELDS,
        )
    )


@dataclass(frozen=True)
class _InPlaceDecision:
    """What an in-place claim decided on one snapshot: per-group counts, new owners, head versions."""

    groups: dict[tuple[str, str], GroupMeta]
    counts: dict[tuple[str, str], tuple[int, int]]
    winners: dict[tuple[str, str], set[str]]
    missing_consumers: dict[tuple[str, str], set[str]]
    now: int

    @property
    def purges(self) -> bool:
        return any(purged for _, purged in self.counts.values())

    @property
    def claimed_pairs(self) -> list[tuple[str, str]]:
        return sorted(pair for pair, (claimed, _) in self.counts.items() if claimed)


def _decide_in_place(ctx: Context, selection: StaleSelection, owners: Sequence[str]) -> _InPlaceDecision:
    """Counts the stale entries by group and new owner, and finds the new owners a group lacks.

    Two queries: the count joins the stale rows' IDs with the streams' entry IDs only (whether each
    entry lives; no fields are read), and one lookup of the owners' consumer rows.
    """
    groups = selected_groups(ctx, selection)
    if not groups:
        return _InPlaceDecision({}, {}, {}, {}, ctx.now)
    live = _stream_entries(ctx, groups).select(C.STREAM, C.ID_MS, C.ID_SEQ, F.lit(True).alias(CLAIM_LIVE))
    stale = ctx.snapshot.frame().where(_stale_condition(groups, selection, ctx.now - selection.min_idle_ms))
    tally = (
        stale.select(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, _new_owner(owners).alias("_new_owner"))
        .join(live, on=[C.STREAM, C.ID_MS, C.ID_SEQ], how="left")
        .groupBy(C.STREAM, C.GROUP, "_new_owner", CLAIM_LIVE)
        .count()
    )
    counts, winners = _tally(tally.collect())
    by_pair = {(g.key, g.name): g for g in groups}
    missing: dict[tuple[str, str], set[str]] = {}
    if winners:
        existing = (
            ctx.snapshot.frame()
            .where(
                in_partitions([group_partition(*pair) for pair in winners])
                & (F.col(C.ROW_KIND) == C.KIND_CONSUMER)
                & F.col(C.CONSUMER).isin(sorted(set(owners)))
            )
            .select(C.STREAM, C.GROUP, C.CONSUMER)
            .collect()
        )
        known = {(row[C.STREAM], row[C.GROUP], row[C.CONSUMER]) for row in existing}
        for pair, names in winners.items():
            absent = {name for name in names if (*pair, name) not in known}
            if absent:
                missing[pair] = absent
    return _InPlaceDecision(by_pair, counts, winners, missing, ctx.now)


def _in_place_update(
    decision: _InPlaceDecision, selection: StaleSelection, owners: Sequence[str], just_id: bool, txn: str
) -> InPlaceUpdate:
    """One UPDATE that claims the decided entries, touches their new owners and bumps each group's head.

    The head's new version is guarded: if any write reached a group since the decision (every write
    bumps its head), the UPDATE aborts as a lost race, so the decision's counts are what it commits.
    """
    pairs = decision.claimed_pairs
    groups = [decision.groups[pair] for pair in pairs]
    kind = F.col(C.ROW_KIND)
    is_pending, is_group, is_consumer = (kind == C.KIND_PENDING), (kind == C.KIND_GROUP), (kind == C.KIND_CONSUMER)
    # Partition IDs are hex digests and versions integers: one SQL map, one py4j call for any fleet.
    expected = ", ".join(f"'{group_partition(g.key, g.name)}', {g.version}" for g in groups)
    expected_version = F.expr(f"map({expected})[{C.PARTITION_ID}]")
    by_owners: dict[frozenset[str], list[str]] = {}
    for pair in pairs:
        by_owners.setdefault(frozenset(decision.winners[pair]), []).append(group_partition(*pair))
    touched = F.lit(False)
    for names, partitions in by_owners.items():
        in_groups = F.expr(f"{C.PARTITION_ID} IN ({', '.join(repr(p) for p in sorted(partitions))})")
        touched = touched | (in_groups & F.col(C.CONSUMER).isin(sorted(names)))
    condition = in_partitions([group_partition(*pair) for pair in pairs]) & (
        (_stale_condition(groups, selection, decision.now - selection.min_idle_ms)) | is_group | (is_consumer & touched)
    )
    version = F.col(C.VERSION)
    guarded = F.when(version == expected_version, version + 1).otherwise(stale_snapshot_error().cast(LongType()))
    now = F.lit(decision.now).cast(LongType())
    steps = 0 if just_id else 1
    assignments = {
        C.OWNER: F.when(is_pending, _new_owner(owners)).otherwise(F.col(C.OWNER)),
        C.DELIVERY_COUNT: F.when(is_pending, F.col(C.DELIVERY_COUNT) + steps).otherwise(F.col(C.DELIVERY_COUNT)),
        C.DELIVERY_TIME_MS: F.when(is_pending, now).otherwise(F.col(C.DELIVERY_TIME_MS)),
        C.SEEN_TIME_MS: F.when(is_consumer, now).otherwise(F.col(C.SEEN_TIME_MS)),
        C.ACTIVE_TIME_MS: F.when(is_consumer, now).otherwise(F.col(C.ACTIVE_TIME_MS)),
        C.VERSION: F.when(is_group, guarded).otherwise(version),
        C.TXN: F.lit(txn),
    }
    return InPlaceUpdate(condition, assignments)


def _claim_in_place(
    runner: Runner, selection: StaleSelection, owners: Sequence[str], just_id: bool
) -> BatchClaim | None:
    """``claim_stale`` without a MERGE: one count, then one UPDATE of the stale rows where they lie.

    A Delta UPDATE rewrites the touched files in one pass; the MERGE joined a million-row source with
    its target twice (docs/BENCHMARKS.md, "Bulk claim"). An UPDATE cannot insert or delete, so new
    owners that are not yet consumers of a group are created first, in a commit of their own (a crash
    after it leaves an idle consumer, as XGROUP CREATECONSUMER would), and a selection that meets
    entries deleted from their stream returns None: the MERGE path purges them, as XAUTOCLAIM does.
    """

    def attempt(_: int) -> tuple[_InPlaceDecision, int | None, str]:
        decided: list[_InPlaceDecision] = []

        def decide(ctx: Context) -> None:
            decision = _decide_in_place(ctx, selection, owners)
            decided[:] = [decision]
            if decision.purges:
                return
            for pair, names in sorted(decision.missing_consumers.items()):
                group = decision.groups[pair]
                put_group(ctx, group, group)
                for name in sorted(names):
                    ctx.plan.add(Write(consumer_row(*pair, ConsumerMeta(name, ctx.now, ctx.now), ctx.txn)))

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

    outcome, attempts = run_with_retries(_unwrap_lost_race(attempt), runner.retry_policy, "CLAIM STALE")
    decision, version, txn = outcome
    if decision.purges:
        return None
    if version is None:
        return BatchClaim(runner.snapshot().frame().limit(0), {}, None, attempts)
    pairs = decision.claimed_pairs
    counts = {pair: decision.counts[pair] for pair in pairs}
    _check_in_place_commit(runner, version, decision)
    claimed = claimed_frame(runner.table_at(version), [group_partition(*pair) for pair in pairs], txn)
    return BatchClaim(claimed, counts, version, attempts)


_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


def _unwrap_lost_race(attempt: Callable[[int], T]) -> Callable[[int], T]:
    """``attempt`` with a one-attempt command's lost race re-raised as the race, for the outer retry loop."""

    def unwrapped(number: int) -> T:
        try:
            return attempt(number)
        except ConflictRetriesExhaustedError as error:
            if error.__cause__ is not None and is_lost_race(error.__cause__):
                raise error.__cause__ from None
            raise

    return unwrapped


def _check_in_place_commit(runner: Runner, version: int, decision: _InPlaceDecision) -> None:
    """Fails loudly if the UPDATE rewrote other rows than decided (claims, heads, new owners' rows)."""
    pairs = decision.claimed_pairs
    expected = sum(decision.counts[pair][0] for pair in pairs) + len(pairs)
    expected += sum(len(decision.winners[pair]) for pair in pairs)
    updated = commit_metrics(runner.session(), runner.state_path, version).get("numUpdatedRows")
    if updated != expected:
        raise RuntimeError(
            f"CLAIM STALE committed version {version} updating {updated} rows where it decided {expected} "
            "(claimed entries, group heads and new owners' consumer rows); the table's history shows the commit"
        )


def claim_stale(
    runner: Runner,
    selection: StaleSelection,
    new_owner: str | Sequence[str],
    *,
    just_id: bool = False,
    dry_run: bool = False,
) -> BatchClaim:
    """Claims every pending entry the selection names in one commit (no COUNT cap).

    The claim is one Delta UPDATE of the stale rows where they lie (``_claim_in_place``), after a commit
    creating new owners a group lacks; when a stale entry was deleted from its stream, one MERGE claims
    the live ones and purges the others from the PEL, as XAUTOCLAIM does. With ``dry_run`` nothing is
    committed and ``claimed`` lists what would be claimed.

    Args:
        runner: The store's command runner (StreamStore.runner).
        selection: What to claim (StaleSelection).
        new_owner: The consumer that takes the entries, or several to spread them over.
        just_id: Leave delivery counts unchanged, as XAUTOCLAIM's JUSTID does.
        dry_run: Decide but commit nothing.
    """
    owners = [new_owner] if isinstance(new_owner, str) else list(new_owner)
    if not owners:
        raise ValueError("new_owner: give a consumer name or a non-empty list of consumer names")
    if not dry_run:
        done = _claim_in_place(runner, selection, owners, just_id)
        if done is not None:
            return done

    def decide(ctx: Context) -> tuple[DataFrame, dict[tuple[str, str], tuple[int, int]], list[str]]:
        groups = selected_groups(ctx, selection)
        if not groups:
            return ctx.snapshot.frame().limit(0), {}, []
        candidates = _candidates(ctx, groups, selection, owners)
        counts, winners = _tally(candidates.groupBy(C.STREAM, C.GROUP, "_new_owner", CLAIM_LIVE).count().collect())
        partitions = [group_partition(g.key, g.name) for g in groups]
        if dry_run or not counts:
            preview = candidates.where(F.col(CLAIM_LIVE)).select(
                C.STREAM,
                C.GROUP,
                id_text(C.ID_MS, C.ID_SEQ).alias("id"),
                F.col("_new_owner").alias(C.OWNER),
                (F.col(C.DELIVERY_COUNT) + (0 if just_id else 1)).alias(C.DELIVERY_COUNT),
                F.lit(ctx.now).cast(LongType()).alias(C.DELIVERY_TIME_MS),
                F.col("_fields").alias(C.FIELDS),
            )
            return preview, counts, partitions
        for group in groups:
            pair = (group.key, group.name)
            if pair not in counts:
                continue
            ctx.plan.add_frame(
                _claim_source(
                    candidates.where((F.col(C.STREAM) == group.key) & (F.col(C.GROUP) == group.name)),
                    ctx,
                    ctx.now - selection.min_idle_ms,
                    just_id,
                ),
                group_partition(group.key, group.name),
            )
            put_group(ctx, group, group)
            for owner in sorted(winners.get(pair, ())):
                # Seen and active now, whether the consumer existed before or not.
                touched = ConsumerMeta(owner, ctx.now, ctx.now)
                ctx.plan.add(Write(consumer_row(group.key, group.name, touched, ctx.txn)))
        return ctx.snapshot.frame().limit(0), counts, partitions

    txn_holder: list[str] = []

    def tracked(ctx: Context) -> tuple[DataFrame, dict[tuple[str, str], tuple[int, int]], list[str]]:
        txn_holder[:] = [ctx.txn]
        return decide(ctx)

    preview, counts, partitions = runner.transact("CLAIM STALE", tracked)
    version = runner.last_commit_version
    if version is None:
        return BatchClaim(preview, counts, None, runner.last_attempts)
    claimed = claimed_frame(runner.table_at(version), partitions, txn_holder[0])
    return BatchClaim(claimed, counts, version, runner.last_attempts)


@dataclass(frozen=True)
class ClaimRequest:
    """One Redis-style claim in a batch: XCLAIM when ``ids`` is given, else XAUTOCLAIM from ``start``.

    Args:
        stream: The stream key.
        group: The consumer group.
        consumer: The claiming consumer.
        min_idle_ms: XCLAIM/XAUTOCLAIM's min-idle-time.
        ids: IDs to claim (XCLAIM); None for an XAUTOCLAIM scan.
        start: XAUTOCLAIM start (default ``0-0``).
        count: XAUTOCLAIM COUNT (default 100).
        just_id: JUSTID.
    """

    stream: str
    group: str
    consumer: str
    min_idle_ms: int
    ids: tuple[str, ...] | None = None
    start: str = "0-0"
    count: int = C.XAUTOCLAIM_DEFAULT_COUNT
    just_id: bool = False

    def argv(self) -> list[str]:
        """The request as the Redis command it stands for."""
        if self.ids is not None:
            argv = ["XCLAIM", self.stream, self.group, self.consumer, str(self.min_idle_ms), *self.ids]
        else:
            argv = ["XAUTOCLAIM", self.stream, self.group, self.consumer, str(self.min_idle_ms), self.start]
            argv += ["COUNT", str(self.count)]
        return [*argv, "JUSTID"] if self.just_id else argv


def requests_from(rows: DataFrame | Sequence[ClaimRequest]) -> list[ClaimRequest]:
    """Requests given as a list, or as a DataFrame with ClaimRequest's field names as columns."""
    if not isinstance(rows, DataFrame):
        return list(rows)
    wanted = set(ClaimRequest.__dataclass_fields__)
    requests = []
    for row in rows.collect():
        values = {k: v for k, v in row.asDict().items() if k in wanted and v is not None}
        if "ids" in values:
            values["ids"] = tuple(values["ids"])
        requests.append(ClaimRequest(**values))
    return requests


def claim_batch(runner: Runner, rows: DataFrame | Sequence[ClaimRequest]) -> BatchClaim:
    """Runs many XCLAIM/XAUTOCLAIM requests in one MERGE; ``replies`` holds each one's Redis reply.

    Requests must name distinct (stream, group) pairs: each claims on the snapshot the batch read, as
    separate commands would one after another only if they touch different groups.
    """
    requests = requests_from(rows)
    pairs = [(r.stream, r.group) for r in requests]
    if len(set(pairs)) != len(pairs):
        raise ValueError("requests: two requests name the same (stream, group); merge their IDs into one request")
    parsed = [claims.parse_xautoclaim(request.argv()) if request.ids is None else None for request in requests]
    txn_holder: list[str] = []

    def decide(ctx: Context) -> list[claims.ClaimResult]:
        txn_holder[:] = [ctx.txn]
        results = []
        for request, autoclaim in zip(requests, parsed, strict=True):
            if autoclaim is not None:
                results.append(claims.run_xautoclaim(ctx, autoclaim))
            else:
                results.append(claims.run_xclaim(ctx, request.argv()))
        return results

    results = runner.transact("CLAIM BATCH", decide)
    version = runner.last_commit_version
    partitions = [group_partition(r.stream, r.group) for r in requests]
    if version is None:
        return BatchClaim(runner.snapshot().frame().limit(0), {}, None, runner.last_attempts, [])
    # Replies come from the snapshot the batch decided on (claim.claimed_reply says why that is exact);
    # ``claimed`` is a lazy read of what the commit wrote, for callers who want the rows.
    claimed = claimed_frame(runner.table_at(version), partitions, txn_holder[0])
    replies: list[Any] = []
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    for request, result in zip(requests, results, strict=True):
        shaped = claims.claimed_reply(result)
        counts[(request.stream, request.group)] = (len(result.claimed), len(result.deleted))
        if request.ids is None:
            replies.append([str(result.cursor), shaped, [str(i) for i in result.deleted]])
        else:
            replies.append(shaped)
    return BatchClaim(claimed, counts, version, runner.last_attempts, replies)

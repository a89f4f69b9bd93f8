"""Batched claims beyond Redis: ``claim_stale`` over a selection, and ``claim_batch`` of Redis-style requests.

``claim_stale`` recovers every stale pending entry a selection names, handing each to one consumer
or spreading them over several, without collecting entries to the driver: one UPDATE where it can
(claims.in_place), else one MERGE that also purges entries deleted from their stream. ``claim_batch``
runs many XCLAIM/XAUTOCLAIM requests in one transaction and returns each one's Redis reply. Every
commit carries the idle predicate in its own conditions (see commands/claim.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streamclaim_spark.commands.claim import (
    ClaimResult,
    XAutoClaim,
    XClaim,
    autoclaim_count,
    autoclaim_reply,
    claim_ids,
    claimed_reply,
    min_idle_time,
    run_xautoclaim,
)
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId, parse_id, parse_range_start
from streamclaim_spark.core.integers import LLONG_MAX, LLONG_MIN
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import (
    CLAIM_CUTOFF,
    CLAIM_FORCE,
    CLAIM_JUST_ID,
    CLAIM_LIVE,
    CLAIM_STEPS,
    OP_CLAIM,
    source_of,
)
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.errors import (
    ERR_XAUTOCLAIM_MIN_IDLE,
    ERR_XCLAIM_MIN_IDLE,
    InvalidArgumentError,
    ReplyError,
    unrecognized_xclaim_option,
)
from streamclaim_spark.fleet.claims.in_place import claim_in_place
from streamclaim_spark.fleet.claims.selection import (
    ENTRY_FIELDS,
    NEW_OWNER,
    BatchClaim,
    StaleSelection,
    candidates,
    claim_counts,
    claimed_frame,
    selected_groups,
)
from streamclaim_spark.fleet.claims.staleness import idle_cutoff
from streamclaim_spark.state.columns import id_text

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


def claim_stale(
    runner: Runner,
    selection: StaleSelection,
    new_owner: str | Sequence[str],
    *,
    just_id: bool = False,
    dry_run: bool = False,
) -> BatchClaim:
    """Claims every pending entry the selection names in one commit (no COUNT cap).

    The claim is one Delta UPDATE of the stale rows where they lie (``claims.in_place``), after a commit
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
        raise InvalidArgumentError("new_owner: give a consumer name or a non-empty list of consumer names")
    if not dry_run:
        done = claim_in_place(runner, selection, owners, just_id)
        if done is not None:
            return done

    def decide(ctx: Context) -> tuple[DataFrame, dict[tuple[str, str], tuple[int, int]], list[str]]:
        groups = selected_groups(ctx, selection)
        if not groups:
            return ctx.snapshot.frame().limit(0), {}, []
        stale = candidates(ctx, groups, selection, owners)
        counts, winners = claim_counts(stale)
        partitions = [group_partition(g.key, g.name) for g in groups]
        if dry_run or not counts:
            return _preview(stale, ctx, just_id), counts, partitions
        _plan_claims(ctx, groups, stale, counts, winners, selection, just_id)
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


def _preview(stale: DataFrame, ctx: Context, just_id: bool) -> DataFrame:
    """What a claim of the live ``stale`` entries would claim, as ``claimed_frame`` shows a committed one."""
    return stale.where(F.col(CLAIM_LIVE)).select(
        C.STREAM,
        C.GROUP,
        id_text(C.ID_MS, C.ID_SEQ).alias("id"),
        F.col(NEW_OWNER).alias(C.OWNER),
        (F.col(C.DELIVERY_COUNT) + (0 if just_id else 1)).alias(C.DELIVERY_COUNT),
        F.lit(ctx.now).cast(LongType()).alias(C.DELIVERY_TIME_MS),
        F.col(ENTRY_FIELDS).alias(C.FIELDS),
    )


def _plan_claims(
    ctx: Context,
    groups: Sequence[GroupMeta],
    stale: DataFrame,
    counts: dict[tuple[str, str], tuple[int, int]],
    winners: dict[tuple[str, str], set[str]],
    selection: StaleSelection,
    just_id: bool,
) -> None:
    """Plans the MERGE: per group with something to claim, its stale rows' source, its head and its owners."""
    for group in groups:
        pair = (group.key, group.name)
        if pair not in counts:
            continue
        ctx.plan.add_frame(
            _claim_source(
                stale.where((F.col(C.STREAM) == group.key) & (F.col(C.GROUP) == group.name)),
                ctx,
                idle_cutoff(ctx.now, selection.min_idle_ms, selection.backoff),
                just_id,
            ),
            group_partition(group.key, group.name),
        )
        put_group(ctx, group, group)
        for owner in sorted(winners.get(pair, ())):
            touch_consumer(ctx, group.key, group.name, owner)  # whether it existed before or not


def _claim_source(stale: DataFrame, ctx: Context, cutoff: Column, just_id: bool) -> DataFrame:
    """MERGE source rows that claim (or purge) each stale row under the MERGE's own idle condition
    (``cutoff``: staleness.idle_cutoff, per row with a backoff)."""
    return source_of(
        stale,
        values={C.OWNER: F.col(NEW_OWNER), C.DELIVERY_TIME_MS: F.lit(ctx.now), C.TXN: F.lit(ctx.txn)},
        operations={
            OP_CLAIM: F.lit(True),
            CLAIM_LIVE: F.col(CLAIM_LIVE),
            CLAIM_CUTOFF: cutoff,
            CLAIM_STEPS: F.lit(1),
            CLAIM_JUST_ID: F.lit(just_id),
            CLAIM_FORCE: F.lit(False),
        },
    )


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


def _long(value: object) -> int | None:
    """``value`` if it is a signed 64-bit integer, as Redis' integer arguments must be (None: it is not)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if LLONG_MIN <= value <= LLONG_MAX else None


def _claim_id(text: str) -> StreamId:
    """One of XCLAIM's IDs; XCLAIM reads a non-ID where IDs end and options begin, and refuses it there."""
    try:
        return parse_id(text, strict=True)
    except ReplyError:
        raise unrecognized_xclaim_option(text) from None


def _xclaim(request: ClaimRequest) -> XClaim | ReplyError:
    """The XCLAIM ``request`` stands for, or the error its arguments give (raised after NOGROUP, as in Redis)."""
    assert request.ids is not None
    try:
        min_idle = min_idle_time(_long(request.min_idle_ms), ERR_XCLAIM_MIN_IDLE)
        return XClaim(min_idle, tuple(_claim_id(text) for text in request.ids), just_id=request.just_id)
    except ReplyError as error:
        return error


def _xautoclaim(request: ClaimRequest) -> XAutoClaim:
    """The XAUTOCLAIM ``request`` stands for; its argument errors come before any read, as in Redis."""
    min_idle = min_idle_time(_long(request.min_idle_ms), ERR_XAUTOCLAIM_MIN_IDLE)
    start = parse_range_start(request.start)
    count = autoclaim_count(_long(request.count))
    return XAutoClaim(request.stream, request.group, request.consumer, min_idle, start, count, request.just_id)


def claim_batch(runner: Runner, rows: DataFrame | Sequence[ClaimRequest]) -> BatchClaim:
    """Runs many XCLAIM/XAUTOCLAIM requests in one commit; ``replies`` holds each one's Redis reply.

    Requests must name distinct (stream, group) pairs: each claims on the snapshot the batch read, as
    separate commands would one after another only if they touch different groups.
    """
    requests = requests_from(rows)
    pairs = [(r.stream, r.group) for r in requests]
    if len(set(pairs)) != len(pairs):
        raise InvalidArgumentError(
            "requests: two requests name the same (stream, group); merge their IDs into one request"
        )
    typed = [_xautoclaim(request) if request.ids is None else _xclaim(request) for request in requests]
    txn_holder: list[str] = []

    def decide(ctx: Context) -> list[ClaimResult]:
        txn_holder[:] = [ctx.txn]
        results = []
        for request, claim in zip(requests, typed, strict=True):
            if isinstance(claim, XAutoClaim):
                results.append(run_xautoclaim(ctx, claim))
            else:
                results.append(claim_ids(ctx, request.stream, request.group, request.consumer, claim))
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
        counts[(request.stream, request.group)] = (len(result.claimed), len(result.deleted))
        replies.append(claimed_reply(result) if request.ids is not None else autoclaim_reply(result))
    return BatchClaim(claimed, counts, version, runner.last_attempts, replies)

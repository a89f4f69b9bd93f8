"""XCLAIM and XAUTOCLAIM: moving stale pending entries to a live consumer in one Delta MERGE.

Each call is one MERGE into the state table. Its source lists the PEL entries the call examines;
its conditions carry the idle predicate (``delivery_time <= now - min_idle``, one ``now`` per call),
so the transaction itself decides which entries are won. It also purges PEL entries whose stream
entry was deleted, inserts FORCE entries, creates or touches the consumer and moves the group's
cursor (LASTID), all in the same commit. The reply is built from the snapshot (see claimed_reply).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from streamclaim_spark.commands.args import int_arg, is_word
from streamclaim_spark.commands.groups import group_or_nogroup
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId, parse_id, parse_range_start
from streamclaim_spark.core.integers import parse_ll
from streamclaim_spark.core.model import Claim, Entry, Need, Scan, Write, pending_key
from streamclaim_spark.core.replies import entry_reply
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.errors import (
    ERR_COUNT,
    ERR_XAUTOCLAIM_MIN_IDLE,
    ERR_XCLAIM_IDLE,
    ERR_XCLAIM_MIN_IDLE,
    ERR_XCLAIM_RETRYCOUNT,
    ERR_XCLAIM_TIME,
    SYNTAX,
    ReplyError,
    unrecognized_xclaim_option,
)


@dataclass(frozen=True)
class XClaim:
    """A parsed XCLAIM (everything after the NOGROUP check, which comes first in Redis)."""

    min_idle: int
    ids: tuple[StreamId, ...]
    idle: int | None = None  # IDLE ms, relative to now
    time: int | None = None  # TIME unix ms
    retry_count: int | None = None
    force: bool = False
    just_id: bool = False
    last_id: StreamId | None = None
    delivery_from: str | None = None  # "idle" or "time": the one given last wins


def min_idle_time(value: int | None, error: str) -> int:
    """XCLAIM's and XAUTOCLAIM's min-idle-time: a 64-bit integer (None: it was not one, ``error``);
    a negative one counts as 0."""
    if value is None:
        raise ReplyError(error)
    return max(0, value)


def autoclaim_count(value: int | None) -> int:
    """XAUTOCLAIM's COUNT: 1 to XAUTOCLAIM_MAX_COUNT (None: not an integer at all)."""
    if value is None or not 1 <= value <= C.XAUTOCLAIM_MAX_COUNT:
        raise ReplyError(ERR_COUNT)
    return value


def parse_xclaim(argv: Sequence[str]) -> XClaim:
    """xclaimCommand's parsing: min-idle, IDs up to the first non-ID, then options (last wins)."""
    min_idle = min_idle_time(parse_ll(argv[4]), ERR_XCLAIM_MIN_IDLE)
    ids: list[StreamId] = []
    j = 5
    while j < len(argv):
        try:
            ids.append(parse_id(argv[j], strict=True))
        except ReplyError:
            break
        j += 1
    request = XClaim(min_idle, tuple(ids))
    while j < len(argv):
        more = len(argv) - 1 - j
        option = argv[j]
        if is_word(option, "FORCE"):
            request = replace(request, force=True)
        elif is_word(option, "JUSTID"):
            request = replace(request, just_id=True)
        elif is_word(option, "IDLE") and more:
            j += 1
            request = replace(request, idle=int_arg(argv[j], ERR_XCLAIM_IDLE), delivery_from="idle")
        elif is_word(option, "TIME") and more:
            j += 1
            request = replace(request, time=int_arg(argv[j], ERR_XCLAIM_TIME), delivery_from="time")
        elif is_word(option, "RETRYCOUNT") and more:
            j += 1
            request = replace(request, retry_count=int_arg(argv[j], ERR_XCLAIM_RETRYCOUNT))
        elif is_word(option, "LASTID") and more:
            j += 1
            request = replace(request, last_id=parse_id(argv[j], strict=True))
        else:
            raise unrecognized_xclaim_option(option)
        j += 1
    return request


def delivery_time(request: XClaim, now: int) -> int:
    """The delivery time XCLAIM writes: IDLE/TIME (last given wins), clamped to now when < 0 or > now."""
    if request.delivery_from == "idle" and request.idle is not None:
        value = now - request.idle
    elif request.delivery_from == "time" and request.time is not None:
        value = request.time
    else:
        return now
    return now if value < 0 or value > now else value


@dataclass(frozen=True)
class ClaimResult:
    """What a claim did: the claimed entries (reply order), and the PEL entries it purged."""

    key: str
    group: str
    claimed: list[tuple[StreamId, Entry | None]]
    deleted: list[StreamId]
    cursor: StreamId = ZERO_ID


def claimed_reply(result: ClaimResult) -> list[Any]:
    """The claimed items as Redis replies them: IDs under JUSTID, else [id, [field, value, ...]].

    Built from the snapshot the claim decided on, not read back: the claim's MERGE is guarded on the
    group head's version and every write to a group bumps it, so a commit that happened saw exactly
    the PEL rows of that snapshot, and its idle conditions matched exactly the rows decided on.
    """
    return [str(entry_id) if entry is None else entry_reply(entry) for entry_id, entry in result.claimed]


def autoclaim_reply(result: ClaimResult) -> list[Any]:
    """XAUTOCLAIM's reply: the next cursor, the claimed items, and the IDs it purged from the PEL."""
    return [str(result.cursor), claimed_reply(result), [str(i) for i in result.deleted]]


def parse_xclaim_or_error(argv: Sequence[str]) -> XClaim | ReplyError:
    """XCLAIM key group consumer min-idle id... [options], parsed; an argument error is returned, not
    raised, since Redis reports NOGROUP first: ``claim_ids`` raises it once the group is known to exist."""
    try:
        return parse_xclaim(argv)
    except ReplyError as error:
        return error


def claim_ids(ctx: Context, key: str, group_name: str, consumer: str, request: XClaim | ReplyError) -> ClaimResult:
    """XCLAIM of a parsed request, or of one whose arguments gave ``request``, the error: Redis reports
    NOGROUP before any argument error, so that error is raised only once the group is known to exist."""
    ids = request.ids if isinstance(request, XClaim) else ()
    # Everything XCLAIM reads, in one query: heads, the consumer, the IDs' PEL rows and entries.
    ctx.snapshot.prefetch(Need(key, (group_name,), consumer, entry_ids=ids, pending_ids=ids))
    group = group_or_nogroup(ctx, key, group_name)
    if isinstance(request, ReplyError):
        raise request
    when = delivery_time(request, ctx.now)
    occurrences = Counter(request.ids)
    live = ctx.snapshot.entries_by_id(key, occurrences)
    pending = ctx.snapshot.pending_by_id(key, group_name, occurrences)
    # After the first claim the entry is the caller's with delivery time ``when``; a repeated ID is
    # claimed again only if that is idle enough (Redis processes every occurrence in turn).
    again = request.min_idle == 0 or ctx.now - when >= request.min_idle
    cutoff = ctx.now - request.min_idle if request.min_idle else None
    expected_steps: dict[StreamId, int] = {}
    writes: list[Write] = []
    purges = 0
    for entry_id, times in occurrences.items():
        nack = pending.get(entry_id)
        is_live = entry_id in live
        if nack is None and not (request.force and is_live):
            continue
        steps = times if again else 1
        claim = Claim(
            live=is_live,
            cutoff=None if nack is None else cutoff,
            owner=consumer,
            delivery_time=when,
            steps=steps,
            retry_count=request.retry_count if request.retry_count is not None and request.retry_count >= 0 else None,
            just_id=request.just_id,
            force=request.force,
        )
        writes.append(Write({**pending_key(key, group_name, entry_id), C.TXN: ctx.txn}, claim=claim))
        if not is_live:
            purges += 1
        elif nack is None or cutoff is None or nack.delivery_time <= cutoff:
            expected_steps[entry_id] = steps
    moved = group
    if request.last_id is not None and request.last_id > group.last_id:
        moved = replace(group, last_id=request.last_id)
    # A claim that changes nothing commits nothing, as Redis writes nothing: racing claimers that lost
    # then cost one read, not another commit that would make the others lose again.
    if expected_steps or purges or moved != group:
        for write in writes:
            ctx.plan.add(write)
        if expected_steps:
            # Redis 7.0 creates and touches the consumer only when it claims something.
            touch_consumer(ctx, group.key, group.name, consumer)
        put_group(ctx, group, moved)
    claimed: list[tuple[StreamId, Entry | None]] = []
    seen: Counter[StreamId] = Counter()
    for entry_id in request.ids:
        seen[entry_id] += 1
        if seen[entry_id] <= expected_steps.get(entry_id, 0):
            claimed.append((entry_id, None if request.just_id else live[entry_id]))
    return ClaimResult(key, group_name, claimed, [])


@dataclass(frozen=True)
class XAutoClaim:
    key: str
    group: str
    consumer: str
    min_idle: int
    start: StreamId
    count: int = C.XAUTOCLAIM_DEFAULT_COUNT
    just_id: bool = False


def parse_xautoclaim(argv: Sequence[str]) -> XAutoClaim:
    """xautoclaimCommand's parsing, which runs before the key is looked up."""
    min_idle = min_idle_time(parse_ll(argv[4]), ERR_XAUTOCLAIM_MIN_IDLE)
    start = parse_range_start(argv[5])
    count = C.XAUTOCLAIM_DEFAULT_COUNT
    just_id = False
    j = 6
    while j < len(argv):
        more = len(argv) - 1 - j
        if is_word(argv[j], "COUNT") and more:
            count = autoclaim_count(parse_ll(argv[j + 1]))
            j += 1
        elif is_word(argv[j], "JUSTID"):
            just_id = True
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return XAutoClaim(argv[1], argv[2], argv[3], min_idle, start, count, just_id)


def run_xautoclaim(ctx: Context, request: XAutoClaim) -> ClaimResult:
    """One XAUTOCLAIM step: examine at most COUNT x 10 PEL entries from ``start`` in ID order."""
    key, group_name = request.key, request.group
    attempts = request.count * C.XAUTOCLAIM_ATTEMPTS_FACTOR
    scan = Scan(request.start, MAX_ID, attempts + 1)
    # Heads, the claiming consumer and the PEL scan in one query; the entries by ID in a second.
    ctx.snapshot.prefetch(Need(key, (group_name,), request.consumer, pending_scan=scan))
    group = group_or_nogroup(ctx, key, group_name)
    scanned = _scan_pel(ctx, key, group_name, scan)
    cutoff = ctx.now - request.min_idle if request.min_idle else None
    remaining = request.count
    examined = 0
    claimed: list[tuple[StreamId, Entry | None]] = []
    deleted: list[StreamId] = []
    writes: list[Write] = []
    for entry_id, delivered_at, entry in scanned:
        if examined == attempts or remaining == 0:
            break
        examined += 1
        if entry is None:
            deleted.append(entry_id)
            remaining -= 1
        elif cutoff is not None and delivered_at > cutoff:
            continue
        else:
            claimed.append((entry_id, None if request.just_id else entry))
            remaining -= 1
        claim = Claim(
            live=entry is not None,
            cutoff=cutoff,
            owner=request.consumer,
            delivery_time=ctx.now,
            just_id=request.just_id,
        )
        writes.append(Write({**pending_key(key, group_name, entry_id), C.TXN: ctx.txn}, claim=claim))
    cursor = scanned[examined][0] if examined < len(scanned) else ZERO_ID
    if claimed or deleted:  # nothing claimed or purged: nothing to commit (see claim_ids)
        for write in writes:
            ctx.plan.add(write)
        if claimed:
            touch_consumer(ctx, group.key, group.name, request.consumer)
        put_group(ctx, group, group)
    return ClaimResult(key, group_name, claimed, deleted, cursor)


def _scan_pel(ctx: Context, key: str, group: str, scan: Scan) -> list[tuple[StreamId, int, Entry | None]]:
    """The PEL entries ``scan`` names, in ID order, each with its stream entry (None: deleted).

    The PEL rows come from the command's prefetch; the entries are then looked up by the scanned IDs,
    whose range lets Delta skip every entry file outside it (a join would scan the whole stream).
    """
    pel = ctx.snapshot.pending(key, group, scan.low, scan.high, scan.limit)
    live = ctx.snapshot.entries_by_id(key, [nack.id for nack in pel])
    return [(nack.id, nack.delivery_time, live.get(nack.id)) for nack in pel]

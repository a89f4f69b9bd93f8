"""XREADGROUP and XREAD: delivering entries to consumers and reading consumers' history.

Parsing follows Redis 7.0's xreadCommand, plus Redis 8.4's ``CLAIM min-idle-time``. A ``>`` read moves
the group's cursor, creates or resets PEL entries for the delivered IDs and touches the consumer, all
in the command's one commit; a history read re-delivers the consumer's own pending entries. With
CLAIM a ``>`` read first claims the group's entries idle for at least min-idle-time, oldest delivery
first, then serves new ones, in the same commit (reference/redis8-recovery-commands.md §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from streamclaim_spark.commands.args import int_arg, is_token, is_word
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId, parse_id
from streamclaim_spark.core.integers import LLONG_MAX
from streamclaim_spark.core.lag import entries_read_after_delivery
from streamclaim_spark.core.model import ConsumerMeta, Entry, PendingEntry, Write, consumer_row, pending_row
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.errors import (
    ERR_CLAIM_ONLY_XREADGROUP,
    ERR_DOLLAR_IN_XREADGROUP,
    ERR_GROUP_ONLY_XREADGROUP,
    ERR_GT_IN_XREAD,
    ERR_MIN_IDLE_NEGATIVE,
    ERR_MIN_IDLE_NOT_INTEGER,
    ERR_MISSING_GROUP,
    ERR_NOACK_ONLY_XREADGROUP,
    ERR_TIMEOUT_NEGATIVE,
    ERR_TIMEOUT_NOT_INTEGER,
    ERR_UNBALANCED,
    NOGROUP_BLOCKED_GROUP_DESTROYED,
    SYNTAX,
    UNBLOCKED_STREAM_DELETED,
    ReplyError,
    nogroup_xreadgroup,
)

# Redis 7.0 uses this text for XREADGROUP as well.

# An entry of a read reply: (id, entry, claim metadata). The entry is None for a deleted entry still
# pending; the metadata is (idle ms, delivery count before this read) under CLAIM, else None.
ReadItem = tuple[StreamId, Entry | None, tuple[int, int] | None]
# A stream item of a read reply: (key, entries).
StreamReply = tuple[str, list[ReadItem]]


@dataclass(frozen=True)
class Read:
    """A parsed XREADGROUP/XREAD: streams with their IDs (None: ``>``), options."""

    keys: tuple[str, ...]
    id_args: tuple[str, ...]
    group: str | None = None
    consumer: str | None = None
    count: int = 0  # 0: no limit
    block_ms: int | None = None
    noack: bool = False
    claim_min_idle: int | None = None  # CLAIM min-idle-time (XREADGROUP, Redis 8.4)


def parse_read(argv: Sequence[str]) -> Read:
    """Option parsing of xreadCommand (before any key is looked up)."""
    xreadgroup = argv[0].lower() == "xreadgroup"
    block_ms: int | None = None
    count = 0
    streams_at = 0
    group: str | None = None
    consumer: str | None = None
    noack = False
    claim_min_idle: int | None = None
    i = 1
    while i < len(argv):
        more = len(argv) - i - 1
        option = argv[i]
        if is_word(option, "BLOCK") and more:
            i += 1
            timeout = int_arg(argv[i], ERR_TIMEOUT_NOT_INTEGER)
            if timeout < 0:
                raise ReplyError(ERR_TIMEOUT_NEGATIVE)
            block_ms = timeout
        elif is_word(option, "COUNT") and more:
            i += 1
            count = max(0, int_arg(argv[i]))
        elif is_word(option, "STREAMS") and more:
            streams_at = i + 1
            if (len(argv) - streams_at) % 2:
                raise ReplyError(ERR_UNBALANCED)
            break
        elif is_word(option, "GROUP") and more >= 2:
            if not xreadgroup:
                raise ReplyError(ERR_GROUP_ONLY_XREADGROUP)
            group, consumer = argv[i + 1], argv[i + 2]
            i += 2
        elif is_word(option, "NOACK"):
            if not xreadgroup:
                raise ReplyError(ERR_NOACK_ONLY_XREADGROUP)
            noack = True
        elif is_word(option, "CLAIM") and more:
            if not xreadgroup:
                raise ReplyError(ERR_CLAIM_ONLY_XREADGROUP)
            i += 1  # the next token is the value, even a keyword: "CLAIM STREAMS" is not an integer
            claim_min_idle = int_arg(argv[i], ERR_MIN_IDLE_NOT_INTEGER)
            if claim_min_idle < 0:
                raise ReplyError(ERR_MIN_IDLE_NEGATIVE)
        else:
            raise ReplyError(SYNTAX)
        i += 1
    if streams_at == 0:
        raise ReplyError(SYNTAX)
    if xreadgroup and group is None:
        raise ReplyError(ERR_MISSING_GROUP)
    half = (len(argv) - streams_at) // 2
    keys = tuple(argv[streams_at : streams_at + half])
    ids = tuple(argv[streams_at + half :])
    return Read(keys, ids, group, consumer, count, block_ms, noack, claim_min_idle)


def without_block(argv: Sequence[str], ids: Sequence[str] | None = None) -> list[str]:
    """The argv of a read (that ``parse_read`` accepted) without its BLOCK option: the one pass a
    server runs in a batch while the client waits; ``ids`` replaces the IDs after the keys."""
    kept = [argv[0]]
    i = 1
    while i < len(argv):
        if is_word(argv[i], "STREAMS"):
            half = (len(argv) - i - 1) // 2
            kept += argv[i : i + 1 + half]
            kept += list(ids) if ids is not None else argv[i + 1 + half :]
            break
        if is_word(argv[i], "BLOCK"):
            i += 2
            continue
        width = 3 if is_word(argv[i], "GROUP") else 1 if is_word(argv[i], "NOACK") else 2
        kept += argv[i : i + width]
        i += width
    return kept


def run_xreadgroup(ctx: Context, request: Read) -> list[StreamReply] | None:
    """One synchronous pass of XREADGROUP; None when no stream was served (Redis' null array)."""
    group_name, consumer_name = request.group, request.consumer
    assert group_name is not None and consumer_name is not None
    starts: list[StreamId | None] = []
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        ctx.snapshot.load_heads(key, [group_name], consumer_name)
        if ctx.snapshot.stream(key) is None or ctx.snapshot.group(key, group_name) is None:
            raise nogroup_xreadgroup(key, group_name)
        if is_token(id_arg, "$"):
            raise ReplyError(ERR_DOLLAR_IN_XREADGROUP)
        if is_token(id_arg, ">"):
            starts.append(None)
            continue
        parsed = parse_id(id_arg, strict=True)
        starts.append(None if parsed == MAX_ID else parsed)
    served: list[StreamReply] = []
    claim = request.claim_min_idle
    for key, start in zip(request.keys, starts, strict=True):
        if start is not None:
            claim = None  # Redis keeps one min-idle for the command: a history key turns CLAIM off for the rest
        reply = _serve_group_stream(ctx, request, key, start, claim)
        if reply is not None:
            served.append(reply)
    return served or None


def _serve_group_stream(
    ctx: Context, request: Read, key: str, after: StreamId | None, claim_min_idle: int | None
) -> StreamReply | None:
    group_name, consumer_name = request.group, request.consumer
    assert group_name is not None and consumer_name is not None
    stream = ctx.snapshot.stream(key)
    group = ctx.snapshot.group(key, group_name)
    assert stream is not None and group is not None
    existing = ctx.snapshot.consumer(key, group_name, consumer_name)
    consumer = replace(existing, seen_time=ctx.now) if existing else ConsumerMeta(consumer_name, ctx.now)
    count = request.count or None
    if after is not None:
        served = _serve_history(ctx, key, group_name, consumer_name, after, count)
        ctx.plan.add(Write(consumer_row(key, group_name, consumer, ctx.txn)))
        put_group(ctx, group, group)
        return key, served
    claimed = []
    if claim_min_idle is not None:
        claimed = _claim_idle(ctx, key, group_name, consumer_name, claim_min_idle, count)
    remaining = None if count is None else count - len(claimed)
    entries = (
        ctx.snapshot.entries(key, group.last_id.incr(), MAX_ID, remaining)
        if stream.length and group.last_id != MAX_ID and remaining != 0
        else []
    )
    if not entries and not claimed:
        # Redis creates (and touches) the consumer only for a stream it serves: nothing to commit.
        return None
    if claimed or not request.noack:
        consumer = replace(consumer, active_time=ctx.now)
    ctx.plan.add(Write(consumer_row(key, group_name, consumer, ctx.txn)))
    # One write per PEL row: an ID claimed and then delivered again as new (after XGROUP SETID moved
    # the cursor back) ends as the new delivery, as in Redis.
    pel_writes = {pending.id: pending for pending, _ in claimed}
    moved = group
    for entry in entries:
        if entry.id > moved.last_id:
            moved = replace(moved, entries_read=entries_read_after_delivery(stream, moved, entry.id), last_id=entry.id)
        if not request.noack:
            # A new NACK and a NACK re-delivered after XGROUP SETID moved backwards end up identical.
            pel_writes[entry.id] = PendingEntry(entry.id, consumer_name, ctx.now, 1)
    for pending in pel_writes.values():
        ctx.plan.add(Write(pending_row(key, group_name, pending, ctx.txn)))
    put_group(ctx, group, moved)
    new_meta = (0, 0) if claim_min_idle is not None else None
    items: list[ReadItem] = [item for _, item in claimed]
    items.extend((entry.id, entry, new_meta) for entry in entries)
    return key, items


def _claim_idle(
    ctx: Context, key: str, group: str, consumer: str, min_idle: int, count: int | None
) -> list[tuple[PendingEntry, ReadItem]]:
    """CLAIM's first phase: the group's XNACKed entries (first NACKed first), then its entries idle >=
    min_idle, oldest delivery first, at most
    ``count``, each moved to ``consumer`` with its delivery counted; entries deleted from the stream
    are skipped and stay pending. Returns each claim's new PEL row and its reply item."""
    claimed: list[tuple[PendingEntry, ReadItem]] = []
    limit = None if count is None else max(2 * count, 16)
    seen = 0
    while True:
        # Deleted entries do not count towards COUNT: read further when they left the batch short.
        batch = ctx.snapshot.idle_pending(key, group, ctx.now - min_idle, limit)
        live = ctx.snapshot.entries_by_id(key, [p.id for p in batch[seen:]])
        for pending in batch[seen:]:
            entry = live.get(pending.id)
            if entry is None:
                continue
            moved = PendingEntry(pending.id, consumer, ctx.now, min(pending.delivery_count + 1, LLONG_MAX))
            claimed.append((moved, (pending.id, entry, (pending.idle(ctx.now), pending.delivery_count))))
            if count is not None and len(claimed) == count:
                return claimed
        if limit is None or len(batch) < limit:
            return claimed
        seen, limit = len(batch), limit * 4


def _serve_history(
    ctx: Context, key: str, group: str, consumer: str, after: StreamId, count: int | None
) -> list[ReadItem]:
    if after == MAX_ID:
        return []
    own = ctx.snapshot.pending(key, group, after.incr(), MAX_ID, count, owner=consumer)
    live = ctx.snapshot.entries_by_id(key, [p.id for p in own]) if own else {}
    served: list[ReadItem] = []
    for nack in own:
        entry = live.get(nack.id)
        if entry is not None:
            bumped = replace(nack, delivery_time=ctx.now, delivery_count=nack.delivery_count + 1)
            ctx.plan.add(Write(pending_row(key, group, bumped, ctx.txn)))
        served.append((nack.id, entry, None))
    return served


def run_xread(ctx: Context, request: Read) -> list[StreamReply] | None:
    """One pass of XREAD (read-only); None when nothing was served."""
    afters: list[StreamId | None] = []
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        meta = ctx.snapshot.stream(key)
        if is_token(id_arg, "$"):
            afters.append(meta.last_id if meta is not None else ZERO_ID)
        elif is_token(id_arg, ">"):
            raise ReplyError(ERR_GT_IN_XREAD)
        else:
            afters.append(parse_id(id_arg, strict=True))
    served: list[StreamReply] = []
    for key, after in zip(request.keys, afters, strict=True):
        meta = ctx.snapshot.stream(key)
        if meta is None or not meta.length or after is None or after == MAX_ID:
            continue
        entries = ctx.snapshot.entries(key, after.incr(), MAX_ID, request.count or None)
        if entries:
            served.append((key, [(entry.id, entry, None) for entry in entries]))
    return served or None


def has_new_entries(ctx: Context, request: Read) -> bool:
    """Whether a blocked ``>`` read (or XREAD) would now be served: the cheap check between polls.

    A blocked XREADGROUP whose stream or group went away gets the error Redis unblocks it with."""
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        meta = ctx.snapshot.stream(key)
        if meta is None:
            if request.group is not None:
                raise ReplyError(UNBLOCKED_STREAM_DELETED)  # as Redis unblocks a reader of a deleted key
            continue
        if request.group is not None:
            group = ctx.snapshot.group(key, request.group)
            if group is None:
                raise ReplyError(NOGROUP_BLOCKED_GROUP_DESTROYED)
            after = group.last_id
        elif is_token(id_arg, "$"):
            continue
        else:
            after = parse_id(id_arg, strict=True)
        if after != MAX_ID and ctx.snapshot.entry_ids(key, after.incr(), MAX_ID, 1):
            return True
        # CLAIM also wakes when a pending entry has been idle long enough (Redis sets a deadline).
        claim = request.claim_min_idle
        if (
            claim is not None
            and request.group is not None
            and ctx.snapshot.idle_pending(key, request.group, ctx.now - claim, 1)
        ):
            return True
    return False

"""Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, DEL and EXISTS.

Each command has a pure parser (argv → typed request, Redis' validation order and error texts) and
a ``run`` function that decides on a snapshot and adds the command's writes to the context's plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamclaim_spark import _constants as C
from streamclaim_spark.commands.args import int_arg, is_token, is_word, payload_bytes, require_text
from streamclaim_spark.context import Context
from streamclaim_spark.errors import SYNTAX, ReplyError, wrong_arity
from streamclaim_spark.ids import MAX_ID, ZERO_ID, StreamId, parse_id, parse_range_end, parse_range_start, parse_xadd_id
from streamclaim_spark.model import (
    Entry,
    FieldPairs,
    GroupMeta,
    StreamMeta,
    Write,
    entry_key,
    entry_row,
    group_head_row,
    stream_head_key,
    stream_head_row,
)
from streamclaim_spark.replies import OK
from streamclaim_spark.schema import group_partition, in_partitions, stream_partition
from streamclaim_spark.snapshot import Need, Scan, id_at_most, stored_id
from streamclaim_spark.transaction import source_frame_for_deletes

MAXLEN = "MAXLEN"
MINID = "MINID"

ERR_MAXLEN_AND_MINID = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
ERR_MAXLEN_NEGATIVE = "ERR The MAXLEN argument must be >= 0."
ERR_LIMIT_NEGATIVE = "ERR The LIMIT argument must be >= 0."
ERR_LIMIT_WITHOUT_STRATEGY = "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
ERR_LIMIT_WITHOUT_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
ERR_XTRIM_NO_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
ERR_XADD_ZERO_ID = "ERR The ID specified in XADD must be greater than 0-0"
ERR_XADD_ID_TOO_SMALL = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
ERR_ELEMENTS_TOO_LARGE = "ERR Elements are too large to be stored"
ERR_XADD_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ERR_XSETID_SMALLER_THAN_PROVIDED_MAX_DELETED = (
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
)
ERR_XSETID_SMALLER_THAN_TOP = "ERR The ID specified in XSETID is smaller than the target stream top item"
ERR_XSETID_ENTRIES_ADDED_SMALL = "ERR The entries_added specified in XSETID is smaller than the target stream length"
ERR_ENTRIES_ADDED_NEGATIVE = "ERR entries_added must be positive"

# Without LIMIT, Redis caps an approximate trim at 100 x stream-node-max-entries (default 100).
DEFAULT_APPROX_TRIM_LIMIT = 10_000
# Redis keeps a stream in listpack nodes of up to stream-node-max-entries (default 100) entries and trims
# with ``~`` by whole nodes only. The store has no nodes: a ``~`` trim under KEEPREF counts chunks of this
# many live entries from the oldest (the newest may be partial) and removes whole chunks only.
NODE_ENTRIES = 100


class RefPolicy(Enum):
    """What deleting an entry does to the consumer groups' references to it (Redis 8.2).

    KEEPREF (the default) leaves PEL entries dangling, as XDEL does; DELREF removes the ID from every
    group's PEL; ACKED deletes only entries no group references: in no PEL, and read by every group.
    """

    KEEPREF = "KEEPREF"
    DELREF = "DELREF"
    ACKED = "ACKED"


def policy_named(token: str) -> RefPolicy | None:
    return next((p for p in RefPolicy if is_word(token, p.value)), None)


@dataclass(frozen=True)
class Trim:
    """A trimming request: MAXLEN n or MINID id, exact or approximate (``~``) with a LIMIT, under a
    reference policy (XADD/XTRIM's KEEPREF | DELREF | ACKED).

    An approximate KEEPREF trim removes whole chunks of ``NODE_ENTRIES`` only, as Redis removes whole
    nodes, and at most ``limit`` entries (0: no cap); under DELREF and ACKED, as in Redis, ``~`` trims
    entry by entry, capped at ``limit``. Either way it never removes more than the exact form would, and
    the reply is the true number removed.
    """

    strategy: str
    max_length: int = 0
    min_id: StreamId = ZERO_ID
    approximate: bool = False
    limit: int = 0
    policy: RefPolicy = RefPolicy.KEEPREF


@dataclass(frozen=True)
class XAdd:
    key: str
    fields: FieldPairs
    id: StreamId | None = None  # None: "*"
    seq_given: bool = True
    nomkstream: bool = False
    trim: Trim | None = None


# --- parsing ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AddOrTrimArgs:
    id_position: int
    explicit: tuple[StreamId, bool] | None
    trim: Trim | None
    nomkstream: bool


def _parse_add_or_trim(argv: Sequence[str], xadd: bool) -> _AddOrTrimArgs:
    """Redis' streamParseAddOrTrimArgsOrReply, option by option, in the server's order of checks."""
    strategy: str | None = None
    approximate = False
    max_length = 0
    min_id = ZERO_ID
    limit = 0
    limit_given = False
    nomkstream = False
    policy: RefPolicy | None = None
    explicit: tuple[StreamId, bool] | None = None
    i = 2
    while i < len(argv):
        more = len(argv) - 1 - i
        option = argv[i]
        if xadd and is_token(option, "*"):
            break
        if (is_word(option, MAXLEN) or is_word(option, MINID)) and more:
            if strategy is not None:
                raise ReplyError(ERR_MAXLEN_AND_MINID)
            approximate = False
            following = argv[i + 1]
            if more >= 2 and is_token(following, "~"):
                approximate = True
                i += 1
            elif more >= 2 and is_token(following, "="):
                i += 1
            if is_word(option, MAXLEN):
                max_length = int_arg(argv[i + 1])
                if max_length < 0:
                    raise ReplyError(ERR_MAXLEN_NEGATIVE)
                strategy = MAXLEN
            else:
                min_id = parse_id(argv[i + 1], strict=True)
                strategy = MINID
            i += 1
        elif is_word(option, "LIMIT") and more:
            limit = int_arg(argv[i + 1])
            if limit < 0:
                raise ReplyError(ERR_LIMIT_NEGATIVE)
            limit_given = True
            i += 1
        elif xadd and is_word(option, "NOMKSTREAM"):
            nomkstream = True
        elif policy is None and (named := policy_named(option)) is not None:
            # Each token once: a second policy is read as XADD's ID (an ID error) or, in XTRIM, a syntax error.
            policy = named
        elif xadd:
            explicit = parse_xadd_id(option)
            break
        else:
            raise ReplyError(SYNTAX)
        i += 1
    if limit and strategy is None:
        raise ReplyError(ERR_LIMIT_WITHOUT_STRATEGY)
    if not xadd and strategy is None:
        raise ReplyError(ERR_XTRIM_NO_STRATEGY)
    if limit_given:
        if not approximate:
            raise ReplyError(ERR_LIMIT_WITHOUT_APPROX)
    elif approximate:
        limit = DEFAULT_APPROX_TRIM_LIMIT
    trim = None
    if strategy is not None:
        trim = Trim(strategy, max_length, min_id, approximate, limit, policy or RefPolicy.KEEPREF)
    return _AddOrTrimArgs(i, explicit, trim, nomkstream)


def parse_xadd(argv: Sequence[str]) -> XAdd:
    parsed = _parse_add_or_trim(argv, xadd=True)
    field_position = parsed.id_position + 1
    remaining = len(argv) - field_position
    if remaining < 2 or remaining % 2 == 1:
        raise wrong_arity("xadd")
    require_text(argv, field_position)
    values = [payload_bytes(token) for token in argv[field_position:]]
    fields = tuple(zip(values[0::2], values[1::2], strict=True))
    request = XAdd(key=argv[1], fields=fields, nomkstream=parsed.nomkstream, trim=parsed.trim)
    if parsed.explicit is not None:
        request = replace(request, id=parsed.explicit[0], seq_given=parsed.explicit[1])
    return request


def parse_xtrim(argv: Sequence[str]) -> Trim:
    trim = _parse_add_or_trim(argv, xadd=False).trim
    assert trim is not None
    return trim


@dataclass(frozen=True)
class XRange:
    key: str
    low: StreamId
    high: StreamId
    count: int | None  # None: no COUNT given
    reverse: bool


def parse_xrange(argv: Sequence[str], reverse: bool) -> XRange:
    start_arg, end_arg = (argv[3], argv[2]) if reverse else (argv[2], argv[3])
    low = parse_range_start(start_arg)
    high = parse_range_end(end_arg)
    count: int | None = None
    j = 4
    while j < len(argv):
        if is_word(argv[j], "COUNT") and len(argv) - j - 1 >= 1:
            count = max(0, int_arg(argv[j + 1]))
            j += 2
        else:
            raise ReplyError(SYNTAX)
    return XRange(argv[1], low, high, count, reverse)


def parse_ids(tokens: Sequence[str]) -> list[StreamId]:
    """Strict IDs, all or nothing (XDEL, XACK)."""
    return [parse_id(token, strict=True) for token in tokens]


def parse_ids_deferred(tokens: Sequence[str]) -> tuple[list[StreamId], ReplyError | None]:
    """Strict IDs, or none and the error to raise later: commands that answer for a missing key or
    group before they validate IDs (XACK, XACKDEL, XDELEX) still read everything in one query."""
    try:
        return parse_ids(tokens), None
    except ReplyError as error:
        return [], error


@dataclass(frozen=True)
class XSetId:
    key: str
    last_id: StreamId
    entries_added: int | None
    max_deleted_id: StreamId | None


def parse_xsetid(argv: Sequence[str]) -> XSetId:
    last_id = parse_id(argv[2], strict=True)
    entries_added: int | None = None
    max_deleted: StreamId | None = None
    i = 3
    while i < len(argv):
        more = len(argv) - 1 - i
        if is_word(argv[i], "ENTRIESADDED") and more:
            entries_added = int_arg(argv[i + 1])
            if entries_added < 0:
                raise ReplyError(ERR_ENTRIES_ADDED_NEGATIVE)
        elif is_word(argv[i], "MAXDELETEDID") and more:
            max_deleted = parse_id(argv[i + 1], strict=True)
            if last_id < max_deleted:
                raise ReplyError(ERR_XSETID_SMALLER_THAN_PROVIDED_MAX_DELETED)
        else:
            raise ReplyError(SYNTAX)
        i += 2
    return XSetId(argv[1], last_id, entries_added, max_deleted)


# --- running --------------------------------------------------------------------------------------------


def put_stream_head(ctx: Context, before: StreamMeta | None, after: StreamMeta) -> None:
    """Writes the stream head, guarded on the version the command read (absent: must still be absent)."""
    expect = before.version if before is not None else None
    base = after if before is not None else replace(after, version=-1)
    ctx.plan.add(Write(stream_head_row(base, ctx.txn), guard=True, expect_version=expect))


def put_group(ctx: Context, before: GroupMeta, after: GroupMeta) -> None:
    """Writes the group head, guarded on the version read (every write to a group bumps it); with
    ``after`` = ``before`` it only guards: the commit fails if the group moved since the read."""
    ctx.plan.add(Write(group_head_row(after, ctx.txn), guard=True, expect_version=before.version))


def run_xadd(ctx: Context, request: XAdd) -> StreamId | None:
    """Appends an entry, as XADD does; returns its ID, or None under NOMKSTREAM on a missing key."""
    if request.id is not None and request.seq_given and request.id.is_zero:
        raise ReplyError(ERR_XADD_ZERO_ID)
    meta = ctx.snapshot.stream(request.key)
    if meta is None:
        if request.nomkstream:
            return None
        current = StreamMeta(request.key)
    else:
        current = meta
    if current.last_id == MAX_ID:
        raise ReplyError(ERR_XADD_EXHAUSTED)
    new_id = next_entry_id(current.last_id, request.id, request.seq_given, ctx.now)
    entry = Entry(new_id, request.fields)
    after = replace(
        current,
        last_id=new_id,
        length=current.length + 1,
        entries_added=current.entries_added + 1,
        first_id=new_id if current.length == 0 else current.first_id,
    )
    keep_new_entry = True
    if request.trim is not None:
        after, keep_new_entry = _trim(ctx, after, request.trim, new_entry=entry)
    if keep_new_entry:
        ctx.plan.add(Write(entry_row(request.key, entry, ctx.txn)))
    put_stream_head(ctx, meta, after)
    return new_id


def next_entry_id(last_id: StreamId, given: StreamId | None, seq_given: bool, now: int) -> StreamId:
    """The ID XADD assigns (streamAppendItem): ``*``, ``ms-*`` or explicit, strictly above ``last_id``."""
    if given is None:
        new_id = StreamId(now, 0) if now > last_id.ms else last_id.incr()
    elif seq_given:
        new_id = given
    elif given.ms == last_id.ms:
        if last_id.seq == MAX_ID.seq:
            # Redis 7.0 reports this overflow with the ERANGE text (streamAppendItem sets errno so).
            raise ReplyError(ERR_ELEMENTS_TOO_LARGE)
        new_id = StreamId(last_id.ms, last_id.seq + 1)
    else:
        new_id = given
    if new_id <= last_id:
        raise ReplyError(ERR_XADD_ID_TOO_SMALL)
    return new_id


def run_xtrim(ctx: Context, key: str, trim: Trim) -> int:
    meta = ctx.snapshot.stream(key)
    if meta is None:
        return 0
    after, _ = _trim(ctx, meta, trim, new_entry=None)
    removed = meta.length - after.length
    if removed:
        put_stream_head(ctx, meta, after)
    return removed


def _trim(ctx: Context, meta: StreamMeta, trim: Trim, new_entry: Entry | None) -> tuple[StreamMeta, bool]:
    """Removes entries as the trim asks; ``new_entry`` is appended but not stored yet.

    Returns the stream head after trimming and whether the new entry survived it. With no consumer
    groups nothing is referenced: DELREF and ACKED delete what KEEPREF would (under ``~`` entry by
    entry, where KEEPREF removes whole chunks).
    """
    groups = ctx.snapshot.groups(meta.key) if trim.policy is not RefPolicy.KEEPREF and meta.groups else []
    if trim.policy is RefPolicy.ACKED and groups:
        return _trim_unreferenced(ctx, meta, trim, new_entry, groups)
    return _trim_oldest(ctx, meta, trim, new_entry, groups)


def _wanted_removals(ctx: Context, meta: StreamMeta, trim: Trim, new_entry: Entry | None) -> int:
    """How many entries the trim removes when nothing holds any back: past MAXLEN, or below MINID;
    under ``~``, whole chunks of them (KEEPREF) or at most LIMIT of them (DELREF, ACKED)."""
    if trim.strategy == MAXLEN:
        wanted = max(0, meta.length - trim.max_length)
    else:
        below = ctx.snapshot.count_entries(meta.key, ZERO_ID, trim.min_id.decr()) if not trim.min_id.is_zero else 0
        new_below = 1 if new_entry is not None and new_entry.id < trim.min_id else 0
        wanted = below + new_below
    if not trim.approximate:
        return wanted
    if trim.policy is RefPolicy.KEEPREF:
        return whole_node_removals(meta.length, wanted, trim.limit)
    return min(wanted, trim.limit) if trim.limit else wanted


def whole_node_removals(length: int, wanted: int, limit: int) -> int:
    """Entries a ``~`` trim removes by whole chunks of NODE_ENTRIES, oldest first (Redis' streamTrim).

    A chunk goes only if the exact trim would remove all of it (it removes the oldest ``wanted``) and
    the total stays within ``limit`` (0: no cap); the first chunk that cannot go ends the trim. So an
    ``XADD ... MAXLEN ~ n`` on a long stream trims once per NODE_ENTRIES additions, not on every one.
    """
    removed = 0
    while removed < length:
        size = min(NODE_ENTRIES, length - removed)
        if removed + size > wanted or (limit and removed + size > limit):
            break
        removed += size
    return removed


def _trim_oldest(
    ctx: Context, meta: StreamMeta, trim: Trim, new_entry: Entry | None, groups: Sequence[GroupMeta]
) -> tuple[StreamMeta, bool]:
    """KEEPREF and DELREF: the oldest entries go; under DELREF (``groups`` given) their IDs leave every PEL."""
    to_remove = _wanted_removals(ctx, meta, trim, new_entry)
    if to_remove == 0:
        return meta, True
    stored_length = meta.length - (1 if new_entry is not None else 0)
    from_stored = min(to_remove, stored_length)
    new_entry_removed = to_remove > stored_length
    if from_stored:
        oldest = (
            ctx.snapshot.partition(stream_partition(meta.key), C.KIND_ENTRY)
            .orderBy(C.ID_MS, C.ID_SEQ)
            .limit(from_stored)
        )
        ctx.plan.add_frame(source_frame_for_deletes(oldest), stream_partition(meta.key))
        if groups:
            _delete_references(ctx, meta.key, groups, oldest)
    length = meta.length - to_remove
    if length == 0:
        first_id = ZERO_ID
    elif from_stored < stored_length:
        first_id = ctx.snapshot.nth_entry_id(meta.key, from_stored)
    else:
        assert new_entry is not None
        first_id = new_entry.id
    return replace(meta, length=length, first_id=first_id), not new_entry_removed


def _trim_unreferenced(
    ctx: Context, meta: StreamMeta, trim: Trim, new_entry: Entry | None, groups: Sequence[GroupMeta]
) -> tuple[StreamMeta, bool]:
    """ACKED: walks the entries oldest first, skipping every entry a group still references, and
    deletes until the trim is satisfied (so under MAXLEN newer entries can go while older ones stay).

    Referenced (Redis' streamEntryIsReferenced): after some group's last-delivered ID, or in any PEL.
    One query counts what goes and finds the new first entry; the deletion itself is a frame.
    """
    wanted = _wanted_removals(ctx, meta, trim, new_entry) if trim.strategy == MAXLEN else _minid_cap(meta, trim)
    if wanted == 0:
        return meta, True
    horizon = min(g.last_id for g in groups)  # every group has read up to here
    if trim.strategy == MINID:
        if trim.min_id.is_zero:
            return meta, True
        horizon = min(horizon, trim.min_id.decr())
    entries = ctx.snapshot.partition(stream_partition(meta.key), C.KIND_ENTRY)
    pending = ctx.snapshot.pending_frames(meta.key, [g.name for g in groups]).select(C.ID_MS, C.ID_SEQ)
    chosen = (
        entries.where(id_at_most(horizon))
        .join(pending, [C.ID_MS, C.ID_SEQ], "left_anti")
        .orderBy(C.ID_MS, C.ID_SEQ)
        .limit(wanted)
    )
    gone = chosen.select(C.ID_MS, C.ID_SEQ, F.lit(True).alias("_gone"))
    counted = (
        entries.join(gone, [C.ID_MS, C.ID_SEQ], "left")
        .agg(
            F.count("_gone").alias("removed"),
            F.min(F.when(F.col("_gone").isNull(), F.struct(C.ID_MS, C.ID_SEQ))).alias("first"),
        )
        .first()
    )
    assert counted is not None
    removed = int(counted["removed"])
    new_entry_removed = (
        new_entry is not None and removed < wanted and new_entry.id <= horizon
    )  # it is in no PEL, and last in the walk
    if removed:
        ctx.plan.add_frame(source_frame_for_deletes(chosen), stream_partition(meta.key))
        for group in groups:
            put_group(ctx, group, group)
    length = meta.length - removed - (1 if new_entry_removed else 0)
    if length == 0:
        first_id = ZERO_ID
    elif counted["first"] is not None:
        first_id = stored_id(counted["first"])
    else:
        assert new_entry is not None
        first_id = new_entry.id
    if length == meta.length:
        return meta, True
    return replace(meta, length=length, first_id=first_id), not new_entry_removed


def delete_pending_ids(ctx: Context, key: str, groups: Sequence[GroupMeta], ids: DataFrame) -> None:
    """Deletes, in the plan's MERGE, the PEL rows of ``groups`` whose IDs are among ``ids`` (DELREF)."""
    references = ctx.snapshot.pending_frames(key, [g.name for g in groups]).join(
        ids.select(C.ID_MS, C.ID_SEQ), [C.ID_MS, C.ID_SEQ], "left_semi"
    )
    ctx.plan.add_frame(source_frame_for_deletes(references), *(group_partition(key, g.name) for g in groups))


def _minid_cap(meta: StreamMeta, trim: Trim) -> int:
    """MINID under ACKED removes every unreferenced entry below the threshold, up to the LIMIT."""
    return min(meta.length, trim.limit) if trim.approximate and trim.limit else meta.length


def _delete_references(ctx: Context, key: str, groups: Sequence[GroupMeta], trimmed: DataFrame) -> None:
    """DELREF: removes the trimmed entries' IDs from every group's PEL, and guards every group's head
    so a concurrent delivery of a trimmed entry makes the trim re-run instead of leaving a reference.

    Only the entries this trim deletes lose their references; a dangling reference to an entry deleted
    earlier stays (as in Redis 8.2, whose XTRIM DELREF skips entries already deleted).
    """
    delete_pending_ids(ctx, key, groups, trimmed)
    for group in groups:
        put_group(ctx, group, group)


def run_xrange(ctx: Context, request: XRange) -> list[Entry] | None:
    """Entries of the range; None stands for Redis' null array (COUNT 0 on an existing key)."""
    scan = Scan(request.low, request.high, request.count, request.reverse)
    ctx.snapshot.prefetch(Need(request.key, entry_scan=scan))  # the head and the range in one query
    meta = ctx.snapshot.stream(request.key)
    if meta is None:
        return []
    if request.count == 0:
        return None
    return ctx.snapshot.entries(request.key, request.low, request.high, request.count, request.reverse)


def run_xlen(ctx: Context, key: str) -> int:
    meta = ctx.snapshot.stream(key)
    return 0 if meta is None else meta.length


def run_xdel(ctx: Context, key: str, tokens: Sequence[str]) -> int:
    meta = ctx.snapshot.stream(key)
    if meta is None:
        return 0
    ids = parse_ids(tokens)
    existing = ctx.snapshot.entries_by_id(key, ids)
    delete_entries(ctx, meta, set(existing))
    return len(existing)


def delete_entries(ctx: Context, meta: StreamMeta, existing: set[StreamId]) -> None:
    """Deletes live entries as XDEL does: the rows go, the head's length, first ID and max-deleted ID follow."""
    if not existing:
        return
    for entry_id in existing:
        ctx.plan.add(Write(entry_key(meta.key, entry_id), delete=True))
    length = meta.length - len(existing)
    first_id = meta.first_id
    if length == 0:
        first_id = ZERO_ID
    elif meta.first_id in existing:
        candidates = ctx.snapshot.entry_ids(meta.key, meta.first_id, MAX_ID, count=len(existing) + 1)
        first_id = next(i for i in candidates if i not in existing)
    after = replace(
        meta,
        length=length,
        first_id=first_id,
        max_deleted_id=max(meta.max_deleted_id, *existing),
    )
    put_stream_head(ctx, meta, after)


def run_xsetid(ctx: Context, request: XSetId) -> str:
    meta = ctx.snapshot.stream(request.key)
    if meta is None:
        raise ReplyError("ERR no such key")
    if meta.length > 0:
        top = ctx.snapshot.last_entry_id(request.key)
        if top is not None and request.last_id < top:
            raise ReplyError(ERR_XSETID_SMALLER_THAN_TOP)
        if request.entries_added is not None and meta.length > request.entries_added:
            raise ReplyError(ERR_XSETID_ENTRIES_ADDED_SMALL)
    after = replace(meta, last_id=request.last_id)
    if request.entries_added is not None:
        after = replace(after, entries_added=request.entries_added)
    if request.max_deleted_id is not None and not request.max_deleted_id.is_zero:
        after = replace(after, max_deleted_id=request.max_deleted_id)
    put_stream_head(ctx, meta, after)
    return OK


def run_del(ctx: Context, keys: Sequence[str]) -> int:
    """Deletes stream keys with their groups in one commit; returns how many existed."""
    deleted = 0
    for key in dict.fromkeys(keys):
        meta = ctx.snapshot.stream(key)
        if meta is None:
            continue
        deleted += 1
        delete_stream(ctx, meta)
    return deleted


def delete_stream(ctx: Context, meta: StreamMeta) -> None:
    """Adds the writes that remove a stream, its entries and all its groups' rows."""
    ctx.plan.add(Write(stream_head_key(meta.key), delete=True, guard=True, expect_version=meta.version))
    partitions = [stream_partition(meta.key)]
    for group in ctx.snapshot.groups(meta.key):
        ctx.plan.add(Write(group_head_row(group, ctx.txn), delete=True, guard=True, expect_version=group.version))
        partitions.append(group_partition(meta.key, group.name))
    rows = ctx.snapshot.frame().where(in_partitions(partitions) & ~F.col(C.ROW_KIND).isin(*C.HEAD_KINDS))
    for partition in partitions:
        ctx.plan.partitions.add(partition)
    ctx.plan.frames.append(source_frame_for_deletes(rows))


def run_exists(ctx: Context, keys: Sequence[str]) -> int:
    return sum(1 for key in keys if ctx.snapshot.stream(key) is not None)

"""Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, DEL and EXISTS.

Each command has a pure parser (argv → typed request, Redis' validation order and error texts) and
a ``run`` function that decides on a snapshot and adds the command's writes to the context's plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from streamclaim_spark.commands.args import int_arg, is_word, payload_bytes, require_text
from streamclaim_spark.commands.trimming import (
    Trim,
    parse_add_or_trim,
    trim_stream,
)
from streamclaim_spark.core.ids import MAX_ID, StreamId, parse_id, parse_range_end, parse_range_start
from streamclaim_spark.core.model import (
    Entry,
    FieldPairs,
    Need,
    Scan,
    StreamMeta,
    Write,
    entry_row,
)
from streamclaim_spark.core.replies import OK
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import delete_entries, delete_stream, put_stream_head
from streamclaim_spark.errors import (
    ERR_ELEMENTS_TOO_LARGE,
    ERR_ENTRIES_ADDED_NEGATIVE,
    ERR_XADD_EXHAUSTED,
    ERR_XADD_ID_TOO_SMALL,
    ERR_XADD_ZERO_ID,
    ERR_XSETID_ENTRIES_ADDED_SMALL,
    ERR_XSETID_SMALLER_THAN_PROVIDED_MAX_DELETED,
    ERR_XSETID_SMALLER_THAN_TOP,
    NO_SUCH_KEY,
    SYNTAX,
    ReplyError,
    wrong_arity,
)


@dataclass(frozen=True)
class XAdd:
    key: str
    fields: FieldPairs
    id: StreamId | None = None  # None: "*"
    seq_given: bool = True
    nomkstream: bool = False
    trim: Trim | None = None


# --- parsing ------------------------------------------------------------------------------------------


def parse_xadd(argv: Sequence[str]) -> XAdd:
    parsed = parse_add_or_trim(argv, xadd=True)
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
        after, keep_new_entry = trim_stream(ctx, after, request.trim, new_entry=entry)
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


def run_xsetid(ctx: Context, request: XSetId) -> str:
    meta = ctx.snapshot.stream(request.key)
    if meta is None:
        raise ReplyError(NO_SUCH_KEY)
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


def run_exists(ctx: Context, keys: Sequence[str]) -> int:
    return sum(1 for key in keys if ctx.snapshot.stream(key) is not None)

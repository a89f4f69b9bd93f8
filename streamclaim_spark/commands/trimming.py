"""XTRIM, and the trimming options XADD shares with it (Redis' streamParseAddOrTrimArgsOrReply).

MAXLEN and MINID, exact or approximate with a LIMIT, under a reference policy (KEEPREF, DELREF, ACKED):
the parser follows Redis' order of checks and error texts; ``trim_stream`` decides on a snapshot which
entries go and adds their deletes, and under DELREF the groups' references, to the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamclaim_spark.commands.args import int_arg, is_token, is_word
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import ZERO_ID, StreamId, parse_id, parse_xadd_id
from streamclaim_spark.core.model import (
    Entry,
    GroupMeta,
    RefPolicy,
    StreamMeta,
)
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame_for_deletes
from streamclaim_spark.engine.writes import delete_pending_ids, put_group, put_stream_head
from streamclaim_spark.errors import (
    ERR_LIMIT_NEGATIVE,
    ERR_LIMIT_WITHOUT_APPROX,
    ERR_LIMIT_WITHOUT_STRATEGY,
    ERR_MAXLEN_AND_MINID,
    ERR_MAXLEN_NEGATIVE,
    ERR_XTRIM_NO_STRATEGY,
    SYNTAX,
    ReplyError,
)
from streamclaim_spark.state.columns import id_at_most, stored_id

MAXLEN = "MAXLEN"
MINID = "MINID"

# Without LIMIT, Redis caps an approximate trim at 100 x stream-node-max-entries (default 100).
DEFAULT_APPROX_TRIM_LIMIT = 10_000
# Redis keeps a stream in listpack nodes of up to stream-node-max-entries (default 100) entries and trims
# with ``~`` by whole nodes only. The store has no nodes: a ``~`` trim under KEEPREF counts chunks of this
# many live entries from the oldest (the newest may be partial) and removes whole chunks only.
NODE_ENTRIES = 100


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
class AddOrTrimArgs:
    id_position: int
    explicit: tuple[StreamId, bool] | None
    trim: Trim | None
    nomkstream: bool


# Long: it mirrors Redis' streamParseAddOrTrimArgsOrReply branch for branch, so that its order of checks
# (hence which error a bad command gets) can be read against the server's source side by side.
def parse_add_or_trim(argv: Sequence[str], xadd: bool) -> AddOrTrimArgs:
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
    return AddOrTrimArgs(i, explicit, trim, nomkstream)


def parse_xtrim(argv: Sequence[str]) -> Trim:
    trim = parse_add_or_trim(argv, xadd=False).trim
    assert trim is not None
    return trim


def run_xtrim(ctx: Context, key: str, trim: Trim) -> int:
    meta = ctx.snapshot.stream(key)
    if meta is None:
        return 0
    after, _ = trim_stream(ctx, meta, trim, new_entry=None)
    removed = meta.length - after.length
    if removed:
        put_stream_head(ctx, meta, after)
    return removed


def trim_stream(ctx: Context, meta: StreamMeta, trim: Trim, new_entry: Entry | None) -> tuple[StreamMeta, bool]:
    """Removes entries as the trim asks; ``new_entry`` is appended but not stored yet.

    Returns the stream head after trimming and whether the new entry survived it. With no consumer
    groups nothing is referenced: DELREF and ACKED delete what KEEPREF would (under ``~`` entry by
    entry, where KEEPREF removes whole chunks).
    """
    groups = ctx.snapshot.groups(meta.key) if trim.policy is not RefPolicy.KEEPREF and meta.groups else []
    if trim.policy is RefPolicy.ACKED and groups:
        after, kept = _trim_unreferenced(ctx, meta, trim, new_entry, groups)
    else:
        after, kept = _trim_oldest(ctx, meta, trim, new_entry, groups)
    # Under KEEPREF a group's PEL may now name a trimmed entry; ACKED trims only unreferenced entries and
    # DELREF deletes the references with them.
    if after.length < meta.length and meta.groups and trim.policy is RefPolicy.KEEPREF:
        after = replace(after, some_deleted=True)
    return after, kept


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

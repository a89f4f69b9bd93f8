"""Bulk paths for data that is already a DataFrame: append, deliver and acknowledge many entries.

Each call is one guarded MERGE, like a single command: ``append`` assigns IDs as a run of ``XADD *``
would (one millisecond, consecutive sequence numbers), ``deliver`` does what ``XREADGROUP ... >``
does for up to ``count`` entries, ``acknowledge`` what ``XACK`` does and ``acknowledge_and_delete``
what ``XACKDEL`` does, for any number of IDs, without collecting anything to the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, LongType, StringType, StructField, StructType

from streamclaim_spark import _constants as C
from streamclaim_spark.columns import id_at_least, id_at_most, id_text, stored_id
from streamclaim_spark.commands.args import is_token
from streamclaim_spark.commands.groups import group_or_nogroup
from streamclaim_spark.context import Context
from streamclaim_spark.errors import BUSYGROUP, XGROUP_KEY_REQUIRED, ReplyError, nogroup_xreadgroup
from streamclaim_spark.ids import MAX_ID, ZERO_ID, StreamId, parse_id, to_stored
from streamclaim_spark.lag import entries_read_after_delivery, estimate_entries_read, range_has_tombstones
from streamclaim_spark.model import ConsumerMeta, GroupMeta, RefPolicy, StreamMeta, Write, consumer_row, group_head_row
from streamclaim_spark.partitions import group_partition, stream_partition
from streamclaim_spark.schema import FIELD_PAIR, STATE_SCHEMA, in_partitions
from streamclaim_spark.snapshot import Need
from streamclaim_spark.transaction import json_frame, source_frame, source_frame_for_deletes
from streamclaim_spark.writes import delete_pending_ids, put_group, put_stream_head

if TYPE_CHECKING:
    from streamclaim_spark.runner import Runner


@dataclass(frozen=True)
class BulkAppend:
    """What ``append`` added: ``count`` entries; for one stream with IDs ``first_id`` .. ``last_id``.

    ``streams`` maps each stream to (entries added, first ID, last ID).
    """

    count: int
    first_id: StreamId | None
    last_id: StreamId | None
    version: int | None
    streams: dict[str, tuple[int, StreamId, StreamId]] = field(default_factory=dict)


@dataclass(frozen=True)
class BulkAck:
    """What ``acknowledge`` removed from the group's PEL: ``count`` entries."""

    count: int
    version: int | None


@dataclass(frozen=True)
class BulkAckDel:
    """What ``acknowledge_and_delete`` did: ``acknowledged`` PEL entries removed from the group,
    ``deleted`` stream entries removed, and (ACKED) ``still_referenced`` acknowledged entries kept
    because another group still references them."""

    acknowledged: int
    deleted: int
    still_referenced: int
    version: int | None


@dataclass(frozen=True)
class BulkDelivery:
    """What ``deliver`` delivered: ``count`` entries with IDs ``first_id`` .. ``last_id``."""

    count: int
    first_id: StreamId | None
    last_id: StreamId | None
    version: int | None


def fields_column(frame: DataFrame, column: str | None) -> Column:
    """The entries' field/value pairs as bytes: ``column`` if it already holds pairs (string or binary),
    else every column by name. Binary columns keep their bytes; strings become their UTF-8 bytes; any
    other type is first cast to string (as its text). Redis has no null: a null becomes empty bytes."""
    if column is not None:
        data_type = frame.schema[column].dataType
        if not _holds_pairs(data_type):
            raise ValueError(
                f"fields_column={column!r} has type {data_type.simpleString()}; it must be "
                "array<struct<field:binary,value:binary>> (or string fields), or pass fields_column=None "
                "to use every column"
            )
        pairs = F.col(column).cast(ArrayType(FIELD_PAIR))
        return F.transform(pairs, lambda pair: _pair(pair["field"], pair["value"]))
    return F.array(*(_pair(F.lit(name).cast(BinaryType()), _as_bytes(frame, name)) for name in frame.columns))


def _pair(field: Column, value: Column) -> Column:
    empty = F.lit(b"")
    return F.struct(F.coalesce(field, empty).alias("field"), F.coalesce(value, empty).alias("value"))


def _holds_pairs(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    members = data_type.elementType.fields
    return [m.name for m in members] == ["field", "value"] and all(
        isinstance(m.dataType, StringType | BinaryType) for m in members
    )


def _as_bytes(frame: DataFrame, name: str) -> Column:
    if isinstance(frame.schema[name].dataType, BinaryType):
        return F.col(name)
    return F.col(name).cast(StringType()).cast(BinaryType())


# Columns of the frame ``append`` numbers: the target stream, the entry's pairs, its input order and
# the input partition that order came from (monotonically_increasing_id keeps it in its upper 31 bits).
_STREAM = "_stream"
_ORDER = "_order"
_PART = "_part"
_FIRST_SEQ = "_first_seq"


def append(
    runner: Runner,
    key: str | None,
    frame: DataFrame,
    fields: str | None = None,
    stream_column: str | None = None,
) -> BulkAppend:
    """Appends every row of ``frame`` to its stream in one commit (creating streams as needed).

    Each stream's new entries get IDs as a run of ``XADD *`` would: one millisecond, consecutive
    sequence numbers in the frame's row order. They are numbered per (stream, input partition) in
    parallel, from offsets one small aggregation computes, rather than by one window over all rows.

    Args:
        runner: The store's command runner (StreamStore.runner).
        key: The stream every row goes to; None when ``stream_column`` names it per row.
        frame: One row per entry, in the order the entries get their IDs.
        fields: Name of an ``array<struct<field,value>>`` column (binary or string members) holding
            each entry's pairs; None (the default) makes every column a field named after it (except
            ``stream_column``): binary columns give their bytes, others their text as UTF-8.
        stream_column: Name of the string column holding each row's stream (many streams, one commit).
    """
    if (key is None) == (stream_column is None):
        raise ValueError("append: give either key (one stream) or stream_column (a stream per row), not both")
    if stream_column is not None and stream_column not in frame.columns:
        raise ValueError(
            f"stream_column={stream_column!r} is not a column of frame (columns: {frame.columns}); "
            "name the column that holds each row's stream"
        )
    payload = frame.drop(stream_column) if stream_column is not None and fields is None else frame
    stream = F.col(stream_column).cast(StringType()) if stream_column is not None else F.lit(key)
    ordered = frame.select(
        stream.alias(_STREAM),
        fields_column(payload, fields).alias(C.FIELDS),
        F.monotonically_increasing_id().alias(_ORDER),
    ).withColumn(_PART, F.shiftright(F.col(_ORDER), 33))

    def decide(ctx: Context) -> BulkAppend:
        tallies = ordered.groupBy(_STREAM, _PART).count().collect()
        nameless = sum(row["count"] for row in tallies if row[_STREAM] is None)
        if nameless:
            raise ValueError(
                f"stream_column={stream_column!r}: {nameless} row(s) have no stream (null); "
                "give every row a stream name or filter those rows out"
            )
        counts: dict[str, list[tuple[int, int]]] = {}
        for row in tallies:
            counts.setdefault(row[_STREAM], []).append((row[_PART], row["count"]))
        if not counts:
            return BulkAppend(0, None, None, None)
        ctx.snapshot.prefetch(*(Need(name) for name in counts))
        offsets: list[dict[str, object]] = []
        ranges: dict[str, tuple[int, StreamId, StreamId]] = {}
        for name in sorted(counts):
            parts = sorted(counts[name])
            total = sum(count for _, count in parts)
            existing = ctx.snapshot.stream(name)
            meta = existing or StreamMeta(name)
            if meta.last_id == MAX_ID:
                raise ReplyError("ERR The stream has exhausted the last possible ID, unable to add more items")
            first = StreamId(ctx.now, 0) if ctx.now > meta.last_id.ms else meta.last_id.incr()
            if first.seq + total - 1 > MAX_ID.seq:
                raise ValueError(
                    f"frame: {total} entries for stream {name!r} do not fit in millisecond {first.ms}; "
                    "append in smaller parts"
                )
            last = StreamId(first.ms, first.seq + total - 1)
            ranges[name] = (total, first, last)
            before = 0
            for part, count in parts:
                offsets.append(
                    {
                        _STREAM: name,
                        _PART: part,
                        C.PARTITION_ID: stream_partition(name),
                        C.ID_MS: to_stored(first.ms),
                        _FIRST_SEQ: to_stored(first.seq) + before,
                    }
                )
                before += count
            after = replace(
                meta,
                last_id=last,
                length=meta.length + total,
                entries_added=meta.entries_added + total,
                first_id=first if meta.length == 0 else meta.first_id,
            )
            put_stream_head(ctx, existing, after)
        position = F.row_number().over(Window.partitionBy(_STREAM, _PART).orderBy(_ORDER)) - 1
        rows = ordered.join(F.broadcast(json_frame(ctx.snapshot.spark, offsets, _OFFSETS)), [_STREAM, _PART]).select(
            F.col(C.PARTITION_ID),
            F.lit(C.KIND_ENTRY).alias(C.ROW_KIND),
            F.col(_STREAM).alias(C.STREAM),
            F.col(C.ID_MS),
            (F.col(_FIRST_SEQ) + position).alias(C.ID_SEQ),
            F.col(C.FIELDS),
            F.lit(ctx.txn).alias(C.TXN),
        )
        ctx.plan.add_frame(source_frame(state_rows(rows)), stream_partition(sorted(counts)[0]))
        ctx.plan.partitions.update(stream_partition(name) for name in counts)
        total = sum(count for count, _, _ in ranges.values())
        if key is not None:
            _, first, last = ranges[key]
            return BulkAppend(total, first, last, None, ranges)
        return BulkAppend(total, None, None, None, ranges)

    result = runner.transact("BULK APPEND", decide)
    return replace(result, version=runner.last_commit_version)


_OFFSETS = StructType(
    [
        StructField(_STREAM, StringType()),
        StructField(_PART, LongType()),
        StructField(C.PARTITION_ID, StringType()),
        StructField(C.ID_MS, LongType()),
        StructField(_FIRST_SEQ, LongType()),
    ]
)


@dataclass(frozen=True)
class NewGroup:
    """One group for ``create_groups``: XGROUP CREATE stream group id [MKSTREAM] (id: ``$`` or an ID)."""

    stream: str
    group: str
    id: str = "$"
    mkstream: bool = False


def create_groups(runner: Runner, groups: DataFrame | Sequence[NewGroup | tuple[Any, ...]]) -> int:
    """Creates many consumer groups in one commit, with XGROUP CREATE's semantics and errors.

    All or nothing: if any group cannot be created (its stream is missing without MKSTREAM, it exists
    already, its ID is invalid), the error names it and nothing is created. Returns how many were.

    Args:
        runner: The store's command runner (StreamStore.runner).
        groups: ``NewGroup``s or (stream, group[, id[, mkstream]]) tuples, or a DataFrame with columns
            ``stream``, ``group`` and optionally ``id`` (default ``$``) and ``mkstream`` (default false).
    """
    wanted = _new_groups(groups)
    seen: set[tuple[str, str]] = set()
    for position, new in enumerate(wanted):
        if (new.stream, new.group) in seen:
            raise ValueError(f"groups[{position}]: ({new.stream!r}, {new.group!r}) is named twice")
        seen.add((new.stream, new.group))
        if not is_token(new.id, "$"):
            try:
                parse_id(new.id, strict=True)
            except ReplyError as error:
                raise ReplyError(f"{error} (groups[{position}]: {new.stream!r}, {new.group!r})") from None
    by_stream: dict[str, list[tuple[int, NewGroup]]] = {}
    for position, new in enumerate(wanted):
        by_stream.setdefault(new.stream, []).append((position, new))

    def decide(ctx: Context) -> int:
        ctx.snapshot.prefetch(*(Need(key, tuple(n.group for _, n in news)) for key, news in by_stream.items()))
        for key, news in by_stream.items():
            meta = ctx.snapshot.stream(key)
            stream = meta if meta is not None else StreamMeta(key)
            for position, new in news:
                where = f" (groups[{position}]: {new.stream!r}, {new.group!r})"
                if meta is None and not new.mkstream:
                    raise ReplyError(XGROUP_KEY_REQUIRED + where)
                if ctx.snapshot.group(key, new.group) is not None:
                    raise ReplyError(BUSYGROUP + where)
                last_id = stream.last_id if is_token(new.id, "$") else parse_id(new.id, strict=True)
                head = GroupMeta(key, new.group, last_id)
                ctx.plan.add(Write(group_head_row(head, ctx.txn), guard=True, expect_version=None))
            put_stream_head(ctx, meta, replace(stream, groups=(*stream.groups, *(n.group for _, n in news))))
        return len(wanted)

    return runner.transact("BULK XGROUP CREATE", decide) if wanted else 0


def _new_groups(groups: DataFrame | Sequence[NewGroup | tuple[Any, ...]]) -> list[NewGroup]:
    if isinstance(groups, DataFrame):
        missing = [name for name in ("stream", "group") if name not in groups.columns]
        if missing:
            raise ValueError(f"groups: the DataFrame lacks column(s) {missing} (columns: {groups.columns})")
        wanted = []
        for row in groups.collect():
            values = row.asDict()
            wanted.append(
                NewGroup(
                    str(values["stream"]),
                    str(values["group"]),
                    str(values.get("id") or "$"),
                    bool(values.get("mkstream") or False),
                )
            )
        return wanted
    return [item if isinstance(item, NewGroup) else NewGroup(*item) for item in groups]


def deliver(runner: Runner, key: str, group: str, consumer: str, count: int | None = None) -> BulkDelivery:
    """Delivers up to ``count`` new entries (all if None) to ``consumer`` as ``XREADGROUP ... >`` would."""
    if count is not None and count < 1:
        raise ValueError(f"count={count}: give a positive number of entries, or None for all new entries")

    def decide(ctx: Context) -> BulkDelivery:
        ctx.snapshot.load_heads(key, [group], consumer)
        stream = ctx.snapshot.stream(key)
        head = ctx.snapshot.group(key, group)
        if stream is None or head is None:
            raise nogroup_xreadgroup(key, group)
        if head.last_id == MAX_ID:
            return BulkDelivery(0, None, None, None)
        entries = ctx.snapshot.partition(stream_partition(key), C.KIND_ENTRY).where(id_at_least(head.last_id.incr()))
        if count is not None:
            entries = entries.orderBy(C.ID_MS, C.ID_SEQ).limit(count)
        pair = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
        bounds = entries.agg(F.count(F.lit(1)).alias("n"), F.min(pair).alias("lo"), F.max(pair).alias("hi")).first()
        assert bounds is not None
        delivered = int(bounds["n"])
        if delivered == 0:
            return BulkDelivery(0, None, None, None)
        first, last = stored_id(bounds["lo"]), stored_id(bounds["hi"])
        rows = entries.select(
            F.lit(group_partition(key, group)).alias(C.PARTITION_ID),
            F.lit(C.KIND_PENDING).alias(C.ROW_KIND),
            F.lit(key).alias(C.STREAM),
            F.lit(group).alias(C.GROUP),
            F.col(C.ID_MS),
            F.col(C.ID_SEQ),
            F.lit(consumer).alias(C.OWNER),
            F.lit(ctx.now).cast(LongType()).alias(C.DELIVERY_TIME_MS),
            F.lit(1).cast(LongType()).alias(C.DELIVERY_COUNT),
            F.lit(ctx.txn).alias(C.TXN),
        )
        ctx.plan.add_frame(source_frame(state_rows(rows)), group_partition(key, group))
        return _advance(ctx, key, group, consumer, delivered, first, last)

    result = runner.transact("BULK DELIVER", decide)
    return replace(result, version=runner.last_commit_version)


def _advance(
    ctx: Context, key: str, group: str, consumer: str, delivered: int, first: StreamId, last: StreamId
) -> BulkDelivery:
    """After delivering ``first`` .. ``last``: moves the group's cursor and entries-read, touches the consumer."""
    stream, head = ctx.snapshot.stream(key), ctx.snapshot.group(key, group)
    assert stream is not None and head is not None
    # XREADGROUP moves entries-read entry by entry (lag.entries_read_after_delivery): once the first
    # delivered entry's counter is known and no tombstone lies ahead, each further entry adds one.
    first_read = entries_read_after_delivery(stream, head, first)
    if first_read != C.ENTRIES_READ_UNKNOWN and not range_has_tombstones(stream, first):
        entries_read = first_read + delivered - 1
    elif delivered == 1:
        entries_read = first_read
    else:
        entries_read = estimate_entries_read(stream, last)
    put_group(ctx, head, replace(head, last_id=max(last, head.last_id), entries_read=entries_read))
    existing = ctx.snapshot.consumer(key, group, consumer)
    touched = replace(existing or ConsumerMeta(consumer, ctx.now), seen_time=ctx.now, active_time=ctx.now)
    ctx.plan.add(Write(consumer_row(key, group, touched, ctx.txn)))
    return BulkDelivery(delivered, first, last, None)


_TARGET = "_target"
_UNTIL_MS, _UNTIL_SEQ = "_until_ms", "_until_seq"
_TARGETS = StructType(
    [
        StructField(_TARGET, LongType()),
        StructField(C.STREAM, StringType()),
        StructField(C.GROUP, StringType()),
        StructField(C.PARTITION_ID, StringType()),
        StructField(C.OWNER, StringType()),
        StructField(C.LAST_MS, LongType()),
        StructField(C.LAST_SEQ, LongType()),
        StructField(_UNTIL_MS, LongType()),
        StructField(_UNTIL_SEQ, LongType()),
    ]
)


def deliver_many(
    runner: Runner, targets: Sequence[tuple[str, str, str]], count: int | None = None
) -> list[BulkDelivery]:
    """``XREADGROUP GROUP group consumer [COUNT count] STREAMS stream >`` for many targets, in one commit.

    Each (stream, group, consumer) gets up to ``count`` of its group's new entries (all if None): they
    enter the group's PEL with that owner and delivery count 1, the group's cursor and entries-read
    move, the consumer is created or touched. One scan of the streams' entries joined with a small
    table of the targets' cursors, rather than one read per target.

    Args:
        runner: The store's command runner (StreamStore.runner).
        targets: (stream, group, consumer) triples, each (stream, group) at most once.
        count: Most entries per target; None for every new entry.

    Returns:
        One BulkDelivery per target, in the order given.

    Raises:
        ReplyError: NOGROUP, as XREADGROUP words it, naming the first target whose stream or group is missing.
    """
    if count is not None and count < 1:
        raise ValueError(f"count={count}: give a positive number of entries, or None for all new entries")
    pairs = [(key, group) for key, group, _ in targets]
    if len(set(pairs)) != len(pairs):
        raise ValueError("targets: a (stream, group) is named twice; deliver to one consumer per group per call")

    def decide(ctx: Context) -> list[BulkDelivery]:
        return plan_deliveries(ctx, targets, count)

    results = runner.transact("BULK DELIVER", decide)
    version = runner.last_commit_version
    return [replace(result, version=version if result.count else None) for result in results]


def plan_deliveries(
    ctx: Context,
    targets: Sequence[tuple[str, str, str]],
    count: int | None = None,
    *,
    total: int | None = None,
    until: Mapping[str, StreamId] | None = None,
) -> list[BulkDelivery]:
    """Plans ``deliver_many``'s deliveries into ``ctx`` (its transaction may hold other changes too).

    ``count`` caps each target, ``total`` all of them together (the oldest IDs first, across streams),
    ``until`` caps each named stream's IDs (entries after it stay new). The results carry no version.
    """
    ctx.snapshot.prefetch(*(Need(key, (group,), consumer) for key, group, consumer in targets))
    records: list[dict[str, object]] = []
    lowest: StreamId | None = None
    for position, (key, group, consumer) in enumerate(targets):
        if ctx.snapshot.stream(key) is None or ctx.snapshot.group(key, group) is None:
            raise nogroup_xreadgroup(key, group)
        head = ctx.snapshot.group(key, group)
        assert head is not None
        if head.last_id == MAX_ID:
            continue
        start = head.last_id.incr()
        cap = until.get(key) if until is not None else None
        if cap is not None and cap < start:
            continue
        lowest = start if lowest is None else min(lowest, start)
        records.append(
            {
                _TARGET: position,
                C.STREAM: key,
                C.GROUP: group,
                C.PARTITION_ID: group_partition(key, group),
                C.OWNER: consumer,
                C.LAST_MS: to_stored(head.last_id.ms),
                C.LAST_SEQ: to_stored(head.last_id.seq),
                _UNTIL_MS: to_stored(cap.ms) if cap is not None else None,
                _UNTIL_SEQ: to_stored(cap.seq) if cap is not None else None,
            }
        )
    results = [BulkDelivery(0, None, None, None) for _ in targets]
    if not records:
        return results
    streams = sorted({str(record[C.STREAM]) for record in records})
    assert lowest is not None
    entries = (
        ctx.snapshot.frame()
        .where(
            in_partitions([stream_partition(key) for key in streams])
            & (F.col(C.ROW_KIND) == C.KIND_ENTRY)
            & id_at_least(lowest)  # the lowest cursor's range: Delta still skips older files
        )
        .select(C.STREAM, C.ID_MS, C.ID_SEQ)
    )
    after_cursor = (F.col(C.ID_MS) > F.col(C.LAST_MS)) | (
        (F.col(C.ID_MS) == F.col(C.LAST_MS)) & (F.col(C.ID_SEQ) > F.col(C.LAST_SEQ))
    )
    within_until = (
        F.col(_UNTIL_MS).isNull()
        | (F.col(C.ID_MS) < F.col(_UNTIL_MS))
        | ((F.col(C.ID_MS) == F.col(_UNTIL_MS)) & (F.col(C.ID_SEQ) <= F.col(_UNTIL_SEQ)))
    )
    delivered = entries.join(F.broadcast(json_frame(ctx.snapshot.spark, records, _TARGETS)), C.STREAM).where(
        after_cursor & within_until
    )
    if count is not None:
        rank = F.row_number().over(Window.partitionBy(_TARGET).orderBy(C.ID_MS, C.ID_SEQ))
        delivered = delivered.withColumn("_rank", rank).where(F.col("_rank") <= count)
    if total is not None:
        # One window over every target's candidates: the oldest IDs first, whichever stream holds them.
        overall = F.row_number().over(Window.orderBy(C.ID_MS, C.ID_SEQ, _TARGET))
        delivered = delivered.withColumn("_overall", overall).where(F.col("_overall") <= total)
    pair = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
    bounds = (
        delivered.groupBy(_TARGET)
        .agg(F.count(F.lit(1)).alias("n"), F.min(pair).alias("lo"), F.max(pair).alias("hi"))
        .collect()
    )
    if not bounds:
        return results
    rows = delivered.select(
        F.col(C.PARTITION_ID),
        F.lit(C.KIND_PENDING).alias(C.ROW_KIND),
        F.col(C.STREAM),
        F.col(C.GROUP),
        F.col(C.ID_MS),
        F.col(C.ID_SEQ),
        F.col(C.OWNER),
        F.lit(ctx.now).cast(LongType()).alias(C.DELIVERY_TIME_MS),
        F.lit(1).cast(LongType()).alias(C.DELIVERY_COUNT),
        F.lit(ctx.txn).alias(C.TXN),
    )
    first_key = targets[int(bounds[0][_TARGET])]
    ctx.plan.add_frame(source_frame(state_rows(rows)), group_partition(first_key[0], first_key[1]))
    for bound in bounds:
        position = int(bound[_TARGET])
        key, group, consumer = targets[position]
        first, last = stored_id(bound["lo"]), stored_id(bound["hi"])
        results[position] = _advance(ctx, key, group, consumer, int(bound["n"]), first, last)
    return results


# Column carrying the ID text both sides of acknowledge's join are matched on.
_ACK_ID = "_ack_id"


def acknowledge(runner: Runner, key: str, group: str, ids: DataFrame | None, id_column: str = "id") -> BulkAck:
    """Acknowledges (XACK) the entries ``ids`` names, in one commit; None acknowledges every pending entry.

    Args:
        runner: The store's command runner (StreamStore.runner).
        key: The stream.
        group: The consumer group.
        ids: A DataFrame whose ``id_column`` holds entry IDs as Redis text (``"1700000000000-5"``);
            IDs that are not pending are ignored, as XACK ignores them. None: the group's whole PEL.
        id_column: The column of ``ids`` holding the IDs (default ``id``).

    Raises:
        ReplyError: NOGROUP when the stream or group does not exist (XACK itself replies 0 there).
    """
    _check_id_column(ids, id_column)

    def decide(ctx: Context) -> BulkAck:
        head = group_or_nogroup(ctx, key, group)
        pending = _pending_named(ctx, key, group, ids, id_column)
        count = int(pending.count())
        if count:
            ctx.plan.add_frame(source_frame_for_deletes(pending), group_partition(key, group))
            put_group(ctx, head, head)
        return BulkAck(count, None)

    result = runner.transact("BULK ACK", decide)
    return replace(result, version=runner.last_commit_version if result.count else None)


def acknowledge_and_delete(
    runner: Runner,
    key: str,
    group: str,
    ids: DataFrame | None,
    policy: RefPolicy = RefPolicy.KEEPREF,
    id_column: str = "id",
) -> BulkAckDel:
    """XACKDEL for any number of IDs, in one commit: acknowledges each ID pending in the group, then
    deletes its stream entry under ``policy``, as XACKDEL does per ID (docs/DESIGN.md, "Redis 8 commands").

    KEEPREF deletes the entries and leaves other groups' references dangling; DELREF also removes the
    IDs from every other group's PEL; ACKED deletes only entries no other group references (pending
    there, or after some group's last-delivered ID) and still acknowledges the others. IDs not pending
    in the group are ignored, as XACKDEL answers -1 for them. None: the group's whole PEL.

    Raises:
        ReplyError: NOGROUP when the stream or group does not exist (XACKDEL itself answers -1 there).
    """
    _check_id_column(ids, id_column)
    if not isinstance(policy, RefPolicy):
        raise ValueError(f"policy={policy!r} must be a RefPolicy (KEEPREF, DELREF or ACKED)")

    def decide(ctx: Context) -> BulkAckDel:
        head = group_or_nogroup(ctx, key, group)
        meta = ctx.snapshot.stream(key)
        assert meta is not None
        acked = _pending_named(ctx, key, group, ids, id_column)
        others = [g for g in ctx.snapshot.groups(key) if g.name != group] if policy is not RefPolicy.KEEPREF else []
        candidates = acked.select(C.ID_MS, C.ID_SEQ)
        if policy is RefPolicy.ACKED:
            horizon = min(g.last_id for g in [head, *others])  # every group has read up to here
            candidates = candidates.where(id_at_most(horizon))
            if others:
                pending_elsewhere = ctx.snapshot.pending_frames(key, [g.name for g in others])
                candidates = candidates.join(pending_elsewhere, [C.ID_MS, C.ID_SEQ], "left_anti")
        entries = ctx.snapshot.partition(stream_partition(key), C.KIND_ENTRY)
        doomed = entries.join(candidates, [C.ID_MS, C.ID_SEQ], "left_semi")
        stats = _ackdel_stats(acked, candidates, entries, doomed)
        acknowledged, deletable, deleted = stats.acknowledged, stats.deletable, stats.deleted
        if acknowledged == 0:
            return BulkAckDel(0, 0, 0, None)
        ctx.plan.add_frame(source_frame_for_deletes(acked), group_partition(key, group))
        put_group(ctx, head, head)
        if policy is RefPolicy.DELREF and others:
            delete_pending_ids(ctx, key, others, candidates)
        if deleted:
            ctx.plan.add_frame(source_frame_for_deletes(doomed), stream_partition(key))
            for other in others:  # the decision read their references: a change there re-runs it
                put_group(ctx, other, other)
            length = meta.length - deleted
            after = replace(
                meta,
                length=length,
                first_id=ZERO_ID if length == 0 or stats.first_left is None else stats.first_left,
                max_deleted_id=max(meta.max_deleted_id, stats.last_deleted or ZERO_ID),
            )
            put_stream_head(ctx, meta, after)
        return BulkAckDel(acknowledged, deleted, acknowledged - deletable, None)

    result = runner.transact("BULK ACKDEL", decide)
    return replace(result, version=runner.last_commit_version if result.acknowledged else None)


@dataclass(frozen=True)
class _AckDelStats:
    acknowledged: int
    deletable: int  # acknowledged IDs the policy lets go (whether or not the entry still exists)
    deleted: int  # stream entries deleted
    first_left: StreamId | None  # the first entry that stays
    last_deleted: StreamId | None


def _ackdel_stats(acked: DataFrame, candidates: DataFrame, entries: DataFrame, doomed: DataFrame) -> _AckDelStats:
    """One query for every count ``acknowledge_and_delete`` decides on, and the stream head's new edges."""
    marked = entries.join(doomed.select(C.ID_MS, C.ID_SEQ, F.lit(True).alias("_gone")), [C.ID_MS, C.ID_SEQ], "left")
    gone = F.col("_gone").isNotNull()
    row = (
        marked.agg(
            F.count("_gone").alias("deleted"),
            F.min(F.when(~gone, F.struct(C.ID_MS, C.ID_SEQ))).alias("first_left"),
            F.max(F.when(gone, F.struct(C.ID_MS, C.ID_SEQ))).alias("last_deleted"),
        )
        .crossJoin(acked.agg(F.count(F.lit(1)).alias("acknowledged")))
        .crossJoin(candidates.agg(F.count(F.lit(1)).alias("deletable")))
        .first()
    )
    assert row is not None
    return _AckDelStats(
        acknowledged=int(row["acknowledged"]),
        deletable=int(row["deletable"]),
        deleted=int(row["deleted"]),
        first_left=stored_id(row["first_left"]) if row["first_left"] is not None else None,
        last_deleted=stored_id(row["last_deleted"]) if row["last_deleted"] is not None else None,
    )


def _check_id_column(ids: DataFrame | None, id_column: str) -> None:
    if ids is not None and id_column not in ids.columns:
        raise ValueError(f"id_column={id_column!r} is not a column of ids (columns: {ids.columns})")


def _pending_named(ctx: Context, key: str, group: str, ids: DataFrame | None, id_column: str) -> DataFrame:
    """The group's PEL rows whose IDs ``ids`` names (Redis text), or the whole PEL for None."""
    pending = ctx.snapshot.pending_frame(key, group)
    if ids is None:
        return pending
    wanted = ids.select(F.col(id_column).cast(StringType()).alias(_ACK_ID)).distinct()
    named = pending.withColumn(_ACK_ID, id_text(C.ID_MS, C.ID_SEQ)).join(wanted, _ACK_ID, "left_semi")
    return named.drop(_ACK_ID)


def state_rows(frame: DataFrame) -> DataFrame:
    """Pads ``frame`` with nulls to the state table's full schema, in its column order."""
    present = set(frame.columns)
    return frame.select(
        *(
            F.col(field.name) if field.name in present else F.lit(None).cast(field.dataType).alias(field.name)
            for field in STATE_SCHEMA.fields
        )
    )

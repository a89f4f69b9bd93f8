"""Bulk XADD: every row of a DataFrame appended to its stream in one commit, with IDs as ``XADD *`` gives.

The rows are numbered per (stream, input partition) in parallel from offsets one small aggregation
computes, so no window spans the whole frame and nothing but those counts reaches the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, LongType, StringType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, StreamId
from streamclaim_spark.core.model import Need, StreamMeta
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_stream_head
from streamclaim_spark.errors import InvalidArgumentError, ReplyError
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.schema import FIELD_PAIR

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


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


def fields_column(frame: DataFrame, column: str | None) -> Column:
    """The entries' field/value pairs as bytes: ``column`` if it already holds pairs (string or binary),
    else every column by name. Binary columns keep their bytes; strings become their UTF-8 bytes; any
    other type is first cast to string (as its text). Redis has no null: a null becomes empty bytes."""
    if column is not None:
        data_type = frame.schema[column].dataType
        if not _holds_pairs(data_type):
            raise InvalidArgumentError(
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
    ordered = _ordered(frame, key, fields, stream_column)

    def decide(ctx: Context) -> BulkAppend:
        return _decide(ctx, ordered, key, stream_column)

    result = runner.transact("BULK APPEND", decide)
    return replace(result, version=runner.last_commit_version)


def plan_append(ctx: Context, frame: DataFrame, key: str, fields: str) -> BulkAppend:
    """Plans the append of ``frame``'s rows to stream ``key`` into ``ctx``'s commit, beside another write
    path's rows (a redrive re-adds gone entries so): ``fields`` names the column of their pairs."""
    return _decide(ctx, _ordered(frame, key, fields, None), key, None)


def check_target(key: str | None, stream_column: str | None, columns: Sequence[str], rows: str) -> None:
    """Raises ``InvalidArgumentError`` unless exactly one of ``key`` and ``stream_column`` is given, the
    latter one of ``columns`` (those of the ``rows`` appended, as the message names them)."""
    if (key is None) == (stream_column is None):
        raise InvalidArgumentError("append: give either key (one stream) or stream_column (a stream per row), not both")
    if stream_column is not None and stream_column not in columns:
        raise InvalidArgumentError(
            f"stream_column={stream_column!r} is not a column of {rows} (columns: {list(columns)}); "
            "name the column that holds each row's stream"
        )


def check_named(nameless: int, stream_column: str | None) -> None:
    """Raises ``InvalidArgumentError`` when ``nameless`` rows have no stream in ``stream_column``."""
    if nameless:
        raise InvalidArgumentError(
            f"stream_column={stream_column!r}: {nameless} row(s) have no stream (null); "
            "give every row a stream name or filter those rows out"
        )


def _ordered(frame: DataFrame, key: str | None, fields: str | None, stream_column: str | None) -> DataFrame:
    """The frame's rows as (stream, fields, order, input partition), checked against the arguments."""
    check_target(key, stream_column, frame.columns, "frame")
    payload = frame.drop(stream_column) if stream_column is not None and fields is None else frame
    stream = F.col(stream_column).cast(StringType()) if stream_column is not None else F.lit(key)
    return frame.select(
        stream.alias(_STREAM),
        fields_column(payload, fields).alias(C.FIELDS),
        F.monotonically_increasing_id().alias(_ORDER),
    ).withColumn(_PART, F.shiftright(F.col(_ORDER), 33))


def _decide(ctx: Context, ordered: DataFrame, key: str | None, stream_column: str | None) -> BulkAppend:
    """Plans the append on the context's snapshot: each stream's IDs and head, then the entry rows."""
    counts = _counts(ordered, stream_column)
    if not counts:
        return BulkAppend(0, None, None, None)
    ctx.snapshot.prefetch(*(Need(name) for name in counts))
    offsets: list[dict[str, object]] = []
    ranges: dict[str, tuple[int, StreamId, StreamId]] = {}
    for name in sorted(counts):
        ranges[name] = _place(ctx, name, sorted(counts[name]), offsets)
    # The IDs follow each stream's last ID: no entry has them yet, so the rows are appended.
    rows = _entry_rows(ctx, ordered, offsets, key)
    ctx.plan.add_append(rows, *(stream_partition(name) for name in sorted(counts)), ordered=key is not None)
    total = sum(count for count, _, _ in ranges.values())
    if key is not None:
        _, first, last = ranges[key]
        return BulkAppend(total, first, last, None, ranges)
    return BulkAppend(total, None, None, None, ranges)


def _counts(ordered: DataFrame, stream_column: str | None) -> dict[str, list[tuple[int, int]]]:
    """Each stream's (input partition, rows) pairs, from one small aggregation; a row without a stream fails."""
    tallies = ordered.groupBy(_STREAM, _PART).count().collect()
    check_named(sum(row["count"] for row in tallies if row[_STREAM] is None), stream_column)
    counts: dict[str, list[tuple[int, int]]] = {}
    for row in tallies:
        counts.setdefault(row[_STREAM], []).append((row[_PART], row["count"]))
    return counts


def place_ids(ctx: Context, name: str, total: int) -> tuple[StreamId, StreamId]:
    """Gives stream ``name``'s ``total`` new entries their IDs, as a run of ``XADD *`` would (one
    millisecond, consecutive sequence numbers after the stream's last ID), and writes its head; returns
    the first and the last ID."""
    existing = ctx.snapshot.stream(name)
    meta = existing or StreamMeta(name)
    if meta.last_id == MAX_ID:
        raise ReplyError("ERR The stream has exhausted the last possible ID, unable to add more items")
    first = StreamId(ctx.now, 0) if ctx.now > meta.last_id.ms else meta.last_id.incr()
    if first.seq + total - 1 > MAX_ID.seq:
        raise InvalidArgumentError(
            f"frame: {total} entries for stream {name!r} do not fit in millisecond {first.ms}; append in smaller parts"
        )
    last = StreamId(first.ms, first.seq + total - 1)
    after = replace(
        meta,
        last_id=last,
        length=meta.length + total,
        entries_added=meta.entries_added + total,
        first_id=first if meta.length == 0 else meta.first_id,
    )
    put_stream_head(ctx, existing, after)
    return first, last


def _place(
    ctx: Context, name: str, parts: list[tuple[int, int]], offsets: list[dict[str, object]]
) -> tuple[int, StreamId, StreamId]:
    """``place_ids`` for stream ``name``'s entries, given as (input partition, rows) pairs; adds the first
    sequence number of each input partition's entries to ``offsets``. Returns the stream's (entries,
    first ID, last ID)."""
    total = sum(count for _, count in parts)
    first, last = place_ids(ctx, name, total)
    first_ms, first_seq = first.stored()
    before = 0
    for part, count in parts:
        offsets.append(
            {
                _STREAM: name,
                _PART: part,
                C.PARTITION_ID: stream_partition(name),
                C.ID_MS: first_ms,
                _FIRST_SEQ: first_seq + before,
            }
        )
        before += count
    return total, first, last


def _entry_rows(ctx: Context, ordered: DataFrame, offsets: list[dict[str, object]], key: str | None) -> DataFrame:
    """The entry rows: each input partition's rows numbered in order from its first sequence number.

    For one stream (``key``) a row's number within its input partition is the lower bits of its
    ``monotonically_increasing_id`` (the row's index there), so the rows are numbered where they lie,
    already in ID order, with no shuffle or sort; its partition is a literal, so the write needs no sort
    by bucket either (CHANGELOG.md, "Appends as appends"). Rows of several streams share input
    partitions, so there a window numbers each stream's rows.
    """
    if key is not None:
        position = F.col(_ORDER) - F.shiftleft(F.col(_PART), 33)
        partition, stream = F.lit(stream_partition(key)), F.lit(key)
    else:
        position = F.row_number().over(Window.partitionBy(_STREAM, _PART).orderBy(_ORDER)) - 1
        partition, stream = F.col(C.PARTITION_ID), F.col(_STREAM)
    return ordered.join(F.broadcast(json_frame(ctx.snapshot.spark, offsets, _OFFSETS)), [_STREAM, _PART]).select(
        partition.alias(C.PARTITION_ID),
        F.lit(C.KIND_ENTRY).alias(C.ROW_KIND),
        stream.alias(C.STREAM),
        F.col(C.ID_MS),
        (F.col(_FIRST_SEQ) + position).alias(C.ID_SEQ),
        F.col(C.FIELDS),
        F.lit(ctx.txn).alias(C.TXN),
    )


_OFFSETS = StructType(
    [
        StructField(_STREAM, StringType()),
        StructField(_PART, LongType()),
        StructField(C.PARTITION_ID, StringType()),
        StructField(C.ID_MS, LongType()),
        StructField(_FIRST_SEQ, LongType()),
    ]
)

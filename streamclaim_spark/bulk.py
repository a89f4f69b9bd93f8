"""Bulk paths for data that is already a DataFrame: append, deliver and acknowledge many entries.

Each call is one guarded MERGE, like a single command: ``append`` assigns IDs as a run of ``XADD *``
would (one millisecond, consecutive sequence numbers), ``deliver`` does what ``XREADGROUP ... >``
does for up to ``count`` entries, ``acknowledge`` what ``XACK`` does for any number of IDs, without
collecting anything to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType

from streamclaim_spark import _constants as C
from streamclaim_spark.commands.groups import group_or_nogroup, put_group
from streamclaim_spark.commands.streams import put_stream_head
from streamclaim_spark.context import Context
from streamclaim_spark.errors import ReplyError, nogroup_xreadgroup
from streamclaim_spark.ids import MAX_ID, StreamId, to_stored
from streamclaim_spark.lag import entries_read_after_delivery, estimate_entries_read, range_has_tombstones
from streamclaim_spark.model import ConsumerMeta, StreamMeta, Write, consumer_row
from streamclaim_spark.schema import FIELD_PAIR, STATE_SCHEMA, group_partition, stream_partition
from streamclaim_spark.snapshot import id_at_least, id_text, stored_id
from streamclaim_spark.transaction import source_frame, source_frame_for_deletes

if TYPE_CHECKING:
    from streamclaim_spark.runner import Runner


@dataclass(frozen=True)
class BulkAppend:
    """What ``append`` added: ``count`` entries with IDs ``first_id`` .. ``last_id``."""

    count: int
    first_id: StreamId | None
    last_id: StreamId | None
    version: int | None


@dataclass(frozen=True)
class BulkAck:
    """What ``acknowledge`` removed from the group's PEL: ``count`` entries."""

    count: int
    version: int | None


@dataclass(frozen=True)
class BulkDelivery:
    """What ``deliver`` delivered: ``count`` entries with IDs ``first_id`` .. ``last_id``."""

    count: int
    first_id: StreamId | None
    last_id: StreamId | None
    version: int | None


def fields_column(frame: DataFrame, column: str | None) -> Column:
    """The entries' field/value pairs: ``column`` if it already holds them, else every column by name."""
    if column is not None:
        data_type = frame.schema[column].dataType
        if data_type != ArrayType(FIELD_PAIR) and data_type != ArrayType(FIELD_PAIR, containsNull=False):
            raise ValueError(
                f"fields_column={column!r} has type {data_type.simpleString()}; it must be "
                "array<struct<field:string,value:string>>, or pass fields_column=None to use every column"
            )
        return F.col(column)
    pairs = [
        F.struct(F.lit(name).alias("field"), F.col(name).cast(StringType()).alias("value")) for name in frame.columns
    ]
    return F.array(*pairs)


def append(runner: Runner, key: str, frame: DataFrame, fields: str | None = None) -> BulkAppend:
    """Appends every row of ``frame`` to stream ``key`` in one commit (creating the stream if needed).

    Args:
        runner: The store's command runner (StreamStore.runner).
        key: The stream.
        frame: One row per entry, in the order the entries get their IDs.
        fields: Name of an ``array<struct<field,value>>`` column holding each entry's pairs; None (the
            default) makes every column a field named after it, its value cast to string.
    """
    pairs = fields_column(frame, fields)
    ordered = frame.select(pairs.alias(C.FIELDS), F.monotonically_increasing_id().alias("_order"))

    def decide(ctx: Context) -> BulkAppend:
        count = ordered.count()
        if count == 0:
            return BulkAppend(0, None, None, None)
        meta = ctx.snapshot.stream(key) or StreamMeta(key)
        if meta.last_id == MAX_ID:
            raise ReplyError("ERR The stream has exhausted the last possible ID, unable to add more items")
        first = StreamId(ctx.now, 0) if ctx.now > meta.last_id.ms else meta.last_id.incr()
        if first.seq + count - 1 > MAX_ID.seq:
            raise ValueError(f"frame: {count} entries do not fit in millisecond {first.ms}; append in smaller parts")
        last = StreamId(first.ms, first.seq + count - 1)
        position = F.row_number().over(Window.orderBy("_order")) - 1
        rows = ordered.select(
            F.lit(stream_partition(key)).alias(C.PARTITION_ID),
            F.lit(C.KIND_ENTRY).alias(C.ROW_KIND),
            F.lit(key).alias(C.STREAM),
            F.lit(to_stored(first.ms)).cast(LongType()).alias(C.ID_MS),
            (F.lit(to_stored(first.seq)).cast(LongType()) + position).alias(C.ID_SEQ),
            F.col(C.FIELDS),
            F.lit(ctx.txn).alias(C.TXN),
        )
        ctx.plan.add_frame(source_frame(state_rows(rows)), stream_partition(key))
        after = replace(
            meta,
            last_id=last,
            length=meta.length + count,
            entries_added=meta.entries_added + count,
            first_id=first if meta.length == 0 else meta.first_id,
        )
        existing = ctx.snapshot.stream(key)
        put_stream_head(ctx, existing, after)
        return BulkAppend(count, first, last, None)

    result = runner.transact("BULK APPEND", decide)
    return replace(result, version=runner.last_commit_version)


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
        if head.entries_read != C.ENTRIES_READ_UNKNOWN and not range_has_tombstones(stream, first):
            entries_read = head.entries_read + delivered
        elif delivered == 1:
            entries_read = entries_read_after_delivery(stream, head, first)
        else:
            entries_read = estimate_entries_read(stream, last)
        put_group(ctx, head, replace(head, last_id=max(last, head.last_id), entries_read=entries_read))
        existing = ctx.snapshot.consumer(key, group, consumer)
        touched = replace(existing or ConsumerMeta(consumer, ctx.now), seen_time=ctx.now, active_time=ctx.now)
        ctx.plan.add(Write(consumer_row(key, group, touched, ctx.txn)))
        return BulkDelivery(delivered, first, last, None)

    result = runner.transact("BULK DELIVER", decide)
    return replace(result, version=runner.last_commit_version)


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
    if ids is not None and id_column not in ids.columns:
        raise ValueError(f"id_column={id_column!r} is not a column of ids (columns: {ids.columns})")

    def decide(ctx: Context) -> BulkAck:
        head = group_or_nogroup(ctx, key, group)
        pending = ctx.snapshot.pending_frame(key, group)
        if ids is not None:
            wanted = ids.select(F.col(id_column).cast(StringType()).alias(_ACK_ID)).distinct()
            pending = pending.withColumn(_ACK_ID, id_text(C.ID_MS, C.ID_SEQ)).join(wanted, _ACK_ID, "left_semi")
        count = int(pending.count())
        if count:
            ctx.plan.add_frame(source_frame_for_deletes(pending.drop(_ACK_ID)), group_partition(key, group))
            put_group(ctx, head, head)
        return BulkAck(count, None)

    result = runner.transact("BULK ACK", decide)
    return replace(result, version=runner.last_commit_version if result.count else None)


def state_rows(frame: DataFrame) -> DataFrame:
    """Pads ``frame`` with nulls to the state table's full schema, in its column order."""
    present = set(frame.columns)
    return frame.select(
        *(
            F.col(field.name) if field.name in present else F.lit(None).cast(field.dataType).alias(field.name)
            for field in STATE_SCHEMA.fields
        )
    )

"""Bulk XREADGROUP ... >: new entries delivered to consumers in one commit, for one group or many.

``plan_deliveries`` plans the deliveries into a transaction that may hold other changes too; the
streaming source runs its micro-batches on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId
from streamclaim_spark.core.lag import entries_read_after_delivery, estimate_entries_read, range_has_tombstones
from streamclaim_spark.core.model import Need, StreamMeta
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.errors import InvalidArgumentError, nogroup_xreadgroup
from streamclaim_spark.fleet.bulk.driver_delivery import TARGET as _TARGET
from streamclaim_spark.fleet.bulk.driver_delivery import UNTIL_MS as _UNTIL_MS
from streamclaim_spark.fleet.bulk.driver_delivery import UNTIL_SEQ as _UNTIL_SEQ
from streamclaim_spark.fleet.bulk.driver_delivery import (
    bounds_of,
    delivered_on_driver,
    none_pending_after_on_driver,
    pending_rows_of,
)
from streamclaim_spark.state.columns import id_at_least, id_range_aggregates, stored_id
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.schema import pruned_to

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


@dataclass(frozen=True)
class BulkDelivery:
    """What ``deliver`` delivered: ``count`` entries with IDs ``first_id`` .. ``last_id``."""

    count: int
    first_id: StreamId | None
    last_id: StreamId | None
    version: int | None


def deliver(runner: Runner, key: str, group: str, consumer: str, count: int | None = None) -> BulkDelivery:
    """Delivers up to ``count`` new entries (all if None) to ``consumer`` as ``XREADGROUP ... >`` would."""
    if count is not None and count < 1:
        raise InvalidArgumentError(f"count={count}: give a positive number of entries, or None for all new entries")

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
        delivered, first, last = _range_delivered(stream, head.last_id, entries, whole=count is None)
        if delivered == 0:
            return BulkDelivery(0, None, None, None)
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
        beyond = ctx.snapshot.pending_frame(key, group).where(id_at_least(first))
        partition = group_partition(key, group)
        _add_pending_rows(ctx, rows, beyond.limit(1).count() == 0, [partition], {partition: {consumer: delivered}})
        return _advance(ctx, key, group, consumer, delivered, first, last)

    result = runner.transact("BULK DELIVER", decide)
    return replace(result, version=runner.last_commit_version)


def _range_delivered(
    stream: StreamMeta, cursor: StreamId, entries: DataFrame, whole: bool
) -> tuple[int, StreamId, StreamId]:
    """How many of ``entries`` (the stream's entries after ``cursor``) are delivered, and the first and
    last of their IDs. When every entry of the stream lies after the cursor and all are delivered, the
    stream head says it (its length, first and last IDs, kept exact by every writer); otherwise one
    aggregate over the entries does."""
    if whole and stream.length > 0 and cursor < stream.first_id:
        return stream.length, stream.first_id, stream.last_id
    bounds = entries.agg(*id_range_aggregates()).first()
    assert bounds is not None
    delivered = int(bounds["n"])
    if delivered == 0:
        return 0, ZERO_ID, ZERO_ID
    return delivered, stored_id(bounds["lo"]), stored_id(bounds["hi"])


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
    touch_consumer(ctx, key, group, consumer)
    return BulkDelivery(delivered, first, last, None)


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
        raise InvalidArgumentError(f"count={count}: give a positive number of entries, or None for all new entries")
    pairs = [(key, group) for key, group, _ in targets]
    if len(set(pairs)) != len(pairs):
        raise InvalidArgumentError(
            "targets: a (stream, group) is named twice; deliver to one consumer per group per call"
        )

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
    records, lowest = _cursors(ctx, targets, until)
    results = [BulkDelivery(0, None, None, None) for _ in targets]
    if not records:
        return results
    assert lowest is not None
    local = delivered_on_driver(ctx.snapshot, records, lowest, count, total)
    if local is not None:  # the PEL rows made on the driver too, and written there by the commit
        bounds = bounds_of(local)
        rows = pending_rows_of(local, ctx.now, ctx.txn)
    else:
        delivered = _delivered(ctx, records, lowest, count, total)
        bounds = [
            (int(bound[_TARGET]), int(bound["n"]), stored_id(bound["lo"]), stored_id(bound["hi"]))
            for bound in delivered.groupBy(_TARGET).agg(*id_range_aggregates()).collect()
        ]
        rows = _pending_rows(ctx, delivered)
    if not bounds:
        return results
    assert rows is not None
    counts: dict[str, dict[str | None, int]] = {}
    for position, delivered_count, _, _ in bounds:
        key, group, consumer = targets[position]
        counts[group_partition(key, group)] = {consumer: delivered_count}
    _add_pending_rows(ctx, rows, _none_after_cursors(ctx, records, lowest), _group_partitions(records), counts)
    for position, delivered_count, first, last in bounds:
        key, group, consumer = targets[position]
        results[position] = _advance(ctx, key, group, consumer, delivered_count, first, last)
    return results


def _add_pending_rows(
    ctx: Context,
    rows: DataFrame | pa.Table,
    none_beyond: bool,
    partitions: Sequence[str],
    counts: Mapping[str, Mapping[str | None, int]],
) -> None:
    """Adds the delivered entries' PEL rows (a frame, or a table made on the driver) to the plan:
    appended when no PEL row of their groups lies after the cursors (``none_beyond``: nothing can match
    them), with their ``counts`` per group partition and owner for the groups' kept counts; else
    merged, so that a row already there is overwritten as Redis overwrites a NACK it delivers again
    (after XGROUP SETID moved the cursor back, or XCLAIM FORCE claimed ahead of it)."""
    if none_beyond:
        ctx.plan.add_append(rows, *partitions, pending_counts=counts)
    else:
        frame = ctx.snapshot.spark.createDataFrame(rows) if isinstance(rows, pa.Table) else rows
        ctx.plan.add_frame(source_frame(frame), *partitions)


def _group_partitions(records: Sequence[Mapping[str, object]]) -> list[str]:
    return sorted({str(record[C.PARTITION_ID]) for record in records})


def _none_after_cursors(ctx: Context, records: list[dict[str, object]], lowest: StreamId) -> bool:
    """True when no PEL row of the targets' groups lies after their group's cursor (the usual case):
    answered on the driver where its files can be read there, else by Spark's query."""
    none_on_driver = none_pending_after_on_driver(ctx.snapshot, records, lowest)
    if none_on_driver is not None:
        return none_on_driver
    return _pending_after_cursors(ctx, records, lowest).limit(1).count() == 0


def _pending_after_cursors(ctx: Context, records: list[dict[str, object]], lowest: StreamId) -> DataFrame:
    """The targets' groups' PEL rows after their group's cursor (normally none)."""
    cursors = json_frame(ctx.snapshot.spark, records, _TARGETS).select(C.PARTITION_ID, C.LAST_MS, C.LAST_SEQ)
    pending_files = FileQuery(tuple(_group_partitions(records)), (C.KIND_PENDING,), lowest, MAX_ID)
    pending = (
        ctx.snapshot.frame_of([pending_files])
        .where(
            pruned_to(_group_partitions(records), kinds=[C.KIND_PENDING])
            & (F.col(C.ROW_KIND) == C.KIND_PENDING)
            & id_at_least(lowest)  # the first ID after the lowest cursor
        )
        .select(C.PARTITION_ID, C.ID_MS, C.ID_SEQ)
    )
    return pending.join(F.broadcast(cursors), C.PARTITION_ID).where(_after_cursor())


def _after_cursor() -> Column:
    """A row's ID (``id_ms``, ``id_seq``) lies after its target's cursor (``last_ms``, ``last_seq``)."""
    return (F.col(C.ID_MS) > F.col(C.LAST_MS)) | (
        (F.col(C.ID_MS) == F.col(C.LAST_MS)) & (F.col(C.ID_SEQ) > F.col(C.LAST_SEQ))
    )


def _cursors(
    ctx: Context, targets: Sequence[tuple[str, str, str]], until: Mapping[str, StreamId] | None
) -> tuple[list[dict[str, object]], StreamId | None]:
    """One record per target with entries to deliver (its group's cursor and its ``until`` cap), and the
    lowest ID any of them starts from."""
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
        last_ms, last_seq = head.last_id.stored()
        until_ms, until_seq = cap.stored() if cap is not None else (None, None)
        records.append(
            {
                _TARGET: position,
                C.STREAM: key,
                C.GROUP: group,
                C.PARTITION_ID: group_partition(key, group),
                C.OWNER: consumer,
                C.LAST_MS: last_ms,
                C.LAST_SEQ: last_seq,
                _UNTIL_MS: until_ms,
                _UNTIL_SEQ: until_seq,
            }
        )
    return records, lowest


def _delivered(
    ctx: Context, records: list[dict[str, object]], lowest: StreamId, count: int | None, total: int | None
) -> DataFrame:
    """The entries each target delivers: after its cursor, up to its cap, at most ``count`` per target and
    ``total`` in all (the oldest IDs first), each with its target's record."""
    streams = sorted({str(record[C.STREAM]) for record in records})
    entry_files = FileQuery(tuple(stream_partition(key) for key in streams), (C.KIND_ENTRY,), lowest, MAX_ID)
    entries = (
        ctx.snapshot.frame_of([entry_files])
        .where(
            pruned_to([stream_partition(key) for key in streams])  # the join below keeps the targets' streams
            & (F.col(C.ROW_KIND) == C.KIND_ENTRY)
            & id_at_least(lowest)  # the lowest cursor's range: Delta still skips older files
        )
        .select(C.STREAM, C.ID_MS, C.ID_SEQ)
    )
    within_until = (
        F.col(_UNTIL_MS).isNull()
        | (F.col(C.ID_MS) < F.col(_UNTIL_MS))
        | ((F.col(C.ID_MS) == F.col(_UNTIL_MS)) & (F.col(C.ID_SEQ) <= F.col(_UNTIL_SEQ)))
    )
    delivered = entries.join(F.broadcast(json_frame(ctx.snapshot.spark, records, _TARGETS)), C.STREAM).where(
        _after_cursor() & within_until
    )
    if count is not None:
        rank = F.row_number().over(Window.partitionBy(_TARGET).orderBy(C.ID_MS, C.ID_SEQ))
        delivered = delivered.withColumn("_rank", rank).where(F.col("_rank") <= count)
    if total is not None:
        # The oldest IDs first, whichever stream holds them: a top N of every target's candidates (each
        # task keeps its N smallest, one merges them) rather than one window sorting them all in one task
        # (a delivery of 250,000 of 1M planned and its rows counted: 0.1-0.35 s less).
        delivered = delivered.orderBy(C.ID_MS, C.ID_SEQ, _TARGET).limit(total)
    return delivered


def _pending_rows(ctx: Context, delivered: DataFrame) -> DataFrame:
    """The PEL rows the delivered entries become: owned by their target's consumer, delivered once, now."""
    return delivered.select(
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

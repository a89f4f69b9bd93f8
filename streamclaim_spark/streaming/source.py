"""The ``streamclaim`` stream reader: a consumer group read from Spark Structured Streaming.

Each micro-batch is planned in one Delta transaction (``latestOffset``): it acknowledges the entries
of the previous batch, which Spark has committed by then, and delivers new entries to the query's
consumer as ``XREADGROUP ... >`` would. The batch's offset records the Delta version of that commit
and each stream's ID range, so ``partitions`` reads exactly the batch's rows by time travel, on the
first run and on a replay after a crash alike. docs/STREAMING.md gives the semantics and the crash cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId
from streamclaim_spark.core.model import Need
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.patterns import is_pattern, matching
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.core.reader_marks import ReaderMark
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.errors import nogroup_xreadgroup
from streamclaim_spark.fleet.bulk import plan_deliveries
from streamclaim_spark.state.columns import id_at_least, id_at_most, id_text, stored_id
from streamclaim_spark.state.schema import COLUMN_NAMES, in_partitions
from streamclaim_spark.state.snapshot import Snapshot
from streamclaim_spark.streaming.batch_rows import batch_rows, pending_rows, ranges_query
from streamclaim_spark.streaming.driver import Linked
from streamclaim_spark.streaming.options import BatchOffset, RangeOptions, SourceOptions

if TYPE_CHECKING:
    from streamclaim_spark.streaming.driver import DriverLink

# What the source emits per entry; ``fields`` as the store keeps them (SQL: CAST(value AS STRING)).
ENTRY_SCHEMA = (
    "stream STRING, id STRING, fields ARRAY<STRUCT<field: BINARY, value: BINARY>>, "
    "delivery_count BIGINT, delivered_at TIMESTAMP"
)


class ArrowPartition(InputPartition):
    """One Spark task's rows, as an Arrow IPC stream read on the driver side while planning."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(None)
        self.payload = payload

    def __repr__(self) -> str:
        return f"ArrowPartition({len(self.payload)} bytes)"


def _partitions(rows: pa.Table, rows_per_partition: int) -> list[InputPartition]:
    """Puts ``rows`` (``_entry_rows``' columns, collected as Arrow) in stream and ID order and cuts them
    into partitions of at most ``rows_per_partition``. Sorted on the driver: Spark's sort of rows bound
    for the driver anyway costs a sampling job and a shuffle (125,000 rows: 1.04 -> 0.75 s)."""
    table = rows.sort_by([(C.STREAM, "ascending"), (C.ID_MS, "ascending"), (C.ID_SEQ, "ascending")])
    table = table.drop_columns([C.ID_MS, C.ID_SEQ])
    # Spark checks the rows against the declared schema, whose columns are all nullable.
    table = table.cast(pa.schema([column.with_nullable(True) for column in table.schema]))
    parts: list[InputPartition] = []
    for offset in range(0, table.num_rows, rows_per_partition):
        sink = pa.BufferOutputStream()
        chunk = table.slice(offset, rows_per_partition)
        with pa.ipc.new_stream(sink, chunk.schema) as writer:
            writer.write_table(chunk)
        parts.append(ArrowPartition(sink.getvalue().to_pybytes()))
    return parts


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, ArrowPartition)
    yield from pa.ipc.open_stream(partition.payload)


def _in_ranges(
    frame: DataFrame, ranges: dict[str, tuple[StreamId, StreamId]], kind: str, where: Callable[[str], str]
) -> DataFrame:
    """Rows of ``kind`` in each stream's ID range (exclusive low, inclusive high), in the partition ``where`` names."""
    spans: Column | None = None
    for stream, (low, high) in sorted(ranges.items()):
        span = (F.col(C.PARTITION_ID) == where(stream)) & id_at_least(low.incr()) & id_at_most(high)
        spans = span if spans is None else spans | span
    assert spans is not None
    return frame.where(in_partitions([where(s) for s in ranges]) & (F.col(C.ROW_KIND) == kind) & spans)


def _entry_rows(table: DataFrame, ranges: dict[str, tuple[StreamId, StreamId]], pending: DataFrame | None) -> DataFrame:
    """The rows the source emits: ``pending`` rows with their entries' fields (null for a deleted
    entry, as XREADGROUP gives nil), or with ``pending`` None every entry in the ranges."""
    entries = _in_ranges(table, ranges, C.KIND_ENTRY, stream_partition).select(C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
    if pending is None:
        rows = entries.select(
            "*",
            F.lit(None).cast("bigint").alias(C.DELIVERY_COUNT),
            F.lit(None).cast("bigint").alias(C.DELIVERY_TIME_MS),
        )
    else:
        rows = pending.select(C.STREAM, C.ID_MS, C.ID_SEQ, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS).join(
            entries, [C.STREAM, C.ID_MS, C.ID_SEQ], "left"
        )
    return rows.select(
        F.col(C.STREAM).alias("stream"),
        id_text(C.ID_MS, C.ID_SEQ).alias("id"),
        F.col(C.FIELDS).alias("fields"),
        F.col(C.DELIVERY_COUNT).alias("delivery_count"),
        F.timestamp_millis(F.col(C.DELIVERY_TIME_MS)).alias("delivered_at"),
        C.ID_MS,
        C.ID_SEQ,
    )


def _selected_streams(snapshot: Snapshot, streams: Sequence[str], group: str | None) -> list[str]:
    """The streams ``streams`` selects: its plain names, plus every existing stream (with ``group``,
    when given) that one of its glob patterns matches; the heads are read once, only for patterns."""
    names = {name for name in streams if not is_pattern(name)}
    if len(names) < len(streams):
        existing = [meta.key for meta in snapshot.all_streams() if group is None or group in meta.groups]
        names.update(matching(streams, existing))
    return sorted(names)


class GroupReader(Linked, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads a consumer group as one consumer: delivery and acknowledgement ride the micro-batches."""

    def __init__(self, options: SourceOptions, link: DriverLink | None) -> None:
        super().__init__(options.path, link)
        self.options = options
        self._until: dict[str, StreamId] | None = None  # Trigger.AvailableNow: the last IDs when it began
        self._acknowledged: str | None = None  # the last batch whose entries this process acknowledged
        self._checked = False  # the streams and group were found by this process (a query's start)

    # --- what to read -------------------------------------------------------------------------------

    def _streams(self, snapshot: Snapshot) -> list[str]:
        """The streams read: every named one (NOGROUP if it or its group is missing), plus every
        stream a pattern matches that has the group."""
        group, consumer = self.options.group, self.options.consumer
        streams = _selected_streams(snapshot, self.options.streams, group)
        snapshot.load_heads_of([Need(s, (group,), consumer) for s in streams])
        for stream in self.options.named:
            if snapshot.stream(stream) is None or snapshot.group(stream, group) is None:
                raise nogroup_xreadgroup(stream, group)
        return streams

    def initialOffset(self) -> dict[str, Any]:
        # A missing stream or group fails the query at its start. Spark asks twice in a query's first
        # batch, after Trigger.AvailableNow's preparation read the same heads: once per process is
        # enough (0.4-0.8 s each; every batch's own transaction reads them again).
        if not self._checked:
            self._streams(self._store().snapshot())
            self._checked = True
        return BatchOffset().to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.options.max_entries_per_trigger
        return ReadMaxRows(cap) if cap is not None else super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        snapshot = self._store().snapshot()
        streams = self._streams(snapshot)
        self._until = {s: meta.last_id for s in streams if (meta := snapshot.stream(s)) is not None}
        self._checked = True

    # --- one micro-batch ------------------------------------------------------------------------------

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Acknowledges the previous batch and plans the next, in one commit; returns ``start`` when
        there is nothing new (Spark then runs no batch)."""
        store, options = self._store(), self.options
        previous = BatchOffset.from_json(start)
        started = json.dumps(start, sort_keys=True)
        emitted = None
        if previous.version >= 0 and previous.ranges() and self._acknowledged != started:
            emitted = self._emitted(store.table_at(previous.version), previous)
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None

        def decide(ctx: Context) -> tuple[dict[str, StreamId], int]:
            streams = self._streams(ctx.snapshot)
            acknowledged = self._acknowledge(ctx, previous, emitted)
            highs = self._redeliver_pending(ctx, previous, streams, cap)
            room = None if cap is None else cap - sum(n for n, _ in highs.values())
            delivered: dict[str, StreamId] = {}
            if room is None or room > 0:
                until = None if self._until is None else {s: self._until.get(s, ZERO_ID) for s in streams}
                targets = [(s, options.group, options.consumer) for s in streams]
                for (stream, _, _), result in zip(
                    targets, plan_deliveries(ctx, targets, total=room, until=until), strict=True
                ):
                    if result.last_id is not None:
                        delivered[stream] = result.last_id
            for stream in (acknowledged | set(highs)) - set(delivered):  # a delivery guards its group's head
                head = ctx.snapshot.group(stream, options.group)
                assert head is not None
                put_group(ctx, head, head)
            ends = {s: last for s, (_, last) in highs.items()}
            for stream, last in delivered.items():
                ends[stream] = max(last, ends.get(stream, ZERO_ID))
            assert ctx.snapshot.version is not None  # the runner pins every snapshot
            return ends, ctx.snapshot.version

        ends, read_version = store.transact(ReaderMark(options.group, options.consumer).operation(), decide)
        self._acknowledged = started
        if not ends:
            return start
        version = store.last_commit_version if store.last_commit_version is not None else read_version
        return previous.next(version, ends).to_json()

    def _emitted(self, table: DataFrame, batch: BatchOffset) -> DataFrame:
        """What ``batch`` emitted: its PEL rows as of its version (key and delivery, to match on)."""
        group, consumer = self.options.group, self.options.consumer
        rows = _in_ranges(table, batch.ranges(), C.KIND_PENDING, lambda s: group_partition(s, group))
        return rows.where(F.col(C.OWNER) == consumer).select(
            C.STREAM, C.ID_MS, C.ID_SEQ, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS
        )

    def _acknowledge(self, ctx: Context, batch: BatchOffset, emitted: DataFrame | None) -> set[str]:
        """Plans XACK of what ``batch`` emitted and is still pending as it was delivered (not claimed
        or redelivered since: a claimed entry is its new owner's to acknowledge); returns the streams
        whose groups it touches. No count first: a batch's entries are there to acknowledge, except
        after a restart, when an empty delete costs less than the query that would find it empty."""
        if emitted is None:
            return set()
        group, consumer = self.options.group, self.options.consumer
        ctx.snapshot.load_heads_of([Need(s, (group,), consumer) for s in batch.ranges()])
        # A group destroyed since (or a stream deleted) has no PEL left to acknowledge in.
        ranges = {s: span for s, span in batch.ranges().items() if ctx.snapshot.group(s, group) is not None}
        if not ranges:
            return set()
        of_group = partial(group_partition, group=group)
        query = ranges_query(ranges, C.KIND_PENDING, of_group)
        stored = ctx.snapshot.frame_of([query])
        pending = _in_ranges(stored, ranges, C.KIND_PENDING, of_group)
        done = pending.where(F.col(C.OWNER) == consumer).join(
            emitted, [C.STREAM, C.ID_MS, C.ID_SEQ, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS], "left_semi"
        )
        # A removal: committed with the batch's appended deliveries as files, each PEL file the ranges
        # reach rewritten once without the acknowledged rows (engine/file_commit.py).
        keys = done.select(C.PARTITION_ID, C.ID_MS, C.ID_SEQ)

        def empties(file: FileBounds) -> bool:
            """Every row of ``file``, which was in the table at the batch's version, is a pending row of
            this consumer in one stream's range: the batch emitted all of them, and (the file unchanged
            since) they are pending as delivered: all acknowledged. The batch's delivery wrote such files."""
            return (
                file.only(C.ROW_KIND, C.KIND_PENDING)
                and file.only(C.OWNER, consumer)
                and any(
                    file.only(C.PARTITION_ID, group_partition(s, group)) and file.ids_between(start.incr(), end)
                    for s, (start, end) in ranges.items()
                )
            )

        ctx.plan.add_removal(
            Removal(
                C.KIND_PENDING, query.partitions, keys, query.low, query.high, empties=empties, written_at=batch.version
            )
        )
        return set(ranges)

    def _redeliver_pending(
        self, ctx: Context, batch: BatchOffset, streams: Sequence[str], cap: int | None
    ) -> dict[str, tuple[int, StreamId]]:
        """Plans the redelivery of the consumer's pending entries after the last ID the query emitted
        (at most ``cap``, the oldest first) and returns their count and last ID per stream.

        They are a delivery whose batch never reached Spark's offset log (the query died in between),
        or entries claimed to this consumer. As XREADGROUP's history read, the batch emits them again
        and counts the delivery: delivery count + 1 and delivery time now, except for entries deleted
        from the stream, which stay as they are (and are emitted with null fields). So a poison entry
        that kills the query each time reaches the recovery job's ``max_deliveries``.
        """
        group, consumer = self.options.group, self.options.consumer
        ranges = {s: (batch.after(s), MAX_ID) for s in streams if batch.after(s) < MAX_ID}
        if not ranges:
            return {}
        # Usually there are none: the few files that may hold them, read on the driver, say so without a
        # Spark query (0.4-0.6 s a batch).
        found = pending_rows(ctx.snapshot, ranges, group, consumer, placement().rows_max(Work.DECIDE))
        if found is not None and found.num_rows == 0:
            return {}
        of_group = partial(group_partition, group=group)
        pending = ranges_query(ranges, C.KIND_PENDING, of_group)
        rows = _in_ranges(ctx.snapshot.frame_of([pending]), ranges, C.KIND_PENDING, of_group)
        rows = rows.where(F.col(C.OWNER) == consumer)
        if cap is not None:
            rows = rows.orderBy(C.ID_MS, C.ID_SEQ, C.STREAM).limit(cap)
        pair = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
        tallies = rows.groupBy(C.STREAM).agg(F.count(F.lit(1)).alias("n"), F.max(pair).alias("hi")).collect()
        if tallies:
            entries = ranges_query(ranges, C.KIND_ENTRY, stream_partition)
            live = _in_ranges(ctx.snapshot.frame_of([entries]), ranges, C.KIND_ENTRY, stream_partition)
            redelivered = rows.join(
                live.select(C.STREAM, C.ID_MS, C.ID_SEQ), [C.STREAM, C.ID_MS, C.ID_SEQ], "left_semi"
            )
            redelivered = redelivered.select(
                *(
                    {
                        C.DELIVERY_COUNT: F.col(C.DELIVERY_COUNT) + 1,
                        C.DELIVERY_TIME_MS: F.lit(ctx.now).cast("bigint"),
                        C.TXN: F.lit(ctx.txn),
                    }.get(name, F.col(name)).alias(name)
                    for name in COLUMN_NAMES
                )
            )
            ctx.plan.add_frame(source_frame(redelivered), *(group_partition(row[C.STREAM], group) for row in tallies))
        return {row[C.STREAM]: (int(row["n"]), stored_id(row["hi"])) for row in tallies}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        batch = BatchOffset.from_json(end)
        ranges = batch.ranges()
        if batch.version < 0 or not ranges:
            return []
        store = self._store()
        group, consumer = self.options.group, self.options.consumer
        # The batch's files, kept on the driver since this process committed it, read there; a replay in
        # a new process reads the version by time travel.
        rows = batch_rows(Snapshot(store.runner.session(), store.state_path, batch.version), ranges, group, consumer)
        if rows is None:
            table = store.table_at(batch.version)
            pending = _in_ranges(table, ranges, C.KIND_PENDING, lambda s: group_partition(s, group))
            rows = _entry_rows(table, ranges, pending.where(F.col(C.OWNER) == consumer)).toArrow()
        return _partitions(rows, self.options.rows_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing: a batch's entries are acknowledged by the next ``latestOffset``, which Spark calls
        only once that batch is committed (and once more after the last batch of Trigger.AvailableNow)."""

    def stop(self) -> None:
        """Nothing to free; the session is the driver's and must stay open."""


class RangeReader(Linked, DataSourceReader):
    """``spark.read.format("streamclaim")``: every entry of the named streams, as XRANGE - + reads them."""

    def __init__(self, options: RangeOptions, link: DriverLink | None) -> None:
        super().__init__(options.path, link)
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        snapshot = self._store().snapshot()
        ranges = {s: (ZERO_ID, MAX_ID) for s in _selected_streams(snapshot, self.options.streams, None)}
        if not ranges:
            return []
        rows = _entry_rows(snapshot.frame(), ranges, None)
        return _partitions(rows.toArrow(), self.options.rows_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

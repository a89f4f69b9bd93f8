"""Reads store state at one pinned Delta version.

A command decides on one snapshot: every query of a ``Snapshot`` reads the same table version, and
each query prunes to the partition of the stream or group it asks about. Results are plain values
from ``model``; ``frame()`` gives the pinned table as a DataFrame for bulk work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import _constants as C
from streamclaim_spark.ids import STORED_OFFSET, StreamId, from_stored, to_stored
from streamclaim_spark.model import ConsumerMeta, Entry, GroupMeta, PendingEntry, StreamMeta
from streamclaim_spark.schema import group_partition, stream_partition


def _id_columns(table: str) -> tuple[Column, Column]:
    prefix = f"{table}." if table else ""
    return F.col(prefix + C.ID_MS), F.col(prefix + C.ID_SEQ)


def id_at_least(bound: StreamId, table: str = "") -> Column:
    """Rows whose (id_ms, id_seq) is >= ``bound``; the id_ms conjunct lets Delta skip files.

    ``table`` qualifies the columns with an alias (``"t"`` in a MERGE condition).
    """
    ms, seq = to_stored(bound.ms), to_stored(bound.seq)
    id_ms, id_seq = _id_columns(table)
    return (id_ms >= F.lit(ms)) & ((id_ms > F.lit(ms)) | (id_seq >= F.lit(seq)))


def id_at_most(bound: StreamId, table: str = "") -> Column:
    """Rows whose (id_ms, id_seq) is <= ``bound``."""
    ms, seq = to_stored(bound.ms), to_stored(bound.seq)
    id_ms, id_seq = _id_columns(table)
    return (id_ms <= F.lit(ms)) & ((id_ms < F.lit(ms)) | (id_seq <= F.lit(seq)))


def id_between(low: StreamId, high: StreamId, table: str = "") -> Column:
    """Rows whose ID lies in [low, high]: the range Delta's min/max statistics skip files by."""
    return id_at_least(low, table) & id_at_most(high, table)


def id_in(ids: Iterable[StreamId]) -> Column:
    """Rows whose ID is one of ``ids``; the range conjuncts let Delta skip files outside [min, max]."""
    wanted = sorted(set(ids))
    if not wanted:
        return F.lit(False)
    pairs = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
    literals = [F.struct(F.lit(to_stored(i.ms)), F.lit(to_stored(i.seq))) for i in wanted]
    ms_values = sorted({to_stored(i.ms) for i in wanted})
    return id_between(wanted[0], wanted[-1]) & F.col(C.ID_MS).isin(ms_values) & pairs.isin(literals)


def id_text(ms: str, seq: str) -> Column:
    """Renders stored (shifted) ID columns as Redis' ``ms-seq`` text."""
    offset = F.expr(f"CAST({STORED_OFFSET} AS DECIMAL(20,0))")
    as_text = [(F.col(part).cast("decimal(20,0)") + offset).cast("decimal(20,0)").cast("string") for part in (ms, seq)]
    return F.concat(as_text[0], F.lit("-"), as_text[1])


def stored_id(row: Row | dict[str, Any], ms: str = C.ID_MS, seq: str = C.ID_SEQ) -> StreamId:
    return StreamId(from_stored(row[ms]), from_stored(row[seq]))


def entry_from_row(row: Row) -> Entry:
    return Entry(stored_id(row), tuple((pair["field"], pair["value"]) for pair in row[C.FIELDS]))


def pending_from_row(row: Row) -> PendingEntry:
    return PendingEntry(stored_id(row), row[C.OWNER], row[C.DELIVERY_TIME_MS], row[C.DELIVERY_COUNT])


def by_bytes(name: str) -> bytes:
    """Redis orders consumers and groups bytewise."""
    return name.encode()


# Up to this many IDs are matched with literals; more through a broadcast join.
_LITERAL_IDS = 64


class Snapshot:
    """The store's state at one Delta version, queried a partition at a time."""

    def __init__(self, spark: SparkSession, table_path: str, version: int | None = None) -> None:
        self.spark = spark
        self.table_path = table_path
        self.version = version
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        self._table = reader.load(table_path)
        self._streams: dict[str, StreamMeta | None] = {}
        self._groups: dict[tuple[str, str], GroupMeta | None] = {}
        self._consumers: dict[tuple[str, str, str], ConsumerMeta | None] = {}

    def frame(self) -> DataFrame:
        """The whole table at this version."""
        return self._table

    def partition(self, partition_id: str, kind: str) -> DataFrame:
        return self._table.where((F.col(C.PARTITION_ID) == partition_id) & (F.col(C.ROW_KIND) == kind))

    def with_ids(self, frame: DataFrame, ids: Iterable[StreamId]) -> DataFrame:
        """The rows of ``frame`` whose ID is one of ``ids``, reading only files within their range.

        A few IDs become literals; many (an XAUTOCLAIM scan examines up to COUNT x 10) a small
        broadcast table, since thousands of literal Columns cost a py4j call each.
        """
        wanted = sorted(set(ids))
        if len(wanted) <= _LITERAL_IDS:
            return frame.where(id_in(wanted))
        keys = self.spark.createDataFrame(
            [(to_stored(i.ms), to_stored(i.seq)) for i in wanted], f"{C.ID_MS} long, {C.ID_SEQ} long"
        )
        in_range = frame.where(id_between(wanted[0], wanted[-1]))
        return in_range.join(F.broadcast(keys), on=[C.ID_MS, C.ID_SEQ], how="left_semi")

    # --- heads ----------------------------------------------------------------------------------

    def existing_group(self, key: str, name: str) -> GroupMeta | None:
        """Group ``name`` of stream ``key``, or None when either does not exist."""
        return self.group(key, name) if self.stream(key) is not None else None

    def stream(self, key: str) -> StreamMeta | None:
        """The stream's head, or None when the key does not exist."""
        if key not in self._streams:
            self.load_heads(key)
        return self._streams[key]

    def group(self, key: str, name: str) -> GroupMeta | None:
        """The group's head, or None when the key or the group does not exist."""
        if (key, name) not in self._groups:
            self.load_heads(key, [name])
        return self._groups[(key, name)]

    def load_heads(self, key: str, groups: Iterable[str] = (), consumer: str | None = None) -> None:
        """Loads the stream head, the named groups' heads and (optionally) one consumer in one query."""
        groups = [g for g in groups if (key, g) not in self._groups]
        if key in self._streams and not groups:
            return
        partitions = [stream_partition(key), *(group_partition(key, g) for g in groups)]
        wanted = F.col(C.ROW_KIND).isin(*C.HEAD_KINDS)
        if consumer is not None:
            wanted = wanted | ((F.col(C.ROW_KIND) == C.KIND_CONSUMER) & (F.col(C.CONSUMER) == consumer))
        rows = (
            self._table.where(F.col(C.PARTITION_ID).isin(partitions) & wanted).where(F.col(C.STREAM) == key).collect()
        )
        self._streams.setdefault(key, None)
        for g in groups:
            self._groups[(key, g)] = None
            if consumer is not None:
                self._consumers[(key, g, consumer)] = None
        for row in rows:
            if row[C.ROW_KIND] == C.KIND_CONSUMER:
                self._consumers[(key, row[C.GROUP], row[C.CONSUMER])] = ConsumerMeta(
                    row[C.CONSUMER], row[C.SEEN_TIME_MS], row[C.ACTIVE_TIME_MS]
                )
            elif row[C.ROW_KIND] == C.KIND_STREAM:
                self._streams[key] = StreamMeta(
                    key=key,
                    last_id=stored_id(row, C.LAST_MS, C.LAST_SEQ),
                    entries_added=row[C.ENTRIES_ADDED],
                    length=row[C.ENTRY_COUNT],
                    first_id=stored_id(row, C.FIRST_MS, C.FIRST_SEQ),
                    max_deleted_id=stored_id(row, C.MAX_DELETED_MS, C.MAX_DELETED_SEQ),
                    groups=tuple(row[C.GROUP_NAMES] or ()),
                    version=row[C.VERSION],
                )
            else:
                self._groups[(key, row[C.GROUP])] = GroupMeta(
                    key=key,
                    name=row[C.GROUP],
                    last_id=stored_id(row, C.LAST_MS, C.LAST_SEQ),
                    entries_read=row[C.ENTRIES_READ],
                    version=row[C.VERSION],
                )

    def groups(self, key: str) -> list[GroupMeta]:
        """All groups of the stream, in Redis' bytewise name order."""
        meta = self.stream(key)
        if meta is None:
            return []
        self.load_heads(key, meta.groups)
        found = [self._groups[(key, g)] for g in sorted(meta.groups, key=by_bytes)]
        return [g for g in found if g is not None]

    # --- entries --------------------------------------------------------------------------------

    def entries(
        self, key: str, low: StreamId, high: StreamId, count: int | None = None, reverse: bool = False
    ) -> list[Entry]:
        """Live entries with low <= id <= high, ascending (descending if ``reverse``), at most ``count``."""
        if low > high or count == 0:
            return []
        frame = self.partition(stream_partition(key), C.KIND_ENTRY).where(id_between(low, high))
        order = [F.col(C.ID_MS).desc(), F.col(C.ID_SEQ).desc()] if reverse else [C.ID_MS, C.ID_SEQ]
        frame = frame.orderBy(*order)
        if count is not None:
            frame = frame.limit(count)
        return [entry_from_row(row) for row in frame.select(C.ID_MS, C.ID_SEQ, C.FIELDS).collect()]

    def entries_by_id(self, key: str, ids: Iterable[StreamId]) -> dict[StreamId, Entry]:
        """The live entries among ``ids``."""
        frame = self.with_ids(self.partition(stream_partition(key), C.KIND_ENTRY), ids)
        entries = (entry_from_row(row) for row in frame.select(C.ID_MS, C.ID_SEQ, C.FIELDS).collect())
        return {entry.id: entry for entry in entries}

    def entry_ids(self, key: str, low: StreamId, high: StreamId, count: int | None = None) -> list[StreamId]:
        """IDs of live entries in [low, high], ascending, at most ``count``."""
        if low > high or count == 0:
            return []
        frame = (
            self.partition(stream_partition(key), C.KIND_ENTRY)
            .where(id_between(low, high))
            .select(C.ID_MS, C.ID_SEQ)
            .orderBy(C.ID_MS, C.ID_SEQ)
        )
        if count is not None:
            frame = frame.limit(count)
        return [stored_id(row) for row in frame.collect()]

    def count_entries(self, key: str, low: StreamId, high: StreamId) -> int:
        """Number of live entries with low <= id <= high."""
        if low > high:
            return 0
        frame = self.partition(stream_partition(key), C.KIND_ENTRY).where(id_between(low, high))
        return int(frame.count())

    def nth_entry_id(self, key: str, offset: int) -> StreamId:
        """ID of the live entry at 0-based position ``offset`` in ID order."""
        rows = (
            self.partition(stream_partition(key), C.KIND_ENTRY)
            .select(C.ID_MS, C.ID_SEQ)
            .orderBy(C.ID_MS, C.ID_SEQ)
            .offset(offset)
            .limit(1)
            .collect()
        )
        return stored_id(rows[0])

    def last_entry_id(self, key: str) -> StreamId | None:
        """ID of the newest live entry, None for an empty stream."""
        rows = (
            self.partition(stream_partition(key), C.KIND_ENTRY)
            .select(C.ID_MS, C.ID_SEQ)
            .orderBy(F.col(C.ID_MS).desc(), F.col(C.ID_SEQ).desc())
            .limit(1)
            .collect()
        )
        return stored_id(rows[0]) if rows else None

    # --- consumers and the PEL ----------------------------------------------------------------------

    def consumers(self, key: str, group: str) -> list[ConsumerMeta]:
        """The group's consumers in bytewise name order."""
        rows = self.partition(group_partition(key, group), C.KIND_CONSUMER).collect()
        consumers = [ConsumerMeta(r[C.CONSUMER], r[C.SEEN_TIME_MS], r[C.ACTIVE_TIME_MS]) for r in rows]
        return sorted(consumers, key=lambda c: by_bytes(c.name))

    def consumer(self, key: str, group: str, name: str) -> ConsumerMeta | None:
        rows = self.partition(group_partition(key, group), C.KIND_CONSUMER).where(F.col(C.CONSUMER) == name).collect()
        if not rows:
            return None
        return ConsumerMeta(rows[0][C.CONSUMER], rows[0][C.SEEN_TIME_MS], rows[0][C.ACTIVE_TIME_MS])

    def pending_frame(self, key: str, group: str) -> DataFrame:
        return self.partition(group_partition(key, group), C.KIND_PENDING)

    def pending(
        self,
        key: str,
        group: str,
        low: StreamId,
        high: StreamId,
        count: int | None = None,
        owner: str | None = None,
        delivered_at_or_before: int | None = None,
    ) -> list[PendingEntry]:
        """PEL entries in [low, high] in ID order, optionally of one owner and delivered early enough."""
        if low > high or count == 0:
            return []
        frame = self.pending_frame(key, group).where(id_between(low, high))
        if owner is not None:
            frame = frame.where(F.col(C.OWNER) == owner)
        if delivered_at_or_before is not None:
            frame = frame.where(F.col(C.DELIVERY_TIME_MS) <= delivered_at_or_before)
        frame = frame.orderBy(C.ID_MS, C.ID_SEQ)
        if count is not None:
            frame = frame.limit(count)
        columns = (C.ID_MS, C.ID_SEQ, C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT)
        return [pending_from_row(row) for row in frame.select(*columns).collect()]

    def pending_by_id(self, key: str, group: str, ids: Iterable[StreamId]) -> dict[StreamId, PendingEntry]:
        frame = self.with_ids(self.pending_frame(key, group), ids)
        columns = (C.ID_MS, C.ID_SEQ, C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT)
        entries = (pending_from_row(row) for row in frame.select(*columns).collect())
        return {entry.id: entry for entry in entries}

    def pending_counts(self, key: str, group: str) -> dict[str, int]:
        """Number of pending entries per owner (owners with none are absent)."""
        rows = self.pending_frame(key, group).groupBy(C.OWNER).count().collect()
        return {row[C.OWNER]: row["count"] for row in rows}

    def group_counts(self, key: str, groups: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(consumers, pending entries) per group, in one aggregation over the groups' partitions."""
        if not groups:
            return {}
        partitions = [group_partition(key, g) for g in groups]
        rows = (
            self._table.where(
                F.col(C.PARTITION_ID).isin(partitions) & F.col(C.ROW_KIND).isin(C.KIND_CONSUMER, C.KIND_PENDING)
            )
            .groupBy(C.GROUP, C.ROW_KIND)
            .count()
            .collect()
        )
        counts = {g: [0, 0] for g in groups}
        for row in rows:
            if row[C.GROUP] in counts:
                counts[row[C.GROUP]][0 if row[C.ROW_KIND] == C.KIND_CONSUMER else 1] = row["count"]
        return {g: (c[0], c[1]) for g, c in counts.items()}

    def pending_bounds(self, key: str, group: str) -> tuple[int, StreamId | None, StreamId | None]:
        """Count, smallest and largest pending ID of the group's PEL in one aggregation."""
        pair = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
        row = (
            self.pending_frame(key, group)
            .agg(F.count(F.lit(1)).alias("n"), F.min(pair).alias("lo"), F.max(pair).alias("hi"))
            .collect()[0]
        )
        if row["n"] == 0:
            return 0, None, None
        return row["n"], stored_id(row["lo"]), stored_id(row["hi"])

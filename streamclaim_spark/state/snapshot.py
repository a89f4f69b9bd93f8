"""Reads store state at one pinned Delta version.

A command decides on one snapshot: every query of a ``Snapshot`` reads the same table version, and
each query prunes to the partition of the stream or group it asks about. Results are plain values
from ``model``; ``frame()`` gives the pinned table as a DataFrame for bulk work. What a command reads
by key comes from one prefetch query (prefetch.py); the rest are the reads below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import ConsumerMeta, Entry, GroupMeta, Need, PendingEntry, Scan, StreamMeta
from streamclaim_spark.core.partitions import APART_PREFIX, group_partition, shares_buckets, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state import kept_counts, pel_by_time, pel_summary, prefetch_rows
from streamclaim_spark.state.columns import (
    by_bytes,
    consumer_from_row,
    entry_from_row,
    id_between,
    id_range_aggregates,
    pending_from_row,
    stored_id,
)
from streamclaim_spark.state.head_files import head_rows_for
from streamclaim_spark.state.kept_rows import every_head_at
from streamclaim_spark.state.prefetch import PrefetchedSnapshot
from streamclaim_spark.state.schema import (
    NAMED_PARTITIONS_MAX,
    in_buckets,
    in_partitions,
    kind_in,
)

# The columns ``PrefetchedSnapshot._remember_head`` reads: a read of every head need not carry the others.
HEAD_COLUMNS = (
    C.ROW_KIND,
    C.STREAM,
    C.GROUP,
    C.LAST_MS,
    C.LAST_SEQ,
    C.ENTRIES_ADDED,
    C.ENTRY_COUNT,
    C.FIRST_MS,
    C.FIRST_SEQ,
    C.MAX_DELETED_MS,
    C.MAX_DELETED_SEQ,
    C.GROUP_NAMES,
    C.VERSION,
    C.SOME_DELETED,
    C.ENTRIES_READ,
    C.PENDING_COUNT,
    C.COUNTED_VERSION,
)


class Snapshot(PrefetchedSnapshot):
    """The store's state at one Delta version: its heads, entries, consumers and PEL.

    The accessors answer from what was prefetched (prefetch.py) and query only for what was not.
    """

    # Whether ``prefetch`` may read heads from their own files (``head_rows_for``). A batch's
    # snapshot (engine/batch) reads through its prefetch, which shows the batch's own writes and records
    # what the batch read.
    reads_heads_from_files = True

    def partition(self, partition_id: str | Sequence[str], kind: str) -> DataFrame:
        """The rows of ``kind`` in one partition or several, through Delta's read: a caller's further
        filters (IDs) skip files by Delta's statistics."""
        return self.frame().where(kind_in(partition_id, kind))

    def rows_of(
        self, partition_id: str | Sequence[str], kind: str, low: StreamId | None = None, high: StreamId | None = None
    ) -> DataFrame:
        """The rows of ``kind`` in one partition or several, from only the files that may hold them (IDs
        in [``low``, ``high``] when given; the caller filters the rows by them): the reads below, whose
        every filter is known here."""
        partitions = (partition_id,) if isinstance(partition_id, str) else tuple(partition_id)
        return self.frame_of([FileQuery(partitions, (kind,), low, high)]).where(kind_in(partition_id, kind))

    # --- heads ----------------------------------------------------------------------------------

    def prefetch(self, *needs: Need) -> None:
        """``PrefetchedSnapshot.prefetch``, the heads and consumers ``needs`` name read first from their own
        files on the driver where that can be done (``head_rows_for``: no Spark job; through the query
        they cost an XADD ~0.19 s of its ~0.78 s), so the query reads only the IDs and ranges, if any."""
        if needs:
            self._heads_from_files([Need(need.key, need.groups, need.consumer) for need in needs])
        super().prefetch(*needs)

    def existing_group(self, key: str, name: str) -> GroupMeta | None:
        """Group ``name`` of stream ``key``, or None when either does not exist. Both heads come in one
        read: asked one after the other they took two queries (a bulk XACK's first read: 12 -> 11 jobs)."""
        self.prefetch(Need(key, (name,)))
        return self.group(key, name) if self.stream(key) is not None else None

    def load_heads_of(self, needs: Sequence[Need]) -> None:
        """The heads and consumers ``needs`` name (they name no ID and no range), in one read (``prefetch``)."""
        assert all(not (n.entry_ids or n.pending_ids or n.entry_scan or n.pending_scan) for n in needs)
        self.prefetch(*needs)

    def _heads_from_files(self, needs: Sequence[Need]) -> bool:
        """Reads the stream, group and consumer rows of ``needs`` from their own files on the driver
        (``head_rows_for``: no Spark job), unless all are known; False where that cannot be done."""
        if all(self._knows_heads(need) for need in needs):
            return True
        if not self.reads_heads_from_files:
            return False
        rows = head_rows_for(self.spark, self.table_path, self.version, needs)
        if rows is None:
            return False
        self._remember(list(needs), [Row(**row) for row in rows], None)
        return True

    def _knows_heads(self, need: Need) -> bool:
        consumer = need.consumer
        return need.key in self._streams and all(
            (need.key, name) in self._groups and (consumer is None or (need.key, name, consumer) in self._consumers)
            for name in need.groups
        )

    def stream(self, key: str) -> StreamMeta | None:
        """The stream's head, or None when the key does not exist."""
        if key not in self._streams:
            self.prefetch(Need(key))
        return self._streams[key]

    def group(self, key: str, name: str) -> GroupMeta | None:
        """The group's head, or None when the key or the group does not exist."""
        if (key, name) not in self._groups:
            self.prefetch(Need(key, (name,)))
        return self._groups[(key, name)]

    def load_heads(self, key: str, groups: Iterable[str] = (), consumer: str | None = None) -> None:
        """Loads the stream head, the named groups' heads and (optionally) one consumer in one query."""
        self.prefetch(Need(key, tuple(groups), consumer))

    def all_streams(self) -> list[StreamMeta]:
        """Every stream head, with every group head remembered too: one query however many there are.

        Collected as Arrow, only the heads' columns: a fleet's 20,000 heads took 0.9-1.1 s as Rows of
        every column, 0.6-0.7 s so (CHANGELOG.md, "Heads read once, as Arrow, pending rows by bucket")."""
        if not self._all_heads_read:
            heads = None
            if self.reads_heads_from_files:  # from the h files on the driver: no Spark job
                heads = every_head_at(self.spark, self.table_path, self.version, HEAD_COLUMNS)
            if heads is None:
                in_head_files = F.col(C.BUCKET).startswith(APART_PREFIX)  # prunes the other buckets' files
                kinds = F.col(C.ROW_KIND).isin(*C.HEAD_KINDS)
                heads = self.frame().where(in_head_files & kinds).select(*HEAD_COLUMNS).toArrow()
            for row in heads.to_pylist():
                self._remember_head(row)
            self._all_heads_read = True
        streams = [meta for meta in self._streams.values() if meta is not None]
        for meta in streams:
            for group in meta.groups:
                self._groups.setdefault((meta.key, group), None)
        return streams

    def adopt_heads(self, other: Snapshot) -> None:
        """Takes every head ``other`` read with ``all_streams``, when it is this table at this version
        (a version's heads never change): a recovery run's round reads the heads its selection read
        only when a commit came between them."""
        same = other.table_path == self.table_path and other.version is not None and other.version == self.version
        if same and other._all_heads_read and not self._all_heads_read:
            self._streams.update(other._streams)
            self._groups.update(other._groups)
            self._all_heads_read = True

    def rows_of_kind(self, partitions: Sequence[str], kind: str) -> Column:
        """``schema.kind_in(partitions, kind)``, or, for more than ``NAMED_PARTITIONS_MAX`` partitions that
        are every partition of their buckets as this snapshot's heads show (``all_streams`` read them),
        their buckets alone: the same rows without an ``IN`` of thousands of partition IDs, which took
        ~1 s to plan per query at 10,000 (CHANGELOG.md, "Heads read once, as Arrow, pending rows by bucket")."""
        if len(partitions) > NAMED_PARTITIONS_MAX and self._all_heads_read:
            streams = [meta for meta in self._streams.values() if meta is not None]
            if kind in (C.KIND_STREAM, C.KIND_ENTRY):
                every = [stream_partition(meta.key) for meta in streams]
            else:
                every = [group_partition(meta.key, group) for meta in streams for group in meta.groups]
            if not shares_buckets(partitions, every, kind):
                return in_buckets(partitions, kinds=[kind]) & (F.col(C.ROW_KIND) == kind)
        return kind_in(partitions, kind)

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
        scan = Scan(low, high, count, reverse)
        self.prefetch(Need(key, entry_scan=scan))
        return [entry_from_row(row) for row in self._scans[(C.KIND_ENTRY, key, None, scan)]]

    def entries_by_id(self, key: str, ids: Iterable[StreamId]) -> dict[StreamId, Entry]:
        """The live entries among ``ids``."""
        wanted = tuple(set(ids))
        if not wanted:
            return {}
        self.prefetch(Need(key, entry_ids=wanted))
        known = self._entries[key]
        return {i: entry for i in wanted if (entry := known.get(i)) is not None}

    def entry_ids(self, key: str, low: StreamId, high: StreamId, count: int | None = None) -> list[StreamId]:
        """IDs of live entries in [low, high], ascending, at most ``count``."""
        if low > high or count == 0:
            return []
        frame = (
            self.rows_of(stream_partition(key), C.KIND_ENTRY, low, high)
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
        frame = self.rows_of(stream_partition(key), C.KIND_ENTRY, low, high).where(id_between(low, high))
        return int(frame.count())

    def nth_entry_id(self, key: str, offset: int) -> StreamId:
        """ID of the live entry at 0-based position ``offset`` in ID order."""
        rows = (
            self.rows_of(stream_partition(key), C.KIND_ENTRY)
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
            self.rows_of(stream_partition(key), C.KIND_ENTRY)
            .select(C.ID_MS, C.ID_SEQ)
            .orderBy(F.col(C.ID_MS).desc(), F.col(C.ID_SEQ).desc())
            .limit(1)
            .collect()
        )
        return stored_id(rows[0]) if rows else None

    # --- consumers and the PEL ----------------------------------------------------------------------

    def consumers(self, key: str, group: str) -> list[ConsumerMeta]:
        """The group's consumers in bytewise name order: read on the driver from their few kept files
        where the snapshot allows, else by a query."""
        partition_id = group_partition(key, group)
        columns = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.CONSUMER, C.SEEN_TIME_MS, C.ACTIVE_TIME_MS, C.PENDING_COUNT)
        query = FileQuery((partition_id,), (C.KIND_CONSUMER,))
        stored = self.stored_rows([query], columns, placement().rows_max(Work.PREFETCH))
        if stored is not None:
            rows: list[Any] = prefetch_rows.rows_of(stored, key, partition_id, C.KIND_CONSUMER).to_pylist()
        else:
            rows = self.rows_of(partition_id, C.KIND_CONSUMER).collect()
        consumers = [consumer_from_row(row) for row in rows]
        return sorted(consumers, key=lambda c: by_bytes(c.name))

    def consumer(self, key: str, group: str, name: str) -> ConsumerMeta | None:
        if (key, group, name) not in self._consumers:
            self.prefetch(Need(key, (group,), consumer=name))
        return self._consumers[(key, group, name)]

    def pending_frame(self, key: str, group: str) -> DataFrame:
        return self.partition(group_partition(key, group), C.KIND_PENDING)

    def pending_frames(self, key: str, groups: Iterable[str]) -> DataFrame:
        """The PEL rows of several groups of one stream, in one scan."""
        return self.partition([group_partition(key, group) for group in groups], C.KIND_PENDING)

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
        scan = Scan(low, high, count, owner=owner, delivered_at_or_before=delivered_at_or_before)
        self.prefetch(Need(key, (group,), pending_scan=scan))
        return [pending_from_row(row) for row in self._scans[(C.KIND_PENDING, key, group, scan)]]

    def idle_pending(self, key: str, group: str, delivered_at_or_before: int, limit: int | None) -> list[PendingEntry]:
        """XREADGROUP CLAIM's idle PEL entries, oldest delivery first (pel_by_time.py)."""
        return pel_by_time.idle_pending(self, key, group, delivered_at_or_before, limit)

    def last_nack_time(self, key: str, group: str) -> int | None:
        """The newest delivery time in the group's NACK zone, None when it is empty (pel_by_time.py)."""
        return pel_by_time.last_nack_time(self, key, group)

    def pending_by_id(self, key: str, group: str, ids: Iterable[StreamId]) -> dict[StreamId, PendingEntry]:
        wanted = tuple(set(ids))
        if not wanted:
            return {}
        self.prefetch(Need(key, (group,), pending_ids=wanted))
        known = self._pending[(key, group)]
        return {i: entry for i in wanted if (entry := known.get(i)) is not None}

    def pending_counts(self, key: str, group: str) -> dict[str, int]:
        """Number of pending entries per owner (owners with none are absent): as the group keeps them,
        else on the driver from the few kept files that may hold them (``pel_summary.owner_counts``),
        else by one aggregation."""
        kept = kept_counts.owner_counts(self, key, group)
        if kept is not None:
            return kept
        on_driver = pel_summary.owner_counts(self, key, group)
        if on_driver is not None:
            return on_driver
        rows = self.rows_of(group_partition(key, group), C.KIND_PENDING).groupBy(C.OWNER).count().collect()
        return {row[C.OWNER]: row["count"] for row in rows if row[C.OWNER] is not None}  # None: XNACKed

    def pending_summary(self, key: str, group: str) -> tuple[int, StreamId | None, StreamId | None, dict[str, int]]:
        """XPENDING's summary: the number of pending entries, the smallest and largest pending ID and the
        count per owner (``pel_summary``). The stream and group heads are read from their own files, or,
        where they cannot be, come in the summary's query; either way they land in the snapshot."""
        need = Need(key, (group,))
        heads = not self._heads_from_files([need])
        kept = None if heads else kept_counts.summary(self, key, group)
        if kept is not None:
            return kept
        summary, head_rows = pel_summary.summarize(self, key, group, heads)
        for row in head_rows:
            self._remember_head(row)
        if heads:
            self._streams.setdefault(key, None)
            self._groups.setdefault((key, group), None)
        return summary

    def group_counts(self, key: str, groups: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(consumers, pending entries) per group: the kept counts with the consumers counted on the
        driver, else on the driver from the few kept files that may hold them
        (``pel_summary.group_counts``), else in one aggregation over the groups' partitions."""
        if not groups:
            return {}
        kept = kept_counts.group_counts(self, key, groups)
        if kept is not None:
            return kept
        on_driver = pel_summary.group_counts(self, key, groups)
        if on_driver is not None:
            return on_driver
        partitions = [group_partition(key, g) for g in groups]
        rows = (
            self.frame_of([FileQuery(tuple(partitions), (C.KIND_CONSUMER, C.KIND_PENDING))])
            .where(in_partitions(partitions) & F.col(C.ROW_KIND).isin(C.KIND_CONSUMER, C.KIND_PENDING))
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
        row = self.rows_of(group_partition(key, group), C.KIND_PENDING).agg(*id_range_aggregates()).collect()[0]
        if row["n"] == 0:
            return 0, None, None
        return row["n"], stored_id(row["lo"]), stored_id(row["hi"])

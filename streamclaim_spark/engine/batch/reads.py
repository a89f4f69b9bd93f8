"""The read side of a batch's state: partitions held in memory, and the table with the batch's writes over it.

A partition (a stream with its entries, or a group with its consumers and PEL) that the batch reads is
**loaded** into driver memory in one query when it holds at most ``load_limit`` rows; every later read of
it, and every write to it, is plain Python. A bigger partition is read through Spark as ``Snapshot``
reads it, from the pinned table with the batch's changed rows laid over it (``frame``). ``BatchReads``
answers every ``Snapshot`` read either way; state.py's ``BatchSnapshot`` plays the batch's writes into it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import ConsumerMeta, Need, PendingEntry, Scan, StreamMeta
from streamclaim_spark.core.partitions import ALL_KINDS, group_partition, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.engine.batch.overlay import in_order, in_range_read, in_scan, overlaid, stored_key, widened
from streamclaim_spark.engine.batch.rows import Key, Owner, Row, bucketed, full_row, row_id, row_key
from streamclaim_spark.state.columns import by_bytes, consumer_from_row, entry_from_row, pending_from_row, stored_id
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.kept_rows import kept_rows_at
from streamclaim_spark.state.logged_table import kept_files_at
from streamclaim_spark.state.prefetch import ScanKey
from streamclaim_spark.state.prefetch_rows import ROW_COLUMNS
from streamclaim_spark.state.schema import STATE_SCHEMA, in_partitions
from streamclaim_spark.state.snapshot import Snapshot

# A partition spread over more kept files than this is not loaded: loading reads every one of its files
# each batch, so a server's batches grew slower with every batch that added a file (a soak's stream:
# 44 -> 114 ms in 35 rounds); its reads take the stored rows they need with the batch's changes laid
# over them instead (overlay.py).
LOAD_FILES_MAX = 16


class BatchReads(Snapshot):
    """A snapshot at ``version`` whose reads show the rows the batch changed (``_changed``)."""

    reads_heads_from_files = False

    def __init__(
        self,
        spark: SparkSession,
        table_path: str,
        version: int | None,
        load_limit: int,
        known_big: Iterable[str] = (),
    ) -> None:
        super().__init__(spark, table_path, version)
        self.load_limit = load_limit
        self._loaded: dict[str, dict[Key, Row]] = {}
        self._loaded_at_start: set[Key] = set()
        # Partitions read through Spark: ``known_big`` (found too big by recent batches, so not probed
        # again) and those this batch finds over ``load_limit`` (``found_big``).
        self._too_big: set[str] = set(known_big)
        self.found_big: set[str] = set()
        self._preload_failed = False
        self._owners: dict[str, Owner] = {}
        self._read: set[str] = set()
        # Every row the batch changed: its identity columns and its current row (None: deleted).
        self._changed: dict[Key, tuple[Row, Row | None]] = {}
        self._overlaid: DataFrame | None = None
        self._stored_mode = False  # a prefetch reading the table as stored, to lay the changes over

    # --- loading ----------------------------------------------------------------------------------

    def _touch(self, key: str, groups: Iterable[str] = (), stream: bool = True) -> list[str]:
        """Records that the batch reads these partitions, loads those small enough; returns them."""
        partitions = [stream_partition(key)] if stream else []
        self._owners.setdefault(stream_partition(key), (key, None))
        for group in groups:
            partition = group_partition(key, group)
            self._owners.setdefault(partition, (key, group))
            partitions.append(partition)
        self._read.update(partitions)
        missing = [p for p in partitions if p not in self._loaded and p not in self._too_big]
        if missing and self.load_limit == 0:
            self._too_big.update(missing)  # nothing is loaded: every read goes through Spark
        elif missing:
            self._load(missing)
        return partitions

    def preload(self, touched: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Loads, in one query, the partitions of these streams and groups when together they fit.

        ``commands.touched`` says which partitions a batch's commands will read. When together they hold
        more than ``load_limit`` rows, each partition is probed when first read, as without a preload.
        """
        partitions: list[str] = []
        for key, groups in touched:
            self._owners.setdefault(stream_partition(key), (key, None))
            partitions.append(stream_partition(key))
            for group in groups:
                self._owners.setdefault(group_partition(key, group), (key, group))
                partitions.append(group_partition(key, group))
        missing = sorted({p for p in partitions if p not in self._loaded and p not in self._too_big})
        if len(missing) < 2 or self.load_limit == 0:
            return  # one partition: loading it when first read costs the same query
        rows = self._probe(missing)
        if rows is not None and len(rows) <= self.load_limit:
            self._keep(missing, rows)
        else:
            self._preload_failed = True  # some are big: probe each alone when first read

    def _in_memory(self, partitions: Sequence[str]) -> bool:
        return all(p in self._loaded for p in partitions)

    def _load(self, partitions: Sequence[str]) -> None:
        """One query for the partitions' rows; a partition over ``load_limit`` rows stays in Spark."""
        if len(partitions) > 1 and self._preload_failed:
            for partition in partitions:
                self._load([partition])
            return
        rows = self._probe(partitions)
        if rows is None or len(rows) > self.load_limit:
            if len(partitions) == 1:
                self._too_big.add(partitions[0])
                self.found_big.add(partitions[0])
            else:
                for partition in partitions:
                    self._load([partition])
            return
        self._keep(partitions, rows)

    def _probe(self, partitions: Sequence[str]) -> list[dict[str, Any]] | None:
        """The partitions' rows at the pinned version, at most ``load_limit + 1`` (more: too big to load);
        None when they lie in more than ``LOAD_FILES_MAX`` kept files each, or their files' statistics
        count more than ``load_limit`` rows (too many to load, known without reading them).

        Read on the driver from the kept files that may hold them when those are few (``kept_rows_at``):
        the Spark query it replaces was a job of its own, ~0.1 s of a pipeline's batch; else by Spark.
        """
        queries = [FileQuery(tuple(partitions), ALL_KINDS)]
        files = kept_files_at(self.spark, self.table_path, self.version, queries)
        if files is not None and (
            len(files) > LOAD_FILES_MAX * len(partitions)
            or sum(file.bounds.rows if file.bounds else self.load_limit for file in files) > self.load_limit
        ):
            return None  # the files' statistics count their bucket's other partitions too: an upper bound
        stored = kept_rows_at(
            self.spark, self.table_path, self.version, queries, ROW_COLUMNS, placement().rows_max(Work.PREFETCH)
        )
        if stored is not None:
            chosen = stored.filter(pc.is_in(stored[C.PARTITION_ID], value_set=pa.array(sorted(partitions))))
            kept: list[dict[str, Any]] = chosen.slice(0, self.load_limit + 1).to_pylist()
            return kept
        rows = self.stored_frame_of(queries).where(in_partitions(partitions)).limit(self.load_limit + 1).collect()
        return [row.asDict(recursive=True) for row in rows]

    def _keep(self, partitions: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
        """Holds ``rows``, all the rows of ``partitions``, in memory, with the batch's changes over them."""
        for partition in partitions:
            self._loaded[partition] = {}
        for stored_row in rows:
            row = full_row(stored_row)
            self._loaded[row[C.PARTITION_ID]][row_key(row)] = row
            self._loaded_at_start.add(row_key(row))
        # Rows the batch changed before it read the partition (e.g. through a bigger read) win.
        for key, (identity, changed) in self._changed.items():
            partition = identity[C.PARTITION_ID]
            if partition in partitions:
                self._store(partition, key, changed)

    def _store(self, partition: str, key: Key, row: Row | None) -> None:
        rows = self._loaded[partition]
        if row is None:
            rows.pop(key, None)
        else:
            rows[key] = row

    def _rows(self, partition: str, kind: str) -> Iterator[Row]:
        return (row for row in self._loaded[partition].values() if row[C.ROW_KIND] == kind)

    def _head(self, partition: str) -> Row | None:
        # schema.stream_partition / group_partition: "s" or "g" and a digest.
        kind = C.KIND_STREAM if partition.startswith("s") else C.KIND_GROUP
        return self._loaded[partition].get((partition, kind, None, None, None))

    # --- the table with the batch's writes over it ------------------------------------------------

    def reads_stored_rows(self) -> bool:
        return self._stored_mode or not self._changed

    def frame(self) -> DataFrame:
        """The pinned table with every row the batch changed replaced (or removed); as stored inside
        ``_prefetch_stored``."""
        base = super().frame()
        if self._stored_mode or not self._changed:
            return base
        if self._overlaid is None:
            keys = json_frame(self.spark, [dict(identity) for identity, _ in self._changed.values()], STATE_SCHEMA)
            on = [base[c].eqNullSafe(keys[c]) for c in C.KEY_COLUMNS]
            kept = base.join(keys.select(*C.KEY_COLUMNS), on=on, how="left_anti")
            live = [bucketed(row) for _, row in self._changed.values() if row is not None]
            self._overlaid = kept.unionByName(json_frame(self.spark, live, STATE_SCHEMA)) if live else kept
        return self._overlaid

    def partition(self, partition_id: str | Sequence[str], kind: str) -> DataFrame:
        loaded = self._loaded_rows(partition_id, kind)
        return loaded if loaded is not None else super().partition(partition_id, kind)

    def rows_of(
        self, partition_id: str | Sequence[str], kind: str, low: StreamId | None = None, high: StreamId | None = None
    ) -> DataFrame:
        loaded = self._loaded_rows(partition_id, kind)
        return loaded if loaded is not None else super().rows_of(partition_id, kind, low, high)

    def _loaded_rows(self, partition_id: str | Sequence[str], kind: str) -> DataFrame | None:
        """The rows of ``kind`` in partitions the batch holds in memory (its writes included), as a frame;
        None when one of them is not loaded."""
        wanted = [partition_id] if isinstance(partition_id, str) else list(partition_id)
        if wanted and self._in_memory(wanted):
            rows = [bucketed(row) for p in wanted for row in self._rows(p, kind)]
            return json_frame(self.spark, rows, STATE_SCHEMA)
        return None

    # --- reads --------------------------------------------------------------------------------------

    def prefetch(self, *needs: Need) -> None:
        rest = []
        for need in needs:
            partitions = self._touch(need.key, need.groups)
            if self._in_memory(partitions):
                self._answer(need)
            else:
                rest.append(need)
        if rest:
            self._prefetch_stored(rest)

    def _prefetch_stored(self, needs: Sequence[Need]) -> None:
        """The needs of partitions not in memory: the table as stored read for them (heads from their
        files, the rest on the driver where the kept files allow), the batch's changes laid over
        (overlay.py). Through the overlaid ``frame()`` every read after a write was a Spark job."""
        changed: dict[tuple[str, str], list[Key]] = {}
        for key in self._changed:
            changed.setdefault((key[0], key[1]), []).append(key)
        wide_needs, scans = widened(needs, changed)
        self._stored_mode = self.reads_heads_from_files = True
        try:
            super().prefetch(*wide_needs)
        finally:
            self._stored_mode = self.reads_heads_from_files = False
        for read in scans:
            stored = self._scans[(read.kind, read.key, read.group, read.stored)]
            now = {key: self._changed[key][1] for key in changed.get((read.partition, read.kind), ())}
            self._scans[(read.kind, read.key, read.group, read.scan)] = overlaid(stored, now, read.scan)

    def _remember(self, needs: Sequence[Need], rows: Sequence[Any], scan_key: ScanKey | None) -> None:
        # A stored row the batch changed is not the batch's row: its current version is known already.
        if self._changed:
            rows = [row for row in rows if in_range_read(row, scan_key) or stored_key(row) not in self._changed]
        super()._remember(needs, rows, scan_key)

    def _answer(self, need: Need) -> None:
        """Fills the snapshot's caches for ``need`` from memory, as a prefetch query would."""
        key = need.key
        stream_part = stream_partition(key)
        head = self._head(stream_part)
        self._streams[key] = None
        if head is not None:
            self._remember_head(head)
        entries = self._entries.setdefault(key, {})
        for entry_id in need.entry_ids:
            found = self._loaded[stream_part].get((stream_part, C.KIND_ENTRY, *entry_id.stored(), None))
            entries[entry_id] = None if found is None else entry_from_row(found)
        if need.entry_scan is not None:
            scan = need.entry_scan
            self._scans[(C.KIND_ENTRY, key, None, scan)] = self._scan(stream_part, C.KIND_ENTRY, scan)
        for group in need.groups:
            part = group_partition(key, group)
            group_head = self._head(part)
            self._groups[(key, group)] = None
            if group_head is not None:
                self._remember_head(group_head)
            if need.consumer is not None:
                found = self._loaded[part].get((part, C.KIND_CONSUMER, None, None, need.consumer))
                self._consumers[(key, group, need.consumer)] = None if found is None else consumer_from_row(found)
            known = self._pending.setdefault((key, group), {})
            for entry_id in need.pending_ids:
                found = self._loaded[part].get((part, C.KIND_PENDING, *entry_id.stored(), None))
                known[entry_id] = None if found is None else pending_from_row(found)
        if need.pending_scan is not None:
            group = need.groups[0]
            scan = need.pending_scan
            rows = self._scan(group_partition(key, group), C.KIND_PENDING, scan)
            self._scans[(C.KIND_PENDING, key, group, scan)] = rows

    def _scan(self, partition: str, kind: str, scan: Scan) -> list[Any]:
        if scan.limit == 0 or scan.low > scan.high:
            return []
        return in_order((row for row in self._rows(partition, kind) if in_scan(row, scan)), scan)

    def all_streams(self) -> list[StreamMeta]:
        # Every head of the table: one query over the overlaid table, and every partition counts as read.
        streams = super().all_streams()
        for meta in streams:
            self._read.add(stream_partition(meta.key))
            self._owners.setdefault(stream_partition(meta.key), (meta.key, None))
        return streams

    def entry_ids(self, key: str, low: StreamId, high: StreamId, count: int | None = None) -> list[StreamId]:
        part = self._touch(key)
        if not self._in_memory(part):
            return super().entry_ids(key, low, high, count)
        return [stored_id(row) for row in self._scan(part[0], C.KIND_ENTRY, Scan(low, high, count))]

    def count_entries(self, key: str, low: StreamId, high: StreamId) -> int:
        part = self._touch(key)
        if not self._in_memory(part):
            return super().count_entries(key, low, high)
        return len(self._scan(part[0], C.KIND_ENTRY, Scan(low, high)))

    def nth_entry_id(self, key: str, offset: int) -> StreamId:
        part = self._touch(key)
        if not self._in_memory(part):
            return super().nth_entry_id(key, offset)
        return stored_id(sorted(self._rows(part[0], C.KIND_ENTRY), key=row_id)[offset])

    def last_entry_id(self, key: str) -> StreamId | None:
        part = self._touch(key)
        if not self._in_memory(part):
            return super().last_entry_id(key)
        newest = max(self._rows(part[0], C.KIND_ENTRY), key=row_id, default=None)
        return None if newest is None else stored_id(newest)

    def consumers(self, key: str, group: str) -> list[ConsumerMeta]:
        part = self._touch(key, (group,), stream=False)
        if not self._in_memory(part):
            return super().consumers(key, group)
        return sorted(
            (consumer_from_row(row) for row in self._rows(part[0], C.KIND_CONSUMER)), key=lambda c: by_bytes(c.name)
        )

    def _pel(self, key: str, group: str) -> list[PendingEntry] | None:
        """The group's PEL from memory, None when the group's partition lives in Spark."""
        part = self._touch(key, (group,), stream=False)
        if not self._in_memory(part):
            return None
        return [pending_from_row(row) for row in self._rows(part[0], C.KIND_PENDING)]

    def idle_pending(self, key: str, group: str, delivered_at_or_before: int, limit: int | None) -> list[PendingEntry]:
        pel = self._pel(key, group)
        if pel is None:
            return super().idle_pending(key, group, delivered_at_or_before, limit)
        idle = [p for p in pel if p.delivery_time <= delivered_at_or_before]
        idle.sort(key=lambda p: (p.delivery_time, p.id))
        return idle if limit is None else idle[:limit]

    def last_nack_time(self, key: str, group: str) -> int | None:
        pel = self._pel(key, group)
        if pel is None:
            return super().last_nack_time(key, group)
        return max((p.delivery_time for p in pel if p.delivery_time < 0), default=None)

    def pending_counts(self, key: str, group: str) -> dict[str, int]:
        pel = self._pel(key, group)
        if pel is None:
            return super().pending_counts(key, group)
        counts: dict[str, int] = {}
        for pending in pel:
            if pending.owner is not None:
                counts[pending.owner] = counts.get(pending.owner, 0) + 1
        return counts

    def pending_summary(self, key: str, group: str) -> tuple[int, StreamId | None, StreamId | None, dict[str, int]]:
        self.prefetch(Need(key, (group,)))
        pel = self._pel(key, group)
        if pel is None:
            return super().pending_summary(key, group)
        total, lowest, highest = pel_bounds(pel)
        return total, lowest, highest, self.pending_counts(key, group)

    def pending_bounds(self, key: str, group: str) -> tuple[int, StreamId | None, StreamId | None]:
        pel = self._pel(key, group)
        return super().pending_bounds(key, group) if pel is None else pel_bounds(pel)

    def group_counts(self, key: str, groups: Sequence[str]) -> dict[str, tuple[int, int]]:
        partitions = self._touch(key, groups, stream=False)
        if not self._in_memory(partitions):
            return super().group_counts(key, groups)
        return {
            g: (sum(1 for _ in self._rows(p, C.KIND_CONSUMER)), sum(1 for _ in self._rows(p, C.KIND_PENDING)))
            for g, p in zip(groups, partitions, strict=True)
        }


def pel_bounds(pel: list[PendingEntry]) -> tuple[int, StreamId | None, StreamId | None]:
    """Count, smallest and largest ID of a PEL held in memory (XPENDING's summary)."""
    if not pel:
        return 0, None, None
    ids = [p.id for p in pel]
    return len(pel), min(ids), max(ids)

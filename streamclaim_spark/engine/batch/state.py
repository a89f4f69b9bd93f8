"""The state a batch of commands runs on: one snapshot plus the batch's own writes so far.

A batch (batch/__init__.py) runs many commands on one Delta version and commits them together, so each command
must see the writes of the commands before it, as Redis runs them one after another. ``BatchSnapshot``
is a ``Snapshot`` that gives exactly that view:

* A partition (a stream with its entries, or a group with its consumers and PEL) that the batch reads is
  **loaded** into driver memory in one query when it holds at most ``load_limit`` rows; every later read
  of it, and every write to it, is plain Python. A batch of a hundred commands on one stream and group
  costs two reads of the table, however many commands read.
* A bigger partition is read through Spark as ``Snapshot`` reads it, from the pinned table with the
  batch's changed rows laid over it (``frame``): correct at any size, a query per read.

``apply`` plays a command's plan forward the way the commit's MERGE would (last write to a key wins,
a claim applies only to an idle row, a FORCE claim may insert); ``plan`` returns what the whole batch
commits: every changed row once, guarded on the head versions the batch started from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import (
    ConsumerMeta,
    Need,
    PendingEntry,
    Plan,
    Scan,
    StreamMeta,
    Write,
    group_head_row,
    pending_row,
    stream_head_row,
)
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.batch.rows import (
    IDENTITY,
    BatchPlanError,
    Key,
    Owner,
    Row,
    bucketed,
    claimed_row,
    consumer_of,
    frame_deletes,
    full_row,
    pel_bounds,
    row_id,
    row_key,
    stored_pair,
)
from streamclaim_spark.state.columns import by_bytes, entry_from_row, pending_from_row, stored_id
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.schema import STATE_SCHEMA, in_partitions
from streamclaim_spark.state.snapshot import Snapshot

# Rows of one partition the batch reads into memory; bigger partitions are read through Spark.
DEFAULT_LOAD_LIMIT = 10_000


class BatchSnapshot(Snapshot):
    """A snapshot at ``version`` that also shows the writes ``apply`` has played into it."""

    def __init__(
        self,
        spark: SparkSession,
        table_path: str,
        version: int | None,
        load_limit: int = DEFAULT_LOAD_LIMIT,
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
        self._guards: dict[Key, int | None] = {}
        self._overlaid: DataFrame | None = None

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
        """Loads, in one query, the partitions of these streams and groups when together they fit in
        ``load_limit`` rows (commands.touched says which a batch's commands will read); otherwise each
        partition is probed when first read, as without it."""
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
        if len(rows) <= self.load_limit:
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
        if len(rows) > self.load_limit:
            if len(partitions) == 1:
                self._too_big.add(partitions[0])
                self.found_big.add(partitions[0])
            else:
                for partition in partitions:
                    self._load([partition])
            return
        self._keep(partitions, rows)

    def _probe(self, partitions: Sequence[str]) -> list[Any]:
        """The partitions' rows at the pinned version, at most ``load_limit + 1`` (more: too big to load)."""
        return super().frame().where(in_partitions(partitions)).limit(self.load_limit + 1).collect()

    def _keep(self, partitions: Sequence[str], rows: Sequence[Any]) -> None:
        """Holds ``rows``, all the rows of ``partitions``, in memory, with the batch's changes over them."""
        for partition in partitions:
            self._loaded[partition] = {}
        for spark_row in rows:
            row = full_row(spark_row.asDict(recursive=True))
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

    def frame(self) -> DataFrame:
        """The pinned table with every row the batch changed replaced (or removed)."""
        base = super().frame()
        if not self._changed:
            return base
        if self._overlaid is None:
            keys = json_frame(self.spark, [dict(identity) for identity, _ in self._changed.values()], STATE_SCHEMA)
            on = [base[c].eqNullSafe(keys[c]) for c in C.KEY_COLUMNS]
            kept = base.join(keys.select(*C.KEY_COLUMNS), on=on, how="left_anti")
            live = [bucketed(row) for _, row in self._changed.values() if row is not None]
            self._overlaid = kept.unionByName(json_frame(self.spark, live, STATE_SCHEMA)) if live else kept
        return self._overlaid

    def partition(self, partition_id: str | Sequence[str], kind: str) -> DataFrame:
        wanted = [partition_id] if isinstance(partition_id, str) else list(partition_id)
        if wanted and self._in_memory(wanted):
            rows = [bucketed(row) for p in wanted for row in self._rows(p, kind)]
            return json_frame(self.spark, rows, STATE_SCHEMA)
        return super().partition(partition_id, kind)

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
            super().prefetch(*rest)

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
            found = self._loaded[stream_part].get((stream_part, C.KIND_ENTRY, *stored_pair(entry_id), None))
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
                self._consumers[(key, group, need.consumer)] = None if found is None else consumer_of(found)
            known = self._pending.setdefault((key, group), {})
            for entry_id in need.pending_ids:
                found = self._loaded[part].get((part, C.KIND_PENDING, *stored_pair(entry_id), None))
                known[entry_id] = None if found is None else pending_from_row(found)
        if need.pending_scan is not None:
            group = need.groups[0]
            scan = need.pending_scan
            rows = self._scan(group_partition(key, group), C.KIND_PENDING, scan)
            self._scans[(C.KIND_PENDING, key, group, scan)] = rows

    def _scan(self, partition: str, kind: str, scan: Scan) -> list[Any]:
        if scan.limit == 0 or scan.low > scan.high:
            return []
        low, high = stored_pair(scan.low), stored_pair(scan.high)
        rows = [
            row
            for row in self._rows(partition, kind)
            if low <= row_id(row) <= high
            and (scan.owner is None or row[C.OWNER] == scan.owner)
            and (scan.delivered_at_or_before is None or row[C.DELIVERY_TIME_MS] <= scan.delivered_at_or_before)
        ]
        rows.sort(key=row_id, reverse=scan.reverse)
        return rows if scan.limit is None else rows[: scan.limit]

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
            (consumer_of(row) for row in self._rows(part[0], C.KIND_CONSUMER)), key=lambda c: by_bytes(c.name)
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

    # --- writes -------------------------------------------------------------------------------------

    def apply(self, plan: Plan) -> None:
        """Plays one command's plan into the batch, as its commit would change the table."""
        if plan.update is not None:
            raise BatchPlanError("a bulk in-place update cannot run inside a batch of commands")
        writes = list(plan.writes)
        for frame in plan.frames:
            writes.extend(frame_deletes(frame))
        self._read_claimed_rows(writes)
        for write in writes:
            self._apply(write)
        if writes:
            self._scans.clear()
            self._overlaid = None

    def _read_claimed_rows(self, writes: Sequence[Write]) -> None:
        """Reads, in one query per group, the PEL rows that claims in a partition not held in memory
        apply to and that no point lookup has read yet (a scan, e.g. XAUTOCLAIM's, leaves them uncached)."""
        missing: dict[tuple[str, str], set[StreamId]] = {}
        for write in writes:
            if write.claim is None or write.partition in self._loaded or write.key() in self._changed:
                continue
            stream, group = write.row[C.STREAM], write.row[C.GROUP]
            entry_id = stored_id(write.row)
            if entry_id not in self._pending.get((stream, group), {}):
                missing.setdefault((stream, group), set()).add(entry_id)
        for (stream, group), ids in missing.items():
            self.prefetch(Need(stream, (group,), pending_ids=tuple(sorted(ids))))

    def _apply(self, write: Write) -> None:
        key = write.key()
        identity = {column: write.row.get(column) for column in IDENTITY}
        partition = write.partition
        if write.guard and key not in self._guards:
            self._guards[key] = write.expect_version
        if write.claim is None:
            row = None if write.delete else full_row(write.row)
        else:
            row = claimed_row(self._current(key, identity), write)
        self._changed[key] = (identity, row)
        if partition in self._loaded:
            self._store(partition, key, row)
        self._remember_write(identity, row)

    def _current(self, key: Key, identity: Row) -> Row | None:
        """A row's state in the batch: memory, the batch's changes, or the PEL entry the command read."""
        partition = identity[C.PARTITION_ID]
        if partition in self._loaded:
            return self._loaded[partition].get(key)
        if key in self._changed:
            return self._changed[key][1]
        stream, group = identity[C.STREAM], identity[C.GROUP]
        entry_id = stored_id(identity)
        known = self._pending.get((stream, group), {})
        # _read_claimed_rows read every claimed row; a lookup here is only a fallback.
        pending = known[entry_id] if entry_id in known else self.pending_by_id(stream, group, [entry_id]).get(entry_id)
        return None if pending is None else full_row(pending_row(stream, group, pending, ""))

    def _remember_write(self, identity: Row, row: Row | None) -> None:
        """Keeps the snapshot's caches equal to the batch's state for the written row."""
        kind, stream, group = identity[C.ROW_KIND], identity[C.STREAM], identity[C.GROUP]
        if kind == C.KIND_STREAM:
            self._streams[stream] = None
        elif kind == C.KIND_GROUP:
            self._groups[(stream, group)] = None
        elif kind == C.KIND_CONSUMER:
            consumer = identity[C.CONSUMER]
            self._consumers[(stream, group, consumer)] = None if row is None else consumer_of(row)
        elif kind == C.KIND_ENTRY:
            self._entries.setdefault(stream, {})[stored_id(identity)] = None if row is None else entry_from_row(row)
        else:
            pending = None if row is None else pending_from_row(row)
            self._pending.setdefault((stream, group), {})[stored_id(identity)] = pending
        if row is not None and kind in C.HEAD_KINDS:
            self._remember_head(row)

    def guard_stream_heads(self, keys: Iterable[str]) -> None:
        """Makes the commit depend on these streams' heads as read now (WATCH), written or not."""
        for key in keys:
            self.stream(key)
            self._read.add(stream_partition(key))
            self._owners.setdefault(stream_partition(key), (key, None))

    # --- the commit ---------------------------------------------------------------------------------

    def plan(self, txn: str, guard_reads: bool = True) -> Plan:
        """Every row the batch changed, once, guarded on the versions the batch started from; and,
        with ``guard_reads``, when it changes anything, a guard on each head it only read (the later
        commands' replies and writes depend on them; a batch of one command guards what it decided
        on itself, as a command outside a batch does)."""
        plan = Plan()
        for key, (identity, row) in self._changed.items():
            guarded = key in self._guards
            expect = self._guards.get(key)
            if row is None:
                if identity[C.PARTITION_ID] in self._loaded and key not in self._loaded_at_start:
                    continue  # created and deleted again within the batch: its partition counts as read
                plan.add(Write(identity, delete=True, guard=guarded, expect_version=expect))
                continue
            if guarded and expect is not None and row[C.VERSION] <= expect:
                # A head deleted and created again: its version must still move past the one guarded on.
                row = {**row, C.VERSION: expect + 1}
            plan.add(Write({**row, C.TXN: txn}, guard=guarded, expect_version=expect))
        if plan.empty or not guard_reads:
            return plan  # empty: no commit, and the replies hold at the snapshot's version
        for partition in sorted(self._read - plan.partitions):
            guard = self._read_guard(partition, txn)
            if guard is not None:
                plan.add(guard)
        return plan

    def _read_guard(self, partition: str, txn: str) -> Write | None:
        """The head of a partition the batch read as it was: rewritten unchanged, guarded on its version."""
        stream, group = self._owners[partition]
        if partition in self._loaded:
            head = self._head(partition)
            if head is not None:
                return Write(head, guard=True, expect_version=head[C.VERSION])
        elif group is None and self._streams.get(stream) is not None:
            meta = self._streams[stream]
            assert meta is not None
            row = stream_head_row(replace(meta, version=meta.version - 1), txn)
            return Write(row, guard=True, expect_version=meta.version)
        elif group is not None and self._groups.get((stream, group)) is not None:
            group_meta = self._groups[(stream, group)]
            assert group_meta is not None
            row = group_head_row(replace(group_meta, version=group_meta.version - 1), txn)
            return Write(row, guard=True, expect_version=group_meta.version)
        else:
            return None
        # Absent when read: it must still be absent (a delete that matches nothing unless it appeared).
        kind = C.KIND_STREAM if group is None else C.KIND_GROUP
        identity = {C.PARTITION_ID: partition, C.ROW_KIND: kind, C.STREAM: stream, C.GROUP: group}
        return Write(identity, delete=True, guard=True, expect_version=None)

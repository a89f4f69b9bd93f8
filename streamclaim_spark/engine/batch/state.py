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

from collections.abc import Iterable, Sequence
from dataclasses import replace

from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import (
    Need,
    Write,
    group_head_row,
    pending_row,
    stream_head_row,
)
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.core.plan import Plan
from streamclaim_spark.engine.batch.reads import BatchReads
from streamclaim_spark.engine.batch.rows import IDENTITY, Key, Row, claimed_row, frame_deletes, full_row
from streamclaim_spark.errors import BatchPlanError
from streamclaim_spark.state.columns import consumer_from_row, entry_from_row, pending_from_row, stored_id

# Rows of one partition the batch reads into memory; bigger partitions are read through Spark.
DEFAULT_LOAD_LIMIT = 10_000


class BatchSnapshot(BatchReads):
    """A snapshot at ``version`` that also shows the writes ``apply`` has played into it."""

    def __init__(
        self,
        spark: SparkSession,
        table_path: str,
        version: int | None,
        load_limit: int = DEFAULT_LOAD_LIMIT,
        known_big: Iterable[str] = (),
    ) -> None:
        super().__init__(spark, table_path, version, load_limit, known_big)
        self._guards: dict[Key, int | None] = {}

    # --- writes -------------------------------------------------------------------------------------

    def apply(self, plan: Plan) -> None:
        """Plays one command's plan into the batch, as its commit would change the table."""
        if plan.update is not None or plan.appends or plan.removals or plan.rewrites:
            raise BatchPlanError("a bulk append, removal or in-place update cannot run inside a batch of commands")
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
        """Reads the PEL rows the claims apply to, in one query per group.

        Only rows of partitions not held in memory that no point lookup has read yet: a scan (e.g.
        XAUTOCLAIM's) leaves them uncached.
        """
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
            self._consumers[(stream, group, consumer)] = None if row is None else consumer_from_row(row)
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
        """Every row the batch changed, once, guarded on the versions the batch started from.

        With ``guard_reads``, a batch that changes anything also guards each head it only read: the later
        commands' replies and writes depend on them. (A batch of one command guards what it decided on
        itself, as a command outside a batch does.)
        """
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

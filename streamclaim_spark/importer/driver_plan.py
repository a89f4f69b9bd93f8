"""The import's changes decided on the driver, committed as files: no MERGE where nothing goes whole.

The MERGE (commit.py) joins every staged row with the stored ones, then rewrites what it matched: an
unchanged re-run of a 1M-entry stream with a 100,000-row PEL spent ~12 s of its ~16 s there, to update
two heads (CHANGELOG.md, "The import's re-run as a commit of files"). Most imports keep every
stream, group and consumer: each stream is new to the store, or read after the store's last ID (mode
"append"), with the live IDs before it when Redis deleted or trimmed some ("diff"). Those are decided
here. The stored PEL and consumer rows of the copied groups, and the stored entry IDs of diffed
streams, are read on the driver from their kept files and compared with the staged ones by pyarrow;
the plan then gets the new entries and the new or changed PEL rows as rows appended (new by
construction: a changed PEL row's stored one is removed in the same commit), the stored PEL rows Redis
no longer has or has changed, and the stored entries it no longer has, as removals by ID, and the new
or changed consumers as row writes. Anything else (a stream recreated or removed, a group or consumer
gone, more rows than the driver holds, Spark Connect) goes by MERGE as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.model import ConsumerMeta, StreamMeta, Write, consumer_row
from streamclaim_spark.core.named_ids import NamedIds
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.engine.context import Context
from streamclaim_spark.importer.live_range import gone_on_driver, live_bounds
from streamclaim_spark.importer.redis_reader import StreamCopy
from streamclaim_spark.importer.staging import ENTRIES, LIVE_IDS, PENDING, Staging
from streamclaim_spark.state.arrow_schema import arrow_schema_of
from streamclaim_spark.state.delta_txn import commits_files

_PEL_VALUES = (C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT)
_PEL_KEYS = _ID_KEYS = (C.PARTITION_ID, C.ID_MS, C.ID_SEQ)
_CONSUMER_COLUMNS = (C.PARTITION_ID, C.CONSUMER, C.SEEN_TIME_MS, C.ACTIVE_TIME_MS)


@dataclass
class DriverChanges:
    """What the import adds, removes and rewrites, decided on the driver; counts as the summary gives them."""

    entries: pa.Table | None = None
    pending: pa.Table | None = None
    removed_pending: pa.Table | None = None
    removed_entries: pa.Table | None = None
    consumers: list[Write] = field(default_factory=list)
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def empty(self) -> bool:
        """True when the import changes no entry, PEL or consumer row."""
        rows = (self.entries, self.pending, self.removed_pending, self.removed_entries)
        return all(table is None for table in rows) and not self.consumers


def driver_changes(
    ctx: Context,
    copies: Sequence[StreamCopy],
    stored: dict[str, StreamMeta | None],
    removed: Sequence[str],
    staging: Staging,
) -> DriverChanges | None:
    """The import's row changes besides the heads, or None when it must commit by MERGE (module docstring)."""
    snapshot = ctx.snapshot
    if removed or not commits_files(snapshot.spark) or not all(_keeps_all(c, stored) for c in copies):
        return None
    rows = sum(staging.rows.values())
    if not placement().on_driver(Work.IMPORT, classic=True, rows=rows, stored_bytes=staging.payload_bytes):
        return None
    known = {group_partition(k, g): k for k, meta in stored.items() if meta is not None for g in meta.groups}
    stored_pel = _stored(ctx, known, C.KIND_PENDING, (*_PEL_KEYS, *_PEL_VALUES))
    stored_consumers = _stored(ctx, known, C.KIND_CONSUMER, _CONSUMER_COLUMNS)
    if stored_pel is None or stored_consumers is None:
        return None
    consumers = _consumer_writes(ctx, copies, stored_consumers)
    if consumers is None:
        return None
    changes = DriverChanges(consumers=consumers[0])
    changes.inserted, changes.updated = consumers[1], consumers[2]
    entries = staging.table(ENTRIES)
    if entries.num_rows:
        changes.entries = _entry_rows(entries, ctx.txn)
        changes.inserted += entries.num_rows
    staged_pel = staging.table(PENDING).select([*_PEL_KEYS, C.STREAM, C.GROUP, *_PEL_VALUES])
    _compare_pending(changes, staged_pel, stored_pel, ctx.txn)
    diffed = {stream_partition(copy.meta.key): copy.meta.key for copy in copies if copy.mode == "diff"}
    if diffed:
        stored_ids = _stored(ctx, diffed, C.KIND_ENTRY, _ID_KEYS)
        if stored_ids is None:
            return None
        gone = gone_on_driver(stored_ids, staging.table(LIVE_IDS), live_bounds(copies))
        changes.removed_entries = gone if gone.num_rows else None
        changes.deleted += gone.num_rows
    return changes


def add_to_plan(ctx: Context, changes: DriverChanges) -> None:
    """Adds ``changes`` to the plan: consumers written, entries and PEL rows appended, stored PEL rows removed."""
    for write in changes.consumers:
        ctx.plan.add(write)
    if changes.entries is not None:
        partitions = pc.unique(changes.entries[C.PARTITION_ID]).to_pylist()
        ctx.plan.add_append(changes.entries, *partitions)
    if changes.pending is not None:
        partitions = pc.unique(changes.pending[C.PARTITION_ID]).to_pylist()
        ctx.plan.add_append(changes.pending, *partitions)
    if changes.removed_pending is not None:
        ctx.plan.add_removal(_removal(ctx, changes.removed_pending, C.KIND_PENDING))
    if changes.removed_entries is not None:
        ctx.plan.add_removal(_removal(ctx, changes.removed_entries, C.KIND_ENTRY))


def _keeps_all(copy: StreamCopy, stored: dict[str, StreamMeta | None]) -> bool:
    """True when the copy keeps what the store has of its stream: a new stream, or one read after the
    store's last ID (with its live IDs before it, "diff") with every stored group still in Redis."""
    before = stored.get(copy.meta.key)
    if before is None:
        return copy.mode == "full"
    return copy.mode in ("append", "diff") and set(before.groups) <= {group.name for group in copy.groups}


def _stored(ctx: Context, partitions: dict[str, str], kind: str, columns: Sequence[str]) -> pa.Table | None:
    """``columns`` of the stored rows of ``kind`` in ``partitions`` (partition to stream), read on the
    driver from the kept files; None where they cannot be (too many rows, Connect, a deletion vector)."""
    if not partitions:
        return arrow_schema_of(columns).empty_table()
    query = FileQuery(tuple(sorted(partitions)), (kind,))
    read = (*columns, C.ROW_KIND, C.STREAM)
    rows = ctx.snapshot.stored_rows([query], tuple(dict.fromkeys(read)), placement().rows_max(Work.DECIDE))
    if rows is None:
        return None
    wanted = pa.table({C.PARTITION_ID: list(partitions), C.STREAM: list(partitions.values())})
    mine = rows.filter(pc.equal(rows[C.ROW_KIND], kind)).join(wanted, [C.PARTITION_ID, C.STREAM], join_type="left semi")
    return mine.select(list(columns))


def _consumer_writes(
    ctx: Context, copies: Sequence[StreamCopy], stored: pa.Table
) -> tuple[list[Write], int, int] | None:
    """Row writes of the copied consumers that are new or changed, with how many are new and changed;
    None when a stored consumer is not in Redis any more (its rows would be deleted: a MERGE's work)."""
    kept = {
        (partition, name): (seen, active)
        for partition, name, seen, active in zip(
            *(stored[column].to_pylist() for column in stored.column_names), strict=True
        )
    }
    copied = set()
    writes: list[Write] = []
    new = changed = 0
    for copy in copies:
        for group in copy.groups:
            partition = group_partition(copy.meta.key, group.name)
            for consumer in group.consumers:
                copied.add((partition, consumer.name))
                before = kept.get((partition, consumer.name))
                if before == (consumer.seen_time, consumer.active_time):
                    continue
                meta = ConsumerMeta(consumer.name, consumer.seen_time, consumer.active_time)
                writes.append(Write(consumer_row(copy.meta.key, group.name, meta, ctx.txn)))
                new, changed = (new + 1, changed) if before is None else (new, changed + 1)
    if set(kept) - copied:
        return None
    return writes, new, changed


def _compare_pending(changes: DriverChanges, staged: pa.Table, stored: pa.Table, txn: str) -> None:
    """Sets the PEL rows to append (staged rows the store lacks or has with other values) and to remove
    (stored rows Redis lacks or has with other values), and counts them."""
    marked_staged = staged.append_column("_staged", pa.repeat(pa.scalar(True), staged.num_rows))
    names = [f"_stored_{name}" if name in _PEL_VALUES else name for name in stored.column_names]
    renamed = stored.rename_columns(names)
    marked_stored = renamed.append_column("_stored", pa.repeat(pa.scalar(True), stored.num_rows))
    joined = marked_staged.join(marked_stored, list(_PEL_KEYS), join_type="full outer")
    in_staged = pc.fill_null(joined["_staged"], False).to_numpy(zero_copy_only=False)
    in_stored = pc.fill_null(joined["_stored"], False).to_numpy(zero_copy_only=False)
    same = in_staged & in_stored
    for name in _PEL_VALUES:
        same &= _equal(joined[name], joined[f"_stored_{name}"])
    appended = in_staged & ~same
    gone = in_stored & ~same
    if appended.any():
        rows = joined.filter(pa.array(appended)).select([*_PEL_KEYS, C.STREAM, C.GROUP, *_PEL_VALUES])
        rows = rows.append_column(C.ROW_KIND, pa.repeat(pa.scalar(C.KIND_PENDING), rows.num_rows))
        changes.pending = rows.append_column(C.TXN, pa.repeat(pa.scalar(txn), rows.num_rows)).sort_by(
            [(name, "ascending") for name in _PEL_KEYS]
        )
    if gone.any():
        changes.removed_pending = joined.filter(pa.array(gone)).select(list(_PEL_KEYS))
    replaced = int((appended & in_stored).sum())
    changes.inserted += int(appended.sum()) - replaced
    changes.updated += replaced
    changes.deleted += int(gone.sum()) - replaced


def _equal(left: pa.ChunkedArray, right: pa.ChunkedArray) -> np.ndarray:
    """Row by row: both null, or equal."""
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    equal = pc.fill_null(pc.or_kleene(pc.equal(left, right), both_null), False)
    result: np.ndarray = equal.to_numpy(zero_copy_only=False)
    return result


def _entry_rows(entries: pa.Table, txn: str) -> pa.Table:
    """Staged entries as state-table columns (written in the order staged: each stream's in ID order)."""
    rows = entries.select([C.PARTITION_ID, C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS])
    rows = rows.append_column(C.ROW_KIND, pa.repeat(pa.scalar(C.KIND_ENTRY), rows.num_rows))
    return rows.append_column(C.TXN, pa.repeat(pa.scalar(txn), rows.num_rows))


def _removal(ctx: Context, rows: pa.Table, kind: str) -> Removal:
    """The stored rows of ``kind`` that ``rows`` names, removed by ID: held on the driver for one
    partition, else as a frame."""
    partitions = tuple(sorted(pc.unique(rows[C.PARTITION_ID]).to_pylist()))
    if len(partitions) == 1:
        ids = NamedIds(rows[C.ID_MS].to_numpy(), rows[C.ID_SEQ].to_numpy())
        return Removal(kind, partitions, None, ids.low, ids.high, named=len(ids), seq_range=ids.seq_range, ids=ids)
    frame = ctx.snapshot.spark.createDataFrame(rows)
    return Removal(kind, partitions, frame, named=rows.num_rows)

"""The import's one commit: the store made level with what was read from Redis, every stream at once.

Stream and group heads are written guarded on the versions the import started from, so a store that
changed meanwhile fails the import (``StoreChangedError``) instead of mixing two writers' states. Group
state is replaced: consumer and PEL rows Redis no longer has are deleted, the rest upserted. Entries are
added after the store's last ID; where Redis deleted or trimmed some ("diff") or the stream is copied
whole ("full"), stored entries that are not among Redis' live IDs are deleted (a diff's within the
range live_range.py gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import (
    ConsumerMeta,
    GroupMeta,
    Need,
    StreamMeta,
    Write,
    consumer_row,
    group_head_row,
    stream_head_key,
)
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame, source_frame_for_deletes
from streamclaim_spark.engine.transaction import RowsChanged, rows_changed
from streamclaim_spark.engine.writes import put_stream_head
from streamclaim_spark.errors import StoreChangedError
from streamclaim_spark.importer.driver_plan import add_to_plan, driver_changes
from streamclaim_spark.importer.live_range import live_bounds, may_be_gone
from streamclaim_spark.importer.redis_reader import StreamCopy
from streamclaim_spark.importer.staging import ENTRIES, LIVE_IDS, PENDING, Staging
from streamclaim_spark.state.delta_io import MERGE_TARGET
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.schema import STATE_SCHEMA, pruned_to

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


def commit_import(
    runner: Runner,
    copies: Sequence[StreamCopy],
    removed: Sequence[str],
    versions: dict[str, int],
    staging: Staging,
) -> tuple[int, RowsChanged]:
    """Commits the copies (and deletes the ``removed`` streams) in one transaction; returns its version
    and the rows it inserted, updated and deleted.

    ``versions`` holds the store's stream head versions the reads were based on (absent: new stream).
    An import that keeps every stream, group and consumer is decided on the driver and commits as
    files (driver_plan.py).
    """
    decided: list[RowsChanged | None] = [None]
    read_version: list[int | None] = [None]

    def decide(ctx: Context) -> None:
        read_version[0] = ctx.snapshot.version
        snapshot = ctx.snapshot
        keys = [copy.meta.key for copy in copies] + list(removed)
        snapshot.prefetch(*(Need(key) for key in keys))
        stored = {key: snapshot.stream(key) for key in keys}
        changed = sorted(k for k, meta in stored.items() if (meta.version if meta else None) != versions.get(k))
        if changed:
            raise StoreChangedError(
                f"stream(s) {', '.join(changed[:5])} changed in the store while the import read Redis; "
                "run the import again (nothing was written)"
            )
        snapshot.prefetch(*(Need(key, meta.groups) for key, meta in stored.items() if meta is not None and meta.groups))
        decided[0] = _decided_on_driver(ctx, copies, stored, removed, staging)
        if decided[0] is None:
            _plan_merge(ctx, copies, stored, removed, staging)

    runner.transact("IMPORT", decide)
    version = runner.last_commit_version
    if version is None:  # the store was level with Redis already: the version it was read at
        assert read_version[0] is not None and decided[0] == RowsChanged(0, 0, 0)
        return read_version[0], RowsChanged(0, 0, 0)
    rows = decided[0] or rows_changed(runner.session(), runner.state_path, version)
    return version, rows or RowsChanged(0, 0, 0)


def _plan_merge(
    ctx: Context,
    copies: Sequence[StreamCopy],
    stored: dict[str, StreamMeta | None],
    removed: Sequence[str],
    staging: Staging,
) -> None:
    """Plans the import as one MERGE: heads written, group rows replaced where they moved, entries added,
    and stored entries Redis no longer has deleted."""
    cleared: list[str] = []  # group partitions whose consumer and PEL rows are replaced or dropped
    entries_checked: list[str] = []  # stream partitions whose stored entries must be among Redis' IDs
    for copy in copies:
        before = stored[copy.meta.key]
        _write_heads(ctx, copy, before)
        if before is not None:
            cleared.extend(group_partition(copy.meta.key, name) for name in before.groups)
            if copy.mode != "append":
                entries_checked.append(stream_partition(copy.meta.key))
    for key in removed:
        meta = stored[key]
        if meta is None:
            continue
        _delete_heads(ctx, meta)
        cleared.extend(group_partition(key, name) for name in meta.groups)
        entries_checked.append(stream_partition(key))
    new_group_rows = _pending_rows(ctx, staging).unionByName(_consumer_rows(ctx, copies), allowMissingColumns=True)
    new_entries = _entry_rows(ctx, staging)
    written = new_group_rows
    if cleared:
        old = _rows_of(ctx, cleared, (C.KIND_CONSUMER, C.KIND_PENDING))
        ctx.plan.add_frame(source_frame_for_deletes(_not_among(old, new_group_rows)), *cleared)
        # Rows Redis has as the store has them are left alone: a re-run rewrites only what moved.
        written = _not_among(new_group_rows, old, _GROUP_VALUES)
    ctx.plan.add_frame(source_frame(written), *_group_partitions(copies))
    ctx.plan.add_frame(source_frame(new_entries), *(stream_partition(c.meta.key) for c in copies))
    if not entries_checked:
        ctx.plan.bounds.append(_no_stored_entries())
    else:
        live = staging.frame(ctx.snapshot.spark, LIVE_IDS).select(C.PARTITION_ID, C.ID_MS, C.ID_SEQ)
        kept = new_entries.select(C.PARTITION_ID, C.ID_MS, C.ID_SEQ).unionByName(live)
        old = may_be_gone(ctx.snapshot.spark, _rows_of(ctx, entries_checked, (C.KIND_ENTRY,)), live_bounds(copies))
        ctx.plan.add_frame(source_frame_for_deletes(_not_among(old, kept)), *entries_checked)


def _decided_on_driver(
    ctx: Context,
    copies: Sequence[StreamCopy],
    stored: dict[str, StreamMeta | None],
    removed: Sequence[str],
    staging: Staging,
) -> RowsChanged | None:
    """Plans the import as a commit of files where it keeps every stream, group and consumer
    (driver_plan.py), returning the rows it inserts, updates and deletes; None, with nothing planned,
    where it must go by MERGE."""
    on_driver = driver_changes(ctx, copies, stored, removed, staging)
    if on_driver is None:
        return None
    if on_driver.empty and all(_heads_level(ctx, copy, stored[copy.meta.key]) for copy in copies):
        # Nothing to write: no commit, as if the import ran at the version it read (a later writer's
        # change comes after it). A commit only to bump the heads cost ~0.9 s of an unchanged re-run.
        return RowsChanged(0, 0, 0)
    for copy in copies:
        _write_heads(ctx, copy, stored[copy.meta.key])
    add_to_plan(ctx, on_driver)
    heads: list[tuple[str, str | None]] = [(copy.meta.key, None) for copy in copies]
    heads += [(copy.meta.key, group.name) for copy in copies for group in copy.groups]
    new_heads = sum(1 for key, group in heads if not _was_stored(stored[key], group))
    updated = on_driver.updated + len(heads) - new_heads
    return RowsChanged(on_driver.deleted, updated, on_driver.inserted + new_heads)


def _heads_level(ctx: Context, copy: StreamCopy, before: StreamMeta | None) -> bool:
    """True when the store's stream head and group heads already hold what ``copy`` read from Redis
    (the same groups, each with the same cursor and entries-read)."""
    if before is None or set(before.groups) != {group.name for group in copy.groups}:
        return False
    if replace(_stream_head(copy, before), groups=before.groups) != before:
        return False
    for group in copy.groups:
        stored = ctx.snapshot.group(copy.meta.key, group.name)
        if stored is None or (stored.last_id, stored.entries_read) != (group.last_id, group.entries_read):
            return False
    return True


def _was_stored(before: StreamMeta | None, group: str | None) -> bool:
    """True when the store had the stream (``group`` None) or its group ``group`` before the import."""
    return before is not None and (group is None or group in before.groups)


def _write_heads(ctx: Context, copy: StreamCopy, before: StreamMeta | None) -> None:
    key = copy.meta.key
    put_stream_head(ctx, before, _stream_head(copy, before))
    for group in copy.groups:
        stored = ctx.snapshot.group(key, group.name) if before is not None and group.name in before.groups else None
        after = GroupMeta(key, group.name, group.last_id, group.entries_read, stored.version if stored else -1)
        ctx.plan.add(
            Write(group_head_row(after, ctx.txn), guard=True, expect_version=stored.version if stored else None)
        )
    if before is not None:
        for name in set(before.groups) - {group.name for group in copy.groups}:
            _delete_group_head(ctx, key, name)


def _stream_head(copy: StreamCopy, before: StreamMeta | None) -> StreamMeta:
    """The stream head the import writes for ``copy`` over the stored one, ``before``."""
    # Redis' PEL may name entries Redis deleted, and nothing Redis reports says for sure whether it does
    # (XSETID can reset its counters): a copied PEL marks the stream; the store's own PEL rows are replaced.
    some_deleted = any(group.pel_count for group in copy.groups)
    return replace(copy.meta, version=before.version if before else -1, some_deleted=some_deleted)


def _delete_heads(ctx: Context, meta: StreamMeta) -> None:
    ctx.plan.add(Write(stream_head_key(meta.key), delete=True, guard=True, expect_version=meta.version))
    for name in meta.groups:
        _delete_group_head(ctx, meta.key, name)


def _delete_group_head(ctx: Context, key: str, name: str) -> None:
    group = ctx.snapshot.group(key, name)
    if group is not None:
        ctx.plan.add(Write(group_head_row(group, ctx.txn), delete=True, guard=True, expect_version=group.version))


def _group_partitions(copies: Sequence[StreamCopy]) -> list[str]:
    return [group_partition(c.meta.key, g.name) for c in copies for g in c.groups]


def _pending_rows(ctx: Context, staging: Staging) -> DataFrame:
    """The staged PEL rows as state rows."""
    return staging.frame(ctx.snapshot.spark, PENDING).select(
        C.PARTITION_ID,
        F.lit(C.KIND_PENDING).alias(C.ROW_KIND),
        C.STREAM,
        C.GROUP,
        C.ID_MS,
        C.ID_SEQ,
        C.OWNER,
        C.DELIVERY_TIME_MS,
        C.DELIVERY_COUNT,
        F.lit(ctx.txn).alias(C.TXN),
    )


def _consumer_rows(ctx: Context, copies: Sequence[StreamCopy]) -> DataFrame:
    """Every copied consumer as a state row, built in the JVM from one literal (frames.json_frame)."""
    rows = [
        consumer_row(copy.meta.key, group.name, ConsumerMeta(c.name, c.seen_time, c.active_time), ctx.txn)
        for copy in copies
        for group in copy.groups
        for c in group.consumers
    ]
    return json_frame(ctx.snapshot.spark, rows, _CONSUMER_SCHEMA)


def _entry_rows(ctx: Context, staging: Staging) -> DataFrame:
    entries = staging.frame(ctx.snapshot.spark, ENTRIES)
    return entries.select(
        C.PARTITION_ID,
        F.lit(C.KIND_ENTRY).alias(C.ROW_KIND),
        C.STREAM,
        C.ID_MS,
        C.ID_SEQ,
        C.FIELDS,
        F.lit(ctx.txn).alias(C.TXN),
    )


def _no_stored_entries() -> Column:
    """When no stored entry is deleted, no entry row of the MERGE's source matches a stored one: new
    entries lie after each stream's stored last ID, a stream new to the store has none. So the MERGE
    need not look at stored entries at all, and this bound lets Delta skip every file of entries only
    (a re-run over 1M stored entries otherwise scans them all). Written as ``<`` or ``>`` because
    Delta's data skipping understands ranges."""
    kind = F.col(f"{MERGE_TARGET}.{C.ROW_KIND}")
    return (kind < F.lit(C.KIND_ENTRY)) | (kind > F.lit(C.KIND_ENTRY))


def _rows_of(ctx: Context, partitions: Sequence[str], kinds: tuple[str, ...]) -> DataFrame:
    """The stored rows of ``kinds`` in ``partitions``: a bucket filter and a broadcast semi-join (schema.pruned_to)."""
    wanted = json_frame(ctx.snapshot.spark, [{C.PARTITION_ID: p} for p in sorted(set(partitions))], _PARTITIONS)
    rows = ctx.snapshot.frame().where(pruned_to(partitions) & F.col(C.ROW_KIND).isin(*kinds))
    return rows.join(F.broadcast(wanted), C.PARTITION_ID, "left_semi")


def _not_among(old: DataFrame, new: DataFrame, values: tuple[str, ...] = ()) -> DataFrame:
    """The ``old`` rows whose key (and ``values``) no ``new`` row has: a MERGE source may not match a target
    row twice. Key columns ``new`` lacks are not part of its rows' keys."""
    o, n = old.alias("o"), new.alias("n")
    same = F.col(f"o.{C.PARTITION_ID}") == F.col(f"n.{C.PARTITION_ID}")
    for column in (*C.KEY_COLUMNS[1:], *values):
        if column in new.columns:
            same = same & F.col(f"o.{column}").eqNullSafe(F.col(f"n.{column}"))
    return o.join(n, same, "left_anti")


# What a consumer or PEL row holds besides its key: equal values mean an unchanged row.
_GROUP_VALUES = (C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT, C.SEEN_TIME_MS, C.ACTIVE_TIME_MS)
_PARTITIONS = StructType([STATE_SCHEMA[C.PARTITION_ID]])
_CONSUMER_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.GROUP, C.CONSUMER, C.SEEN_TIME_MS, C.ACTIVE_TIME_MS, C.TXN)
_CONSUMER_SCHEMA = StructType([STATE_SCHEMA[name] for name in _CONSUMER_COLUMNS])

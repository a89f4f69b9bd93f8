"""The guarded write primitives every command and batch path builds its plan from.

Each adds ``Write`` rows (or frames of rows) to the context's plan; nothing here commits. Head writes
are guarded on the version the command read, so a commit fails, and the command re-runs, when another
one changed the stream or group meanwhile (docs/DESIGN.md, "Transactions").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId
from streamclaim_spark.core.model import (
    ConsumerMeta,
    GroupMeta,
    StreamMeta,
    Write,
    consumer_row,
    entry_key,
    group_head_row,
    stream_head_key,
    stream_head_row,
)
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame_for_deletes
from streamclaim_spark.state.schema import in_partitions


def put_stream_head(ctx: Context, before: StreamMeta | None, after: StreamMeta) -> None:
    """Writes the stream head, guarded on the version the command read (absent: must still be absent)."""
    expect = before.version if before is not None else None
    base = after if before is not None else replace(after, version=-1)
    ctx.plan.add(Write(stream_head_row(base, ctx.txn), guard=True, expect_version=expect))


def put_group(ctx: Context, before: GroupMeta, after: GroupMeta) -> None:
    """Writes the group head, guarded on the version read (every write to a group bumps it); with
    ``after`` = ``before`` it only guards: the commit fails if the group moved since the read."""
    ctx.plan.add(Write(group_head_row(after, ctx.txn), guard=True, expect_version=before.version))


def delete_pending_ids(ctx: Context, key: str, groups: Sequence[GroupMeta], ids: DataFrame) -> None:
    """Deletes, in the plan's MERGE, the PEL rows of ``groups`` whose IDs are among ``ids`` (DELREF)."""
    references = ctx.snapshot.pending_frames(key, [g.name for g in groups]).join(
        ids.select(C.ID_MS, C.ID_SEQ), [C.ID_MS, C.ID_SEQ], "left_semi"
    )
    ctx.plan.add_frame(source_frame_for_deletes(references), *(group_partition(key, g.name) for g in groups))


def delete_entries(ctx: Context, meta: StreamMeta, existing: set[StreamId]) -> None:
    """Deletes live entries as XDEL does: the rows go, the head's length, first ID and max-deleted ID follow."""
    if not existing:
        return
    for entry_id in existing:
        ctx.plan.add(Write(entry_key(meta.key, entry_id), delete=True))
    length = meta.length - len(existing)
    first_id = meta.first_id
    if length == 0:
        first_id = ZERO_ID
    elif meta.first_id in existing:
        candidates = ctx.snapshot.entry_ids(meta.key, meta.first_id, MAX_ID, count=len(existing) + 1)
        first_id = next(i for i in candidates if i not in existing)
    after = replace(
        meta,
        length=length,
        first_id=first_id,
        max_deleted_id=max(meta.max_deleted_id, *existing),
        some_deleted=meta.some_deleted or bool(meta.groups),  # a group's PEL may name a deleted entry
    )
    put_stream_head(ctx, meta, after)


def delete_stream(ctx: Context, meta: StreamMeta) -> None:
    """Adds the writes that remove a stream, its entries and all its groups' rows."""
    ctx.plan.add(Write(stream_head_key(meta.key), delete=True, guard=True, expect_version=meta.version))
    partitions = [stream_partition(meta.key)]
    for group in ctx.snapshot.groups(meta.key):
        ctx.plan.add(Write(group_head_row(group, ctx.txn), delete=True, guard=True, expect_version=group.version))
        partitions.append(group_partition(meta.key, group.name))
    rows = ctx.snapshot.frame().where(in_partitions(partitions) & ~F.col(C.ROW_KIND).isin(*C.HEAD_KINDS))
    ctx.plan.add_frame(source_frame_for_deletes(rows), *partitions)


def touch_consumer(ctx: Context, key: str, group: str, name: str) -> None:
    """Creates the consumer if needed and marks it seen and active now (a claim or delivery to it)."""
    ctx.plan.add(Write(consumer_row(key, group, ConsumerMeta(name, ctx.now, ctx.now), ctx.txn)))

"""Bulk XACK and XACKDEL: any number of IDs, named by a DataFrame or the whole PEL, in one commit."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from streamclaim_spark.commands.groups import group_or_nogroup
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.ids import ZERO_ID, StreamId, from_stored
from streamclaim_spark.core.model import RefPolicy
from streamclaim_spark.core.named_ids import NamedIds, parse_stored
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import MATCH_KEYS, source_frame_for_deletes
from streamclaim_spark.engine.writes import delete_pending_ids, put_group, put_stream_head
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.columns import id_at_most, id_range_aggregates, stored_id, stored_id_columns
from streamclaim_spark.state.delta_txn import commits_files

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


@dataclass(frozen=True)
class BulkAck:
    """What ``acknowledge`` removed from the group's PEL: ``count`` entries."""

    count: int
    version: int | None


@dataclass(frozen=True)
class BulkAckDel:
    """What ``acknowledge_and_delete`` did: ``acknowledged`` PEL entries removed from the group,
    ``deleted`` stream entries removed, and (ACKED) ``still_referenced`` acknowledged entries kept
    because another group still references them."""

    acknowledged: int
    deleted: int
    still_referenced: int
    version: int | None


def acknowledge(runner: Runner, key: str, group: str, ids: DataFrame | None, id_column: str = "id") -> BulkAck:
    """Acknowledges (XACK) the entries ``ids`` names, in one commit; None acknowledges every pending entry.

    Args:
        runner: The store's command runner (StreamStore.runner).
        key: The stream.
        group: The consumer group.
        ids: A DataFrame whose ``id_column`` holds entry IDs as Redis text (``"1700000000000-5"``);
            IDs that are not pending are ignored, as XACK ignores them. None: the group's whole PEL.
        id_column: The column of ``ids`` holding the IDs (default ``id``).

    Raises:
        ReplyError: NOGROUP when the stream or group does not exist (XACK itself replies 0 there).
    """
    _check_id_column(ids, id_column)

    if commits_files(runner.session()):
        return _acknowledge_in_one_pass(runner, key, group, ids, id_column)

    def decide(ctx: Context) -> BulkAck:
        head = group_or_nogroup(ctx, key, group)
        # Spark Connect: a MERGE. Pinned once: the count and both of the MERGE's passes read these rows,
        # and a pinned source needs no copy by Delta (1M IDs: 10.6 s -> 8.3 s warm, docs/BENCHMARKS.md "Levers").
        pending = _pending_named(ctx, key, group, ids, id_column).select(*MATCH_KEYS).localCheckpoint(eager=True)
        count = int(pending.count())
        if count:
            ctx.plan.add_frame(source_frame_for_deletes(pending), group_partition(key, group))
            ctx.plan.frames_pinned = True
            put_group(ctx, head, head)
        return BulkAck(count, None)

    result = runner.transact("BULK ACK", decide)
    return replace(result, version=runner.last_commit_version if result.count else None)


def _acknowledge_in_one_pass(runner: Runner, key: str, group: str, ids: DataFrame | None, id_column: str) -> BulkAck:
    """``acknowledge`` as one transaction of files: only the PEL files holding named IDs are rewritten,
    once, without them (a file taken whole is dropped unread), and the count is the files' rows less
    the rows written back: no query counts the IDs' rows in the PEL (file_commit.py)."""
    named = _named(ids, id_column) if ids is not None else None
    removals: list[Removal] = []

    def decide(ctx: Context) -> None:
        head = group_or_nogroup(ctx, key, group)
        if named is not None and named.count == 0:
            return  # no ID parses: nothing is pending under them
        partition = group_partition(key, group)
        if named is None:
            removal = Removal(C.KIND_PENDING, (partition,), None)
        else:
            frame = named.frame
            rows = None if frame is None else frame.select(F.lit(partition).alias(C.PARTITION_ID), C.ID_MS, C.ID_SEQ)
            removal = Removal(
                C.KIND_PENDING, (partition,), rows, named.low, named.high,
                named=named.count, seq_range=named.seq_range, ids=named.held,
            )  # fmt: skip
        removals[:] = [removal]
        ctx.plan.add_removal(removal)
        put_group(ctx, head, head)

    runner.transact("BULK ACK", decide)
    count = removals[0].removed if removals else 0
    return BulkAck(count or 0, runner.last_commit_version if count else None)


@dataclass(frozen=True)
class _Named:
    """The IDs an acknowledgement names (duplicates included): how many parse, their bounds, and where
    they are held: on the driver (``held``) or pinned in Spark (``frame``: ``id_ms``, ``id_seq``)."""

    count: int
    low: StreamId | None = None
    high: StreamId | None = None
    seq_range: tuple[int, int] | None = None
    held: NamedIds | None = None
    frame: DataFrame | None = None


def _named(ids: DataFrame, id_column: str) -> _Named:
    """The IDs ``ids``' ``id_column`` names that parse (``_wanted_ids``), with their count and bounds."""
    # Up to the placement's ``Work.ACK_IDS`` IDs are collected as text and parsed by pyarrow (16 bytes an
    # ID kept): the range is then a min and a max, and the PEL files' rows are matched on the driver
    # (engine/named_removal.py). Collected under a limit, so more IDs cost the driver no more than that.
    most = placement().rows_max(Work.ACK_IDS)
    texts = ids.select(F.col(id_column).cast(StringType())).limit(max(0, most + 1)).toArrow().column(0)
    if len(texts) <= most:
        ms, seq = parse_stored(texts)
        if not len(ms):
            return _Named(0)
        held = NamedIds(ms, seq)
        return _Named(len(held), held.low, held.high, held.seq_range, held=held)
    # Parsed once and pinned: the range and the files' rewrite read the same IDs without parsing them
    # again (1M IDs: 6.6-10.9 s -> 3.1-3.7 s with the faster parse). Pinned by the
    # range's aggregate, the first action on it: one job where an eager checkpoint took one more (~0.3 s).
    frame = _wanted_ids(ids, id_column).localCheckpoint(eager=False)
    count, low, high, seq_range = _id_range(frame)
    return _Named(count, low, high, seq_range, frame=frame)


def _id_range(wanted: DataFrame) -> tuple[int, StreamId | None, StreamId | None, tuple[int, int] | None]:
    """How many IDs ``wanted`` names, the lowest and highest, and their smallest and largest sequence
    numbers (one aggregate; Nones when it names none)."""
    seqs = [F.min(C.ID_SEQ).alias("seq_lo"), F.max(C.ID_SEQ).alias("seq_hi")]
    row = wanted.where(F.col(C.ID_MS).isNotNull()).agg(*id_range_aggregates(), *seqs).first()
    assert row is not None
    if row["lo"] is None:
        return 0, None, None, None
    seq_range = (from_stored(row["seq_lo"]), from_stored(row["seq_hi"]))
    return int(row["n"]), stored_id(row["lo"]), stored_id(row["hi"]), seq_range


def acknowledge_and_delete(
    runner: Runner,
    key: str,
    group: str,
    ids: DataFrame | None,
    policy: RefPolicy = RefPolicy.KEEPREF,
    id_column: str = "id",
) -> BulkAckDel:
    """XACKDEL for any number of IDs, in one commit: acknowledges each ID pending in the group, then
    deletes its stream entry under ``policy``, as XACKDEL does per ID (docs/DESIGN.md, "Redis 8 commands").

    KEEPREF deletes the entries and leaves other groups' references dangling; DELREF also removes the
    IDs from every other group's PEL; ACKED deletes only entries no other group references (pending
    there, or after some group's last-delivered ID) and still acknowledges the others. IDs not pending
    in the group are ignored, as XACKDEL answers -1 for them. None: the group's whole PEL.

    Raises:
        ReplyError: NOGROUP when the stream or group does not exist (XACKDEL itself answers -1 there).
    """
    _check_id_column(ids, id_column)
    if not isinstance(policy, RefPolicy):
        raise InvalidArgumentError(f"policy={policy!r} must be a RefPolicy (KEEPREF, DELREF or ACKED)")

    def decide(ctx: Context) -> BulkAckDel:
        head = group_or_nogroup(ctx, key, group)
        meta = ctx.snapshot.stream(key)
        assert meta is not None
        acked = _pending_named(ctx, key, group, ids, id_column)
        others = [g for g in ctx.snapshot.groups(key) if g.name != group] if policy is not RefPolicy.KEEPREF else []
        candidates = acked.select(C.ID_MS, C.ID_SEQ)
        if policy is RefPolicy.ACKED:
            horizon = min(g.last_id for g in [head, *others])  # every group has read up to here
            candidates = candidates.where(id_at_most(horizon))
            if others:
                pending_elsewhere = ctx.snapshot.pending_frames(key, [g.name for g in others])
                candidates = candidates.join(pending_elsewhere, [C.ID_MS, C.ID_SEQ], "left_anti")
        entries = ctx.snapshot.partition(stream_partition(key), C.KIND_ENTRY)
        doomed = entries.join(candidates, [C.ID_MS, C.ID_SEQ], "left_semi")
        stats = _ackdel_stats(acked, candidates, entries, doomed)
        acknowledged, deletable, deleted = stats.acknowledged, stats.deletable, stats.deleted
        if acknowledged == 0:
            return BulkAckDel(0, 0, 0, None)
        ctx.plan.add_frame(source_frame_for_deletes(acked), group_partition(key, group))
        put_group(ctx, head, head)
        if policy is RefPolicy.DELREF and others:
            delete_pending_ids(ctx, key, others, candidates)
        if deleted:
            ctx.plan.add_frame(source_frame_for_deletes(doomed), stream_partition(key))
            for other in others:  # the decision read their references: a change there re-runs it
                put_group(ctx, other, other)
            length = meta.length - deleted
            after = replace(
                meta,
                length=length,
                first_id=ZERO_ID if length == 0 or stats.first_left is None else stats.first_left,
                max_deleted_id=max(meta.max_deleted_id, stats.last_deleted or ZERO_ID),
                # KEEPREF leaves the other groups' references to the deleted entries
                some_deleted=meta.some_deleted or (policy is RefPolicy.KEEPREF and len(meta.groups) > 1),
            )
            put_stream_head(ctx, meta, after)
        return BulkAckDel(acknowledged, deleted, acknowledged - deletable, None)

    result = runner.transact("BULK ACKDEL", decide)
    return replace(result, version=runner.last_commit_version if result.acknowledged else None)


@dataclass(frozen=True)
class _AckDelStats:
    acknowledged: int
    deletable: int  # acknowledged IDs the policy lets go (whether or not the entry still exists)
    deleted: int  # stream entries deleted
    first_left: StreamId | None  # the first entry that stays
    last_deleted: StreamId | None


def _ackdel_stats(acked: DataFrame, candidates: DataFrame, entries: DataFrame, doomed: DataFrame) -> _AckDelStats:
    """One query for every count ``acknowledge_and_delete`` decides on, and the stream head's new edges."""
    marked = entries.join(doomed.select(C.ID_MS, C.ID_SEQ, F.lit(True).alias("_gone")), [C.ID_MS, C.ID_SEQ], "left")
    gone = F.col("_gone").isNotNull()
    row = (
        marked.agg(
            F.count("_gone").alias("deleted"),
            F.min(F.when(~gone, F.struct(C.ID_MS, C.ID_SEQ))).alias("first_left"),
            F.max(F.when(gone, F.struct(C.ID_MS, C.ID_SEQ))).alias("last_deleted"),
        )
        .crossJoin(acked.agg(F.count(F.lit(1)).alias("acknowledged")))
        .crossJoin(candidates.agg(F.count(F.lit(1)).alias("deletable")))
        .first()
    )
    assert row is not None
    return _AckDelStats(
        acknowledged=int(row["acknowledged"]),
        deletable=int(row["deletable"]),
        deleted=int(row["deleted"]),
        first_left=stored_id(row["first_left"]) if row["first_left"] is not None else None,
        last_deleted=stored_id(row["last_deleted"]) if row["last_deleted"] is not None else None,
    )


def _check_id_column(ids: DataFrame | None, id_column: str) -> None:
    if ids is not None and id_column not in ids.columns:
        raise InvalidArgumentError(f"id_column={id_column!r} is not a column of ids (columns: {ids.columns})")


def _pending_named(ctx: Context, key: str, group: str, ids: DataFrame | None, id_column: str) -> DataFrame:
    """The group's PEL rows whose IDs ``ids`` names (Redis text), or the whole PEL for None."""
    pending = ctx.snapshot.pending_frame(key, group)
    if ids is None:
        return pending
    return pending.join(_wanted_ids(ids, id_column), [C.ID_MS, C.ID_SEQ], "left_semi")


def _wanted_ids(ids: DataFrame, id_column: str) -> DataFrame:
    """``ids``' IDs (Redis text) as stored (``id_ms``, ``id_seq``); text that is no ID gives nulls."""
    ms, seq = stored_id_columns(F.col(id_column).cast(StringType()))
    return ids.select(ms.alias(C.ID_MS), seq.alias(C.ID_SEQ))

"""Commits a plan as one Delta transaction of files: rows appended, removed by ID or changed where they
lie, heads rewritten.

A MERGE joins its whole source with the target before it writes. Two kinds of bulk change need no
such join: rows new by construction (a bulk append's entries have IDs after the stream's last ID, a
delivery's PEL rows IDs after the group's cursor when no PEL row lies there), which no existing row
can match, rows removed by ID (a bulk XACK), where each file holding some is rewritten without
them, and rows changed where they lie (a recovery round's or ``claim_stale``'s claims in place), where
each file is rewritten through one projection. Such a plan commits here, in one transaction
(state/delta_txn.py), on a classic session:

1. the files that may hold the head and consumer rows the plan writes (their ``h`` buckets, skipped by
   partition statistics) are rewritten: the plan's rows in place of or beside theirs, the others as
   they were; a guarded head whose version is not the one the command read raises the guard's
   stale-snapshot error (a lost race) first, as the MERGE's guard does. A plan of heads in bulk
   (``create_groups`` of thousands of groups) is this step alone;
2. appended rows are written as files of their own; the files a removal's IDs may lie in are
   rewritten without the removed rows; the files of a rewrite's partitions with its assignments;
3. one commit adds the new files and removes the rewritten ones. Delta's conflict check sees every
   bucket read, as it sees a MERGE's, so concurrent writers conflict exactly as before.

Measured on 1M entries (CHANGELOG.md, "Appends as appends"): bulk append 11.2 -> 4.3 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.count_rules import CountInputs
from streamclaim_spark.core.file_changes import Rewrite
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.partitions import APART_KINDS
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.core.plan import Plan, is_heads_in_bulk
from streamclaim_spark.engine.bucket_compaction import compacted
from streamclaim_spark.engine.file_removals import check_apart, removal_query, remove_rows
from streamclaim_spark.engine.merge_source import source_of
from streamclaim_spark.engine.written_rows import (
    WRITE_ORDER,
    as_state_rows,
    in_write_order,
    rewrite_written_rows,
)
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.add_files import row_count
from streamclaim_spark.state.commit_settings import (
    AUTO_COMPACT,
    AUTO_COMPACT_MIN_NUM_FILES,
    apply_settings,
    commit_settings,
    small_file_bytes,
)
from streamclaim_spark.state.delta_txn import (
    TXN_APP_ID,
    TXN_VERSION,
    DeltaTransaction,
    active_session,
    commits_files,
)
from streamclaim_spark.state.schema import COLUMN_NAMES, bucket_column
from streamclaim_spark.state.small_files import record_commit, small_file_change, worth_compacting

# The operation Delta records for a commit of files (``DeltaTransaction.commit``): a WRITE, whose
# metrics count the files and rows it wrote, copies included, not the rows the plan changed.
FILES_OPERATION = "WRITE"


def commits_as_files(spark: SparkSession, plan: Plan) -> bool:
    """True when ``plan`` commits here, on a classic session: a command's row writes alone, or rows
    appended, removed or rewritten, or heads in bulk (thousands of head and consumer rows,
    ``plan.is_heads_in_bulk``), whose row writes are then plain writes of heads and consumers (no
    delete, no claim); no frame for a MERGE, no UPDATE."""
    if plan.frames or plan.update is not None or not commits_files(spark):
        return False
    if plan.appends or plan.removals or plan.rewrites or is_heads_in_bulk(plan):
        return all(_is_plain_head_write(write) for write in plan.writes)
    return bool(plan.writes)


class MergeInstead:
    """What ``commit_files`` returns, having committed nothing, when a command's writes reach files too
    big to rewrite on the driver (the placement's ``Work.APPLY``) or holding a deletion vector: the
    plan commits by MERGE instead (merge_commit.py)."""


MERGE_INSTEAD = MergeInstead()


def _is_plain_head_write(write: Write) -> bool:
    return not write.delete and write.claim is None and write.row.get(C.ROW_KIND) in APART_KINDS


def commit_files(
    spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int
) -> int | MergeInstead | None:
    """Commits ``plan`` (``commits_as_files`` holds) as one Delta transaction; returns its version, or None
    when the plan changes no row (nothing is committed, as XACK of IDs that are not pending changes
    nothing), or ``MERGE_INSTEAD``."""
    with active_session(spark):
        return _commit_files(spark, table_path, plan, operation, rows_per_file)


def _commit_files(
    spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int
) -> int | MergeInstead | None:
    apply_settings(spark, commit_settings(operation, small=False, rows_per_file=rows_per_file))
    txn = DeltaTransaction(spark, table_path)
    writer = _idempotent_writer(spark)
    if writer is not None and txn.recorded_version(writer[0]) >= writer[1]:
        return None  # this writer's version is already in the table (a replayed streaming batch)
    only_writes = not (plan.appends or plan.removals or plan.rewrites)
    if len(plan.rewrites) > 1 or (plan.rewrites and plan.removals):  # one file rewritten twice: one undoes the other
        raise InvalidArgumentError("a plan rewrites rows of one Rewrite at most, and removes none besides")
    rewritten: list[Any] = []
    added: list[Any] = []
    # Removals first: the PEL rows they find on the driver, by owner, go into the groups' kept counts.
    removed_from = [txn.files_in(removal_query(removal)) for removal in plan.removals]
    check_apart(removed_from)
    for removal, files in zip(plan.removals, removed_from, strict=True):
        gone, written = remove_rows(spark, txn, removal, files, rows_per_file)
        rewritten.extend(gone)
        added.extend(written)
    counting = _count_inputs(plan)
    apply_max = placement().rows_max(Work.APPLY)
    overlaid = rewrite_written_rows(spark, txn, plan.writes, apply_max if only_writes else None, counting)
    if overlaid is None:
        return MERGE_INSTEAD
    if only_writes and not overlaid.replaced and overlaid.rows is None:
        return None  # every write leaves its row as it was (e.g. a claim of a row no longer idle)
    added[:0] = _appended(txn, plan, overlaid.rows, rows_per_file)
    for rewrite in plan.rewrites:
        files = txn.files_in(FileQuery(tuple(rewrite.partitions), (rewrite.kind,)))
        added.extend(_rewrite(txn, rewrite, files) if files else [])
        rewritten.extend(files)
    if _changes_nothing(plan):
        return None  # the files written are referenced by no commit; VACUUM removes them
    removed = [*overlaid.replaced, *rewritten]
    if not rows_per_file:  # no cap, no small-file threshold of ours: Delta decides on compaction alone
        return txn.commit(added, removed, writer)
    below = small_file_bytes(rows_per_file)
    change = small_file_change(added, removed, below)
    compact = worth_compacting(txn, table_path, change, below)
    if compact:  # compacted here, on the driver: Delta's own check never follows a commit of files
        growing = [bucket for bucket, count in change.items() if count > 0]
        merged = compacted(spark, txn, growing, below, rows_per_file, removed)
        if merged is not None:
            added, removed = [*added, *merged[0]], [*removed, *merged[1]]
            change, compact = small_file_change(added, removed, below), False
    # state/small_files.py: the whole bucket's count decides, not Delta's memory; or Delta's check would find nothing
    apply_settings(spark, {AUTO_COMPACT_MIN_NUM_FILES: "1"} if compact else {AUTO_COMPACT: "false"})
    version = txn.commit(added, removed, writer)
    if not compact:
        txn.mark_checked(added)  # or the next MERGE into these buckets pays the check skipped here
    record_commit(txn, table_path, version, change, below)
    return version


def _count_inputs(plan: Plan) -> CountInputs:
    """The plan's PEL changes beyond its writes: its own (appends, rewrites) and its removals' (per owner
    where found on the driver, else their groups left uncounted)."""
    uncounted = set(plan.uncounted)
    changes = {partition: dict(owners) for partition, owners in plan.counted_pending.items()}
    # A removal's group is not recounted: its stored PEL includes the files the removal drops, unread.
    unread = {partition for removal in plan.removals for partition in removal.partitions}
    for removal in plan.removals:
        if removal.kind != C.KIND_PENDING:
            continue
        if removal.removed_owners is None:
            uncounted.update(removal.partitions)
            continue
        (partition,) = removal.partitions
        owners = changes.setdefault(partition, {})
        for owner, n in removal.removed_owners.items():
            owners[owner] = owners.get(owner, 0) - n
    return CountInputs(frozenset(uncounted), changes, unread=frozenset(unread), repaired=plan.recounted)


def _appended(txn: DeltaTransaction, plan: Plan, overlaid: pa.Table | None, rows_per_file: int) -> list[Any]:
    """Writes the rows ``plan`` adds: the writes' files rewritten (``overlaid``) and its appends; returns
    their ``AddFile``s.

    The rows made on the driver (``overlaid``, appends given as Arrow tables) are written there, first, by
    pyarrow (state/driver_writes.py): a Spark write of them was a job whose one task got them through the
    plan (~0.3 s for a few rows, 6-8 s for 250,000 entries). Then one Spark write per frame: rows of one
    bucket given as a literal need no sort by bucket, which a union with other rows would make Delta add
    over all of them (a sort of every appended row). Appended frames are written in the order their
    producer gives (appends keep their rows ID-ordered). The commit's operation metrics (numOutputRows,
    numFiles) are its last write's.
    """
    on_driver = [as_state_rows(rows) for rows in plan.appends if isinstance(rows, pa.Table) and rows.num_rows]
    if overlaid is not None:
        on_driver.insert(0, overlaid)
    added = []
    if on_driver:
        local = in_write_order(pa.concat_tables(on_driver)) if len(on_driver) > 1 else on_driver[0]
        added.extend(txn.write_arrow(local, rows_per_file))
    for position, frame in enumerate(plan.appends):
        if isinstance(frame, pa.Table):
            continue
        rows = table_rows(frame)
        if position not in plan.ordered_appends:
            rows = rows.sortWithinPartitions(*WRITE_ORDER)
        added.extend(txn.write(rows))
    return added


def _changes_nothing(plan: Plan) -> bool:
    """True when the plan's removals found no row and it appends nothing and writes only guards (a
    head written back to guard it): committing would change nothing, so nothing is committed."""
    return (
        bool(plan.removals)
        and not plan.appends
        and not any(removal.removed for removal in plan.removals)
        and all(write.guard for write in plan.writes)
    )


def _idempotent_writer(spark: SparkSession) -> tuple[str, int] | None:
    """The (app ID, version) the session's Delta idempotent-write settings name, as a MERGE honours them."""
    app_id, version = spark.conf.get(TXN_APP_ID, None), spark.conf.get(TXN_VERSION, None)
    return (app_id, int(version)) if app_id and version else None


def table_rows(frame: DataFrame) -> DataFrame:
    """``frame``'s rows with every column of the state table (missing ones null), each in its bucket."""
    rows = source_of(frame).select(*COLUMN_NAMES)
    return rows.withColumn(C.BUCKET, bucket_column(F.col(C.PARTITION_ID), F.col(C.ROW_KIND)))


def _rewrite(txn: DeltaTransaction, rewrite: Rewrite, files: Sequence[Any]) -> list[Any]:
    """The files written for ``rewrite`` of ``files``: on the driver when the rewrite has an Arrow form
    and the files are few enough for the placement (``Work.REWRITE``), else by one Spark job."""
    rows, stored_bytes = sum(row_count(file) for file in files), sum(int(file.size()) for file in files)
    if rewrite.on_driver is not None and placement().on_driver(
        Work.REWRITE, classic=True, rows=rows, stored_bytes=stored_bytes
    ):
        written = txn.rewrite_arrow(files, rewrite.on_driver)
        if written is not None:
            return written
    return txn.write(_rewritten(txn.read_files(files), rewrite))


def _rewritten(rows: DataFrame, rewrite: Rewrite) -> DataFrame:
    """``rows`` (whole files) with ``rewrite``'s assignments on the rows meeting its condition, each
    assignment over the row as stored (one projection: no join, no shuffle)."""
    changed = F.coalesce(rewrite.condition, F.lit(False))
    return rows.select(
        *(
            F.when(changed, rewrite.assignments[name]).otherwise(F.col(name)).alias(name)
            if name in rewrite.assignments
            else F.col(name)
            for name in COLUMN_NAMES
        )
    )

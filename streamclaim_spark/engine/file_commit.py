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

Measured on 1M entries (docs/BENCHMARKS.md, "Appends as appends"): bulk append 11.2 -> 4.3 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.count_rules import CountInputs
from streamclaim_spark.core.file_changes import Removal, Rewrite
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import to_stored
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.named_ids import box_width
from streamclaim_spark.core.partitions import APART_KINDS
from streamclaim_spark.core.plan import Plan
from streamclaim_spark.engine.merge_source import source_frame_for_deletes, source_of
from streamclaim_spark.engine.named_removal import ids_frame, kept_on_driver, taken_on_driver
from streamclaim_spark.engine.written_rows import (
    DRIVER_ROWS_MAX,
    WRITE_ORDER,
    as_state_rows,
    in_write_order,
    rewrite_written_rows,
)
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.commit_settings import (
    AUTO_COMPACT,
    AUTO_COMPACT_MIN_NUM_FILES,
    apply_settings,
    commit_settings,
    small_file_bytes,
)
from streamclaim_spark.state.delta_txn import (
    FILE_PATH,
    TXN_APP_ID,
    TXN_VERSION,
    DeltaTransaction,
    active_session,
    file_name,
    row_count,
    supports_transactions,
)
from streamclaim_spark.state.schema import COLUMN_NAMES, bucket_column
from streamclaim_spark.state.small_files import record_commit, small_file_change, worth_compacting

# The operation Delta records for a commit of files (``DeltaTransaction.commit``): a WRITE, whose
# metrics count the files and rows it wrote, copies included, not the rows the plan changed.
FILES_OPERATION = "WRITE"


def commits_as_files(spark: SparkSession, plan: Plan, *, heads_in_bulk: bool = False) -> bool:
    """True when ``plan`` commits here, on a classic session: a command's row writes alone, or rows
    appended, removed or rewritten, or heads in bulk (thousands of head and consumer rows,
    ``transaction.is_heads_in_bulk``), whose row writes are then plain writes of heads and consumers (no
    delete, no claim); no frame for a MERGE, no UPDATE."""
    if plan.frames or plan.update is not None or not supports_transactions(spark):
        return False
    if plan.appends or plan.removals or plan.rewrites or heads_in_bulk:
        return all(_is_plain_head_write(write) for write in plan.writes)
    return bool(plan.writes)


class MergeInstead:
    """What ``commit_files`` returns, having committed nothing, when a command's writes reach files too
    big to rewrite on the driver (``written_rows.DRIVER_ROWS_MAX``) or holding a deletion vector: the
    plan commits by MERGE instead (transaction.py)."""


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
    counting = CountInputs(frozenset(plan.uncounted), plan.counted_pending)
    overlaid = rewrite_written_rows(spark, txn, plan.writes, DRIVER_ROWS_MAX if only_writes else None, counting)
    if overlaid is None:
        return MERGE_INSTEAD
    if only_writes and not overlaid.replaced and overlaid.rows is None:
        return None  # every write leaves its row as it was (e.g. a claim of a row no longer idle)
    added = _appended(txn, plan, overlaid.rows, rows_per_file)
    rewritten: list[Any] = []
    if len(plan.rewrites) > 1 or (plan.rewrites and plan.removals):  # one file rewritten twice: one undoes the other
        raise InvalidArgumentError("a plan rewrites rows of one Rewrite at most, and removes none besides")
    removed_from = [txn.files_in(_removal_query(removal)) for removal in plan.removals]
    _check_apart(removed_from)
    for removal, files in zip(plan.removals, removed_from, strict=True):
        gone, written = _remove(spark, txn, removal, files, rows_per_file)
        rewritten.extend(gone)
        added.extend(written)
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
    # state/small_files.py: the whole bucket's count decides, not Delta's memory; or Delta's check would find nothing
    apply_settings(spark, {AUTO_COMPACT_MIN_NUM_FILES: "1"} if compact else {AUTO_COMPACT: "false"})
    version = txn.commit(added, removed, writer)
    if not compact:
        txn.mark_checked(added)  # or the next MERGE into these buckets pays the check skipped here
    record_commit(txn, table_path, version, change, below)
    return version


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


def _check_apart(removed_from: Sequence[Sequence[Any]]) -> None:
    """Raises unless no file may hold rows of two removals (an import's entries and PEL rows lie in
    different buckets): each removal rewrites its files from the snapshot, so a file two rewrote would
    keep only one's change."""
    seen: set[str] = set()
    for files in removed_from:
        paths = {str(file.path()) for file in files}
        if paths & seen:
            raise InvalidArgumentError("a plan's removals must lie in different files: give one Removal per bucket")
        seen |= paths


def _remove(
    spark: SparkSession, txn: DeltaTransaction, removal: Removal, files: Sequence[Any], rows_per_file: int
) -> tuple[list[Any], list[Any]]:
    """The ``files`` (those that may hold its rows) ``removal`` removes rows from, and the files written
    in place of those it takes only some rows of; sets ``removal.removed``, the removed files' rows less
    the rows written back."""
    emptied = _emptied(txn, removal, files)
    unread = [file for file in files if str(file.path()) not in emptied]
    on_driver = taken_on_driver(spark, txn, unread, removal)
    if on_driver is not None:
        taken = on_driver.counts()
    else:
        by_spark = _with_held_ids_as_rows(spark, removal)  # the removal as Spark's joins take it
        taken = _rows_taken(txn, unread, by_spark)
    # Files holding none of the rows stay; files the removal takes whole go unrewritten.
    partly = [file for file in unread if 0 < taken.get(file_name(str(file.path())), 0) < row_count(file)]
    written: list[Any] = []
    kept = kept_on_driver(spark, txn, partly, removal) if partly and on_driver is not None else None
    if kept is not None:  # rewritten on the driver, bucket by bucket in stored order
        written = txn.write_arrow(as_state_rows(kept), rows_per_file)
    elif partly:
        if on_driver is not None:  # only the IDs found in the files to rewrite go to Spark's join
            names = [file_name(str(file.path())) for file in partly]
            rows = on_driver.rows(spark, removal.partitions[0], names)
            by_spark = replace(removal, rows=rows, ids=None, named=sum(taken[name] for name in names))
        written = txn.write(_without(txn.read_files(partly), by_spark))
    gone = [file for file in files if str(file.path()) in emptied or taken.get(file_name(str(file.path())))]
    removal.removed = sum(row_count(file) for file in gone) - sum(row_count(file) for file in written)
    return gone, written


def _with_held_ids_as_rows(spark: SparkSession, removal: Removal) -> Removal:
    """``removal`` with the IDs it holds on the driver as its ``rows``, for Spark's join (itself when it
    holds none there)."""
    if removal.ids is None:
        return removal
    rows = ids_frame(spark, removal.partitions[0], removal.ids.ms, removal.ids.seq)
    return replace(removal, rows=rows, ids=None)


def _emptied(txn: DeltaTransaction, removal: Removal, files: Sequence[Any]) -> set[str]:
    """The paths of ``files`` the removal takes every row of, by its ``empties`` test: dropped unread.
    Only files the commit of ``removal.written_at`` added qualify (their statistics are in its log
    entry), with no deletion vector now (a file's rows never change under its name otherwise)."""
    if removal.empties is None or removal.written_at is None or not files:
        return set()
    written = txn.added_at(removal.written_at)
    return {
        path
        for file in files
        if file.deletionVector() is None
        and (bounds := written.get(path := str(file.path()))) is not None
        and removal.empties(bounds)
    }


def _removal_query(removal: Removal) -> FileQuery:
    """The files ``removal``'s rows may lie in: its buckets, its partitions and its IDs' range."""
    kinds = (removal.kind,)
    return FileQuery(removal.partitions, kinds, removal.low, removal.high, every_partition_named=True)


# Up to this many named IDs of one partition are hashed once and sent to the rewrite's tasks (a
# broadcast anti join on the two ID columns, ~40 MB of driver memory per million): the files' rows are
# then read and written in one stage, with no shuffle. 1M IDs of a bulk XACK: the rewrite 1.85-2.6 s
# -> 1.2-1.5 s warm (docs/BENCHMARKS.md, "A bulk acknowledgement without a shuffle"). More, or IDs of
# several partitions, are joined by a shuffle of both sides, as before.
BROADCAST_NAMED_MAX = 1_500_000


def _rows_taken(txn: DeltaTransaction, files: Sequence[Any], removal: Removal) -> dict[str, int]:
    """How many rows ``removal`` takes from each of ``files``, by file name (files it takes none of are
    absent): one read of the files' key columns, so that only files holding some rows are rewritten,
    and files it takes whole are dropped without a rewrite (a bulk XACK of a whole PEL writes nothing)."""
    if not files:
        return {}
    counts = _matching(txn.read_files(files, with_path=True), removal, "left_semi").groupBy(FILE_PATH).count()
    return {file_name(path): int(count) for path, count in counts.collect()}


def _without(rows: DataFrame, removal: Removal) -> DataFrame:
    """``rows`` (whole files) less the rows ``removal`` removes; rows of other partitions stay."""
    return _matching(rows, removal, "left_anti").select(*COLUMN_NAMES)


def _matching(rows: DataFrame, removal: Removal, how: str) -> DataFrame:
    """``rows`` that ``removal`` removes (``how`` = left_semi) or keeps (left_anti), with all their columns."""
    if removal.every_row:
        doomed = F.col(C.PARTITION_ID).isin(*removal.partitions) & (F.col(C.ROW_KIND) == removal.kind)
        return rows.where(doomed if how == "left_semi" else ~doomed)
    if len(removal.partitions) == 1 and removal.named is not None and removal.named <= BROADCAST_NAMED_MAX:
        mine = (F.col(C.PARTITION_ID) == F.lit(removal.partitions[0])) & (F.col(C.ROW_KIND) == F.lit(removal.kind))
        packed = _packed_id(removal)
        if packed is not None:
            named = F.broadcast(removal.rows.select(packed(C.ID_MS, C.ID_SEQ).alias("_named")))
            return rows.join(named, mine & (packed(C.ID_MS, C.ID_SEQ) == F.col("_named")), how)
        named = F.broadcast(removal.rows.select(F.col(C.ID_MS).alias("_ms"), F.col(C.ID_SEQ).alias("_seq")))
        return rows.join(named, mine & (F.col(C.ID_MS) == F.col("_ms")) & (F.col(C.ID_SEQ) == F.col("_seq")), how)
    keys = removal.rows.select(C.PARTITION_ID, F.lit(removal.kind).alias(C.ROW_KIND), C.ID_MS, C.ID_SEQ)
    return rows.join(keys, [C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ], how)


def _packed_id(removal: Removal) -> Callable[[str, str], Column] | None:
    """A function of the two stored ID columns giving each ID inside the removal's box (its ID range's
    milliseconds by its sequence numbers) one bigint, and null outside it (no named ID lies there), or
    None when the box holds too many IDs to number. Spark hashes one bigint key faster than two
    columns: 1M named IDs, the counting pass 1.4-1.7 -> 1.2-1.5 s, in a second run 1.05-1.15 -> 0.8 s
    (docs/BENCHMARKS.md, "The files holding the IDs")."""
    if removal.low is None or removal.high is None or removal.seq_range is None:
        return None
    width = box_width(removal.low, removal.high, removal.seq_range)
    if width is None:
        return None
    seq_low, seq_high = removal.seq_range
    ms_low, ms_high = to_stored(removal.low.ms), to_stored(removal.high.ms)
    stored_seq_low, stored_seq_high = to_stored(seq_low), to_stored(seq_high)

    def packed(ms: str, seq: str) -> Column:
        inside = F.col(ms).between(ms_low, ms_high) & F.col(seq).between(stored_seq_low, stored_seq_high)
        offset = (F.col(ms) - F.lit(ms_low)) * F.lit(width) + (F.col(seq) - F.lit(stored_seq_low))
        return F.when(inside, offset)

    return packed


def _rewrite(txn: DeltaTransaction, rewrite: Rewrite, files: Sequence[Any]) -> list[Any]:
    """The files written for ``rewrite`` of ``files``: on the driver when the rewrite has an Arrow form
    and the files are few enough (``DRIVER_REWRITE_ROWS_MAX``), else by one Spark job."""
    if rewrite.on_driver is not None and sum(row_count(file) for file in files) <= DRIVER_REWRITE_ROWS_MAX:
        written = txn.rewrite_arrow(files, rewrite.on_driver)
        if written is not None:
            return written
    return txn.write(_rewritten(txn.read_files(files), rewrite))


# Most rows a rewrite rewrites on the driver. 10M PEL rows took 4.5 s there against 36 s for the Spark
# job on this 2-core machine ("A claim's rewrite on the driver"); a cluster's executors share a large
# rewrite's files, so past this the job writes them (the driver's time grows with the rows alone).
DRIVER_REWRITE_ROWS_MAX = 20_000_000


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


def removal_deletes(removal: Removal) -> DataFrame:
    """``removal`` as MERGE source rows that delete its rows (a plan that commits as a MERGE)."""
    if removal.every_row or removal.ids is not None:
        raise InvalidArgumentError("a removal of every row, or of IDs held on the driver, commits only as files")
    keys = removal.rows.select(C.PARTITION_ID, F.lit(removal.kind).alias(C.ROW_KIND), C.ID_MS, C.ID_SEQ)
    return source_frame_for_deletes(keys)

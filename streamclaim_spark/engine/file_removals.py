"""Rows removed by ID in a commit of files (engine/file_commit.py): the files that may hold them, those
taken whole dropped (unread where their statistics say so), the others rewritten without them.

Which rows each file holds is found on the driver where the IDs are held there (named_removal.py),
else by one Spark read of the files' key columns; the files taken only in part are rewritten on the
driver when small enough, else by one Spark job (a broadcast anti join for up to
``BROADCAST_NAMED_MAX`` IDs). A removal of PEL rows found on the driver also counts them per owner
(``Removal.removed_owners``), so that the groups' kept counts stay exact. On Spark Connect a removal
is a MERGE's source of deletes instead (``removal_deletes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import to_stored
from streamclaim_spark.core.named_ids import box_width
from streamclaim_spark.engine.merge_source import source_frame_for_deletes
from streamclaim_spark.engine.named_removal import ids_frame, kept_on_driver, taken_on_driver
from streamclaim_spark.engine.written_rows import as_state_rows
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.add_files import file_name, row_count
from streamclaim_spark.state.commit_rows import files_added_at
from streamclaim_spark.state.delta_txn import FILE_PATH, DeltaTransaction
from streamclaim_spark.state.schema import COLUMN_NAMES


def check_apart(removed_from: Sequence[Sequence[Any]]) -> None:
    """Raises unless no file may hold rows of two removals (an import's entries and PEL rows lie in
    different buckets): each removal rewrites its files from the snapshot, so a file two rewrote would
    keep only one's change."""
    seen: set[str] = set()
    for files in removed_from:
        paths = {str(file.path()) for file in files}
        if paths & seen:
            raise InvalidArgumentError("a plan's removals must lie in different files: give one Removal per bucket")
        seen |= paths


def remove_rows(
    spark: SparkSession, txn: DeltaTransaction, removal: Removal, files: Sequence[Any], rows_per_file: int
) -> tuple[list[Any], list[Any]]:
    """The ``files`` (those that may hold its rows) ``removal`` removes rows from, and the files written
    in place of those it takes only some rows of; sets ``removal.removed``, the removed files' rows less
    the rows written back, and for PEL rows found on the driver ``removal.removed_owners``."""
    emptied = _emptied(spark, txn, removal, files)
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
    # The owners of the rows taken from the files read (found on the driver), and of the files dropped unread.
    read_owners = on_driver.owners if on_driver is not None else ({} if not unread else None)
    dropped_owners = _owners_of_dropped(emptied.values())
    one_group = removal.kind == C.KIND_PENDING and len(removal.partitions) == 1
    if one_group and read_owners is not None and dropped_owners is not None:
        owners = _summed(read_owners, dropped_owners)
        # Counted rows that are not the removed ones (a dropped file holding other rows) count nothing.
        removal.removed_owners = owners if sum(owners.values()) == removal.removed else None
    return gone, written


def _summed(left: dict[str | None, int], right: dict[str | None, int]) -> dict[str | None, int]:
    return {owner: left.get(owner, 0) + right.get(owner, 0) for owner in {*left, *right}}


def _with_held_ids_as_rows(spark: SparkSession, removal: Removal) -> Removal:
    """``removal`` with the IDs it holds on the driver as its ``rows``, for Spark's join (itself when it
    holds none there)."""
    if removal.ids is None:
        return removal
    rows = ids_frame(spark, removal.partitions[0], removal.ids.ms, removal.ids.seq)
    return replace(removal, rows=rows, ids=None)


def _emptied(
    spark: SparkSession, txn: DeltaTransaction, removal: Removal, files: Sequence[Any]
) -> dict[str, FileBounds]:
    """The paths of ``files`` the removal takes every row of, by its ``empties`` test, with their
    statistics: dropped unread. Only files the commit of ``removal.written_at`` added qualify (their
    statistics are in its log entry), with no deletion vector now (a file's rows never change under its
    name otherwise)."""
    if removal.empties is None or removal.written_at is None or not files:
        return {}
    written = files_added_at(spark, txn.path, removal.written_at)
    return {
        path: bounds
        for file in files
        if file.deletionVector() is None
        and (bounds := written.get(path := str(file.path()))) is not None
        and removal.empties(bounds)
    }


def _owners_of_dropped(dropped: Iterable[FileBounds]) -> dict[str | None, int] | None:
    """How many rows each owner holds in files dropped unread, from their statistics; None when one
    holds more than one owner's rows (reading it would undo the point of dropping it unread)."""
    owners: dict[str | None, int] = {}
    for bounds in dropped:
        owner = bounds.low.get(C.OWNER)
        if owner is None or not bounds.only(C.OWNER, owner):
            return None
        owners[owner] = owners.get(owner, 0) + bounds.rows
    return owners


def removal_query(removal: Removal) -> FileQuery:
    """The files ``removal``'s rows may lie in: its buckets, its partitions and its IDs' range."""
    kinds = (removal.kind,)
    return FileQuery(removal.partitions, kinds, removal.low, removal.high, every_partition_named=True)


# Up to this many named IDs of one partition are hashed once and sent to the rewrite's tasks (a
# broadcast anti join on the two ID columns, ~40 MB of driver memory per million): the files' rows are
# then read and written in one stage, with no shuffle. 1M IDs of a bulk XACK: the rewrite 1.85-2.6 s
# -> 1.2-1.5 s warm (CHANGELOG.md, "A bulk acknowledgement without a shuffle"). More, or IDs of
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
    (CHANGELOG.md, "The files holding the IDs")."""
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


def removal_deletes(removal: Removal) -> DataFrame:
    """``removal`` as MERGE source rows that delete its rows (a plan that commits as a MERGE)."""
    if removal.every_row or removal.ids is not None:
        raise InvalidArgumentError("a removal of every row, or of IDs held on the driver, commits only as files")
    keys = removal.rows.select(C.PARTITION_ID, F.lit(removal.kind).alias(C.ROW_KIND), C.ID_MS, C.ID_SEQ)
    return source_frame_for_deletes(keys)

"""The table at a version read over the files kept on the driver, without Delta's log state.

Delta plans a read of a snapshot by a Spark query over its log state, which it rebuilds for every new
version: a command's first read after any commit paid 0.25-0.4 s for it on a test-sized store (XRANGE
0.67-0.86 s after an XADD, 0.42-0.44 s when repeated; CHANGELOG.md, "Reads over the kept
files"). Here the files come from ``logged_files`` (the commits since the kept version, read on the
driver) and Delta builds the relation over exactly those ``AddFile``s (``DeltaLog.createDataFrame``,
the relation its own MERGE reads touched files with): the same rows, deletion vectors and column
mapping handled by Delta, the partition filter applied on the driver. Files the query cannot hold are
left out by their statistics here (``FileQuery.may_hold``), as Delta's data skipping would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.state.delta_io import delta_log, is_connect
from streamclaim_spark.state.logged_files import LoggedFile, files_at
from streamclaim_spark.state.scala_seqs import scala_seq


def logged_table(
    spark: SparkSession, table_path: str, version: int | None, queries: Sequence[FileQuery]
) -> DataFrame | None:
    """The table at ``table_path`` as of ``version``, over its kept files that one of ``queries`` may
    hold. None where Delta's own read must answer (``kept_files_at``)."""
    kept = _kept(spark, table_path, version)
    if kept is None:
        return None
    log, snapshot, files = kept
    jvm = spark._jvm
    assert jvm is not None
    chosen = [file.add_file(jvm) for file in _held(files, queries)]
    relation = log.createDataFrame(snapshot, scala_seq(jvm, chosen), False, jvm.scala.Option.empty())
    return DataFrame(relation, spark)


def kept_files_at(
    spark: SparkSession, table_path: str, version: int | None, queries: Sequence[FileQuery] | None
) -> list[LoggedFile] | None:
    """The kept files of the table at ``version`` that one of ``queries`` may hold (by bucket and
    statistics; None: every file). None where Delta's own listing must answer: Spark Connect, no version
    pinned, or a version other than the newest one the process has loaded (time travel)."""
    kept = _kept(spark, table_path, version)
    if kept is None:
        return None
    return kept[2] if queries is None else _held(kept[2], queries)


def _kept(spark: SparkSession, table_path: str, version: int | None) -> tuple[Any, Any, list[LoggedFile]] | None:
    """The table's Delta log, its snapshot at ``version`` and its kept files there, or None.

    The listing of the log's snapshot last asked for is remembered per table: while the log still holds
    that same snapshot object (one ``equals``, identity for Delta's ``Snapshot``), its files are the
    same. Checking the kept files against the log segment (``files_at``) took ~20 py4j round trips, and
    a batch's commands ask for the same version's files a dozen times.
    """
    if is_connect(spark) or version is None:
        return None
    log = delta_log(spark, table_path)
    snapshot = log.unsafeVolatileSnapshot()
    last = _LAST_LISTED.get(table_path)
    if last is not None and last[0] == version and last[2] == snapshot:
        return last[1], last[2], last[3]
    if int(snapshot.version()) != version:
        return None
    files = files_at(spark, table_path, snapshot)
    if files is None:
        return None
    _LAST_LISTED[table_path] = (version, log, snapshot, files)
    if len(_LAST_LISTED) > LAST_LISTED_TABLES:
        _LAST_LISTED.pop(next(iter(_LAST_LISTED)), None)
    return log, snapshot, files


# Per table: (version, DeltaLog, Snapshot, files) of the last listing (``_kept``); a few tables' worth.
_LAST_LISTED: dict[str, tuple[int, Any, Any, list[LoggedFile]]] = {}
LAST_LISTED_TABLES = 64


def _held(files: Sequence[LoggedFile], queries: Sequence[FileQuery]) -> list[LoggedFile]:
    return [file for file in files if any(query.may_hold(file.bucket, file.bounds) for query in queries)]

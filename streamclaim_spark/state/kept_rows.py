"""A few columns of the rows a query names, read on the driver from the kept files, without a Spark job.

A query over the kept files (``logged_table``) still plans and runs a Spark job, and a read by time
travel rebuilds Delta's log state for the version first. A reader whose rows lie in a few files and end
on the driver anyway (a streaming micro-batch's rows, a check that no pending row lies past a cursor)
reads those files' columns by pyarrow instead (``driver_files``), the files chosen by their statistics
as ``FileQuery`` chooses them. The caller filters the rows: a file holds other partitions' rows too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.partitions import APART_PREFIX
from streamclaim_spark.state.arrow_schema import arrow_schema_of, in_schema
from streamclaim_spark.state.driver_files import each_on_driver, readable_on_driver
from streamclaim_spark.state.logged_files import LoggedFile
from streamclaim_spark.state.logged_table import kept_files_at

T = TypeVar("T")


def kept_rows_at(
    spark: SparkSession,
    table_path: str,
    version: int | None,
    queries: Sequence[FileQuery],
    columns: Sequence[str],
    max_rows: int | None = None,
) -> pa.Table | None:
    """``columns`` (the state table's types) of every row of the files one of ``queries`` may hold at
    ``version``, in one table. None where Spark must read them: the files are not kept for ``version``
    (Spark Connect, time travel: ``kept_files_at``), one has a deletion vector, or (with ``max_rows``)
    they hold more rows, or a file's count is unknown."""
    tables = each_kept_file(spark, table_path, version, queries, columns, lambda table: table, max_rows)
    if tables is None:
        return None
    return pa.concat_tables(tables) if tables else arrow_schema_of(columns).empty_table()


def each_kept_file(
    spark: SparkSession,
    table_path: str,
    version: int | None,
    queries: Sequence[FileQuery],
    columns: Sequence[str],
    consume: Callable[[pa.Table], T],
    max_rows: int | None = None,
    threads: int = 1,
) -> list[T] | None:
    """``consume`` of ``columns`` (the state table's types) of each file one of ``queries`` may hold at
    ``version``, one file at a time per thread (``driver_files.each_on_driver``); None where
    ``kept_rows_at`` would be."""
    files = kept_files_at(spark, table_path, version, queries)
    if files is None:
        return None
    if max_rows is not None and (
        any(file.bounds is None for file in files) or sum(file.bounds.rows for file in files if file.bounds) > max_rows
    ):
        return None
    return _each_file(spark, table_path, files, columns, consume, threads)


def every_head_at(spark: SparkSession, table_path: str, version: int | None, columns: Sequence[str]) -> pa.Table | None:
    """``columns`` of every stream and group head at ``version``, read from the ``h`` files on the driver
    (heads and consumers only: a fleet's 10,000 groups make a few MB). A query of them through Spark
    took 2 jobs and, on a version not read yet, Delta's log state rebuilt for it: a streaming micro-batch
    that selects its streams by a pattern paid it every batch. None where ``kept_rows_at`` would be."""
    files = kept_files_at(spark, table_path, version, None)
    if files is None:
        return None
    apart = [file for file in files if file.bucket.startswith(APART_PREFIX)]
    rows = columns_of(spark, table_path, apart, [C.ROW_KIND, *(name for name in columns if name != C.ROW_KIND)])
    if rows is None:
        return None
    heads = rows.filter(pc.is_in(rows.column(C.ROW_KIND), value_set=pa.array(C.HEAD_KINDS, pa.string())))
    return heads.select(list(columns))


def columns_of(
    spark: SparkSession, table_path: str, files: Sequence[LoggedFile], columns: Sequence[str]
) -> pa.Table | None:
    """``columns`` of every row of ``files`` (kept files, ``kept_files_at``) in one table of the state
    table's types; None when a file has a deletion vector."""
    tables = _each_file(spark, table_path, files, columns, lambda table: table)
    if tables is None:
        return None
    return pa.concat_tables(tables) if tables else arrow_schema_of(columns).empty_table()


def _each_file(
    spark: SparkSession,
    table_path: str,
    files: Sequence[LoggedFile],
    columns: Sequence[str],
    consume: Callable[[pa.Table], T],
    threads: int = 1,
) -> list[T] | None:
    """``consume`` of ``columns`` of each of ``files`` (kept files) in the state table's types; None when
    a file has a deletion vector."""
    if not readable_on_driver(spark, files):
        return None
    schema = arrow_schema_of(columns)
    return each_on_driver(spark, table_path, files, columns, lambda table: consume(in_schema(table, schema)), threads)

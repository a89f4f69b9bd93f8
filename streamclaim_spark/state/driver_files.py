"""Data files of the state table read on the driver by pyarrow, without a Spark job.

A commit of files reads a few files whole (the small ``h`` files of the heads it rewrites) or a few
columns of many (the key columns of the PEL files a bulk XACK reaches, to count the rows it takes).
A Spark read of them costs a job (0.19-0.25 s for two head files; 1.1-1.5 s to count 1M PEL rows by
file); pyarrow reads a local file's columns directly. Files of other file systems (S3A, ABFS, GCS,
HDFS) are first copied to a local temporary folder through the table's Hadoop file system
(state/hadoop_files.py; a Parquet file's bytes through py4j took 0.6 s for 4 MB). Classic sessions
only, and never a file with a deletion vector: its hidden rows need Delta's read (the callers fall back to Spark then).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state.add_files import data_file_path
from streamclaim_spark.state.arrow_schema import read_columns
from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.hadoop_files import download, is_local, local_path
from streamclaim_spark.state.logged_files import LoggedFile

T = TypeVar("T")

# Files copied from another file system at once: each copy waits on the network (a request of its own),
# so a command's few files come in the time of one; memory still holds only this many.
COPY_THREADS = 4


def readable_on_driver(spark: SparkSession, files: Sequence[Any]) -> bool:
    """True when ``read_on_driver`` reads ``files`` (``AddFile``s, or ``LoggedFile``s: the same facts from
    the log's entry, without a py4j round trip a file): a classic session, no deletion vector, and the
    placement's ``driver_bytes`` not passed (core/placement.py)."""
    if any(_has_deletion_vector(file) for file in files):
        return False
    stored_bytes = sum(stored_size(file) for file in files)
    return placement().on_driver(Work.READ_FILES, classic=not is_connect(spark), stored_bytes=stored_bytes)


def stored_path(file: Any) -> str:
    """The log's path of a data file (an ``AddFile`` or a ``LoggedFile``): relative and URL-encoded."""
    return file.path if isinstance(file, LoggedFile) else str(file.path())


def stored_size(file: Any) -> int:
    return file.size if isinstance(file, LoggedFile) else int(file.size())


def _has_deletion_vector(file: Any) -> bool:
    return file.deletion_vector if isinstance(file, LoggedFile) else file.deletionVector() is not None


def _on_disk(jvm: Any, table_path: str, path: str) -> str | None:
    """The driver's own path of the data file at ``path`` (``data_file_path``), None when it lies on
    another file system. A file under the table's root is local when the root is: the root is parsed
    once, where each new file's path cost four py4j calls (hadoop_files._parsed)."""
    root = table_path.rstrip("/")
    if path.startswith(root + "/") and is_local(jvm, table_path):
        return local_path(jvm, table_path).rstrip("/") + path[len(root) :]
    return local_path(jvm, path) if is_local(jvm, path) else None


def read_on_driver(
    spark: SparkSession, table_path: str, files: Sequence[Any], columns: Sequence[str] | None = None
) -> list[pa.Table]:
    """``columns`` (None: all) of each of ``files``, as stored in the file (a column the file predates is
    absent), in the order given. ``readable_on_driver`` must hold."""
    return each_on_driver(spark, table_path, files, columns, lambda table: table)


@contextlib.contextmanager
def _no_folder() -> Iterator[str]:
    yield ""


def each_on_driver(
    spark: SparkSession,
    table_path: str,
    files: Sequence[Any],
    columns: Sequence[str] | None,
    consume: Callable[[pa.Table], T],
    threads: int = 1,
) -> list[T]:
    """``consume`` of ``columns`` of each of ``files`` (as ``read_on_driver`` reads them), in the order
    given, one file at a time per thread, by up to ``threads`` threads (pyarrow reads outside Python's
    lock): memory holds a few files whatever their number. A file of another file system is first copied
    to a local folder (state/hadoop_files.py) and deleted once consumed. ``readable_on_driver`` must hold."""
    jvm = spark._jvm
    assert jvm is not None
    wanted = list(columns) if columns is not None else None
    paths = [data_file_path(table_path, stored_path(file)) for file in files]
    on_disk = [_on_disk(jvm, table_path, path) for path in paths]
    # A folder for copies only where a file needs one: making and removing it took ~3 ms a read.
    with tempfile.TemporaryDirectory(prefix="streamclaim-files-") if None in on_disk else _no_folder() as local_folder:

        def read(position: int) -> T:
            path, disk_path = paths[position], on_disk[position]
            if disk_path is not None:
                return consume(read_columns(disk_path, wanted))
            local = f"{local_folder}/{position}.parquet"
            download(spark, path, local, stored_size(files[position]))
            try:
                return consume(read_columns(local, wanted))
            finally:
                os.remove(local)

        if None in on_disk:
            threads = max(threads, COPY_THREADS)
        if threads <= 1 or len(paths) <= 1:
            return [read(position) for position in range(len(paths))]
        with ThreadPoolExecutor(max_workers=min(threads, len(paths))) as pool:
            return list(pool.map(read, range(len(paths))))

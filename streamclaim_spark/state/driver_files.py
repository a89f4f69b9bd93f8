"""Data files of the state table read on the driver by pyarrow, without a Spark job.

A commit of files reads a few files whole (the small ``h`` files of the heads it rewrites) or a few
columns of many (the key columns of the PEL files a bulk XACK reaches, to count the rows it takes).
A Spark read of them costs a job (0.19-0.25 s for two head files; 1.1-1.5 s to count 1M PEL rows by
file); pyarrow reads a local file's columns directly. Files of other file systems (S3A) are first
copied to a local temporary folder through Hadoop's file system with the session's settings (a
Parquet file's bytes through py4j took 0.6 s for 4 MB). Classic sessions only, and never a file with
a deletion vector: its hidden rows need Delta's read (the callers fall back to Spark then).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from streamclaim_spark.state.arrow_schema import read_columns
from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.delta_txn import data_file_path

T = TypeVar("T")


def readable_on_driver(spark: SparkSession, files: Sequence[Any]) -> bool:
    """True when ``read_on_driver`` can read ``files`` (``AddFile``s): a classic session, no deletion vector."""
    return not is_connect(spark) and all(file.deletionVector() is None for file in files)


def read_on_driver(
    spark: SparkSession, table_path: str, files: Sequence[Any], columns: Sequence[str] | None = None
) -> list[pa.Table]:
    """``columns`` (None: all) of each of ``files``, as stored in the file (a column the file predates is
    absent), in the order given. ``readable_on_driver`` must hold."""
    return each_on_driver(spark, table_path, files, columns, lambda table: table)


def each_on_driver(
    spark: SparkSession,
    table_path: str,
    files: Sequence[Any],
    columns: Sequence[str] | None,
    consume: Callable[[pa.Table], T],
    threads: int = 1,
) -> list[T]:
    """``consume`` of ``columns`` of each of ``files`` (as ``read_on_driver`` reads them), in the order
    given, one file at a time per thread: memory holds a few files whatever their number. Local files
    are read by up to ``threads`` threads (pyarrow reads outside Python's lock); others are copied to a
    local folder one by one and consumed as they come. ``readable_on_driver`` must hold."""
    jvm = spark._jvm
    assert jvm is not None
    wanted = list(columns) if columns is not None else None
    hadoop_conf = None
    results: dict[int, T] = {}
    local_files: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(prefix="streamclaim-files-") as local_folder:
        for position, file in enumerate(files):
            path = jvm.org.apache.hadoop.fs.Path(data_file_path(table_path, str(file.path())))
            uri = path.toUri()
            if uri.getScheme() in (None, "file"):
                local_files.append((position, str(uri.getPath())))
                continue
            # Copied through Hadoop (no checksum file beside it: the raw local file system), with the
            # session's file system settings; consumed and deleted before the next one is copied.
            if hadoop_conf is None:
                hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
            local = f"{local_folder}/{position}.parquet"
            file_system = path.getFileSystem(hadoop_conf)
            file_system.copyToLocalFile(False, path, jvm.org.apache.hadoop.fs.Path(f"file://{local}"), True)
            results[position] = consume(read_columns(local, wanted))
            os.remove(local)
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(local_files)))) as pool:
            consumed = pool.map(lambda item: consume(read_columns(item[1], wanted)), local_files)
            results.update(zip((position for position, _ in local_files), consumed, strict=True))
    return [results[position] for position in range(len(files))]

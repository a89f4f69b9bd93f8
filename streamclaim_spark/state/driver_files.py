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

import tempfile
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.delta_txn import data_file_path
from streamclaim_spark.state.schema import STATE_SCHEMA

# The state table's columns as Arrow types.
ARROW_SCHEMA = to_arrow_schema(STATE_SCHEMA)


def arrow_schema_of(columns: Sequence[str]) -> pa.Schema:
    """The state table's ``columns``, in the order given, as an Arrow schema."""
    return pa.schema([ARROW_SCHEMA.field(name) for name in columns])


def in_schema(table: pa.Table, schema: pa.Schema = ARROW_SCHEMA) -> pa.Table:
    """``table``'s columns in ``schema``'s types and order; a column it lacks (a file that predates it, rows
    built on the driver with a few columns) as nulls."""
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def readable_on_driver(spark: SparkSession, files: Sequence[Any]) -> bool:
    """True when ``read_on_driver`` can read ``files`` (``AddFile``s): a classic session, no deletion vector."""
    return not is_connect(spark) and all(file.deletionVector() is None for file in files)


def read_on_driver(
    spark: SparkSession, table_path: str, files: Sequence[Any], columns: Sequence[str] | None = None
) -> list[pa.Table]:
    """``columns`` (None: all) of each of ``files``, as stored in the file (a column the file predates is
    absent), in the order given. ``readable_on_driver`` must hold."""
    jvm = spark._jvm
    assert jvm is not None
    wanted = list(columns) if columns is not None else None
    hadoop_conf = None
    tables: list[pa.Table] = []
    with tempfile.TemporaryDirectory(prefix="streamclaim-files-") as local_folder:
        for position, file in enumerate(files):
            path = jvm.org.apache.hadoop.fs.Path(data_file_path(table_path, str(file.path())))
            uri = path.toUri()
            if uri.getScheme() in (None, "file"):
                local = str(uri.getPath())
            else:  # copied through Hadoop (no checksum file beside it: the raw local file system)
                if hadoop_conf is None:  # the session's file system settings too
                    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
                local = f"{local_folder}/{position}.parquet"
                file_system = path.getFileSystem(hadoop_conf)
                file_system.copyToLocalFile(False, path, jvm.org.apache.hadoop.fs.Path(f"file://{local}"), True)
            tables.append(_read(local, wanted))
    return tables


def _read(local: str, columns: list[str] | None) -> pa.Table:
    """A local Parquet file's ``columns`` that it has (all when None)."""
    parquet = pq.ParquetFile(local)
    if columns is None:
        return parquet.read()
    present = set(parquet.schema_arrow.names)
    return parquet.read(columns=[name for name in columns if name in present])

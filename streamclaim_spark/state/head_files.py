"""Head and consumer rows read from their own files on the driver, without a Spark job.

A commit of files rewrites the few small ``h`` files holding the heads and consumers it writes, and
overlays them on the driver (engine/file_commit.py); reading them through Spark as Arrow took a job:
0.19-0.25 s for a stream's and a group's head files. pyarrow reads them on the driver instead
(state/driver_files.py, so any store Spark reads, S3A included): the same rows in 0.11 s when their
bytes came through Hadoop's file system (CHANGELOG.md, "The files holding the IDs"), less since
local files are read directly. Classic sessions only; a file with a deletion vector sends the read
back to Spark (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import Need
from streamclaim_spark.core.partitions import bucket_of as bucket_of_row
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.state.add_files import bucket_of
from streamclaim_spark.state.arrow_schema import ARROW_SCHEMA, in_schema
from streamclaim_spark.state.driver_files import read_on_driver, readable_on_driver
from streamclaim_spark.state.logged_files import LoggedFile
from streamclaim_spark.state.logged_table import kept_files_at


def driver_rows(spark: SparkSession, table_path: str, files: Sequence[Any]) -> pa.Table | None:
    """Every row of ``files`` (``AddFile``s or ``LoggedFile``s of the table at ``table_path``) in the state
    table's schema, read on the driver; None when one has a deletion vector (its hidden rows need Delta's
    read)."""
    tables = driver_tables(spark, table_path, files)
    if tables is None:
        return None
    return pa.concat_tables(tables) if tables else ARROW_SCHEMA.empty_table()


def driver_tables(spark: SparkSession, table_path: str, files: Sequence[Any]) -> list[pa.Table] | None:
    """The rows of each of ``files`` in the state table's schema, a table per file in their order, read
    on the driver; None when one has a deletion vector."""
    if not readable_on_driver(spark, files):
        return None
    tables = read_on_driver(spark, table_path, files)
    buckets = [file.bucket if isinstance(file, LoggedFile) else bucket_of(file) for file in files]
    return [_in_state_schema(table, bucket) for table, bucket in zip(tables, buckets, strict=True)]


def head_rows_at(
    spark: SparkSession, table_path: str, version: int | None, keys: Sequence[tuple[str, str]]
) -> list[dict[str, Any]] | None:
    """The head rows ``keys`` names (partition ID, row kind) as of ``version``, read from their ``h``
    files on the driver, the files listed from those kept for the log (state/logged_files.py): no Spark
    job. A bulk XACK's stream and group heads through the snapshot's query took three jobs, 0.45-0.7 s;
    a listing by Delta's scan one, 0.2 s, or 0.8 s as the first after a commit (CHANGELOG.md,
    "Files listed on the driver"). None where Spark's read must answer: Spark Connect, a version other
    than the log's newest loaded one, a deletion vector."""
    logged = kept_files_at(spark, table_path, version, None)
    if logged is None:
        return None
    buckets = {bucket_of_row(partition, kind) for partition, kind in keys}
    rows = driver_rows(spark, table_path, [file for file in logged if file.bucket in buckets])
    if rows is None:
        return None
    wanted = set(keys)
    stored = zip(rows.column(C.PARTITION_ID).to_pylist(), rows.column(C.ROW_KIND).to_pylist(), strict=True)
    found: list[dict[str, Any]] = rows.filter(pa.array([key in wanted for key in stored], pa.bool_())).to_pylist()
    return found


def head_rows_for(
    spark: SparkSession, table_path: str, version: int | None, needs: Sequence[Need]
) -> list[dict[str, Any]] | None:
    """The stream, group and consumer rows ``needs`` name as of ``version`` (``head_rows_at``: their
    ``h`` files read on the driver), every consumer of the named groups included; None where Spark's
    read must answer."""
    keys: set[tuple[str, str]] = set()
    owners: set[tuple[str, str]] = set()  # (partition, stream): a row of a colliding partition ID is not ours
    for need in needs:
        keys.add((stream_partition(need.key), C.KIND_STREAM))
        owners.add((stream_partition(need.key), need.key))
        for name in need.groups:
            partition = group_partition(need.key, name)
            owners.add((partition, need.key))
            keys.add((partition, C.KIND_GROUP))
            if need.consumer is not None:
                keys.add((partition, C.KIND_CONSUMER))
    rows = head_rows_at(spark, table_path, version, sorted(keys))
    return None if rows is None else [row for row in rows if (row[C.PARTITION_ID], row[C.STREAM]) in owners]


def _in_state_schema(table: pa.Table, bucket: str) -> pa.Table:
    """``table`` (one data file) in the state table's schema, its bucket from the file's partition value."""
    rows = in_schema(table)
    position = ARROW_SCHEMA.get_field_index(C.BUCKET)
    return rows.set_column(position, ARROW_SCHEMA.field(position), pa.array([bucket] * rows.num_rows, pa.string()))

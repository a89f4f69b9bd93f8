"""Head and consumer rows read from their own files on the driver, without a Spark job.

A commit of files rewrites the few small ``h`` files holding the heads and consumers it writes, and
overlays them on the driver (engine/file_commit.py); reading them through Spark as Arrow took a job:
0.19-0.25 s for a stream's and a group's head files. pyarrow reads them on the driver instead
(state/driver_files.py, so any store Spark reads, S3A included): the same rows in 0.11 s when their
bytes came through Hadoop's file system (docs/BENCHMARKS.md, "The files holding the IDs"), less since
local files are read directly. Classic sessions only; a file with a deletion vector sends the read
back to Spark (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from streamclaim_spark.core import constants as C
from streamclaim_spark.state.delta_txn import bucket_of
from streamclaim_spark.state.driver_files import read_on_driver, readable_on_driver
from streamclaim_spark.state.schema import STATE_SCHEMA

# The state table's columns as Arrow types.
ARROW_SCHEMA = to_arrow_schema(STATE_SCHEMA)


def driver_rows(spark: SparkSession, table_path: str, files: Sequence[Any]) -> pa.Table | None:
    """Every row of ``files`` (``AddFile``s of the table at ``table_path``) in the state table's schema,
    read on the driver; None when one has a deletion vector (its hidden rows need Delta's read)."""
    if not readable_on_driver(spark, files):
        return None
    tables = read_on_driver(spark, table_path, files)
    rows = [_in_state_schema(table, bucket_of(file)) for table, file in zip(tables, files, strict=True)]
    return pa.concat_tables(rows) if rows else ARROW_SCHEMA.empty_table()


def _in_state_schema(table: pa.Table, bucket: str) -> pa.Table:
    """``table`` (one data file) with every column of the state table in its order: the bucket from the
    file's partition value, a column the file predates as nulls."""
    columns = []
    for field in ARROW_SCHEMA:
        if field.name == C.BUCKET:
            columns.append(pa.array([bucket] * table.num_rows, field.type))
        elif field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)

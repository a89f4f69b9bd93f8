"""The state table's columns as Arrow types, a data file's columns read, and tables brought to them.

The driver reads and writes the state table's Parquet files by pyarrow (driver_files.py,
driver_writes.py); both bring what a file holds to the table's schema here, so a file that predates
a column reads as if written today.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import to_arrow_schema

from streamclaim_spark.core import constants as C
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


# The columns a data file stores: the bucket is the Delta partition, kept in the file's folder name.
DATA_SCHEMA = pa.schema([field for field in ARROW_SCHEMA if field.name != C.BUCKET])


def read_columns(local: str, columns: Sequence[str] | None) -> pa.Table:
    """A local Parquet file's ``columns`` that it has (all when None), as stored."""
    parquet = pq.ParquetFile(local)
    if columns is None:
        return parquet.read()
    present = set(parquet.schema_arrow.names)
    return parquet.read(columns=[name for name in columns if name in present])

"""Pages read from Redis, staged in local Parquet files so the import's memory stays bounded.

Each kind of row (entries, live IDs, PEL rows) goes to one Parquet file, in row groups of about a page.
A stream that is read again (it changed while it was paged) gets a higher read number; only the rows of
its last read are committed (``accepted``). The commit reads the files with Spark (``frame``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.importer.redis_reader import PendingRow
from streamclaim_spark.state.schema import FIELD_PAIR

READ = "_read"
ENTRIES, LIVE_IDS, PENDING = "entries", "live_ids", "pending"

_KEY_FIELDS = [
    StructField(C.PARTITION_ID, StringType(), nullable=False),
    StructField(C.STREAM, StringType(), nullable=False),
    StructField(READ, IntegerType(), nullable=False),
    StructField(C.ID_MS, LongType(), nullable=False),
    StructField(C.ID_SEQ, LongType(), nullable=False),
]
SCHEMAS = {
    ENTRIES: StructType([*_KEY_FIELDS, StructField(C.FIELDS, ArrayType(FIELD_PAIR))]),
    LIVE_IDS: StructType(_KEY_FIELDS),
    PENDING: StructType(
        [
            *_KEY_FIELDS,
            StructField(C.GROUP, StringType(), nullable=False),
            StructField(C.OWNER, StringType()),
            StructField(C.DELIVERY_TIME_MS, LongType()),
            StructField(C.DELIVERY_COUNT, LongType()),
        ]
    ),
}
_PAIR = pa.struct([pa.field("field", pa.binary()), pa.field("value", pa.binary())])
_ARROW_KEYS = [
    pa.field(C.PARTITION_ID, pa.string(), nullable=False),
    pa.field(C.STREAM, pa.string(), nullable=False),
    pa.field(READ, pa.int32(), nullable=False),
    pa.field(C.ID_MS, pa.int64(), nullable=False),
    pa.field(C.ID_SEQ, pa.int64(), nullable=False),
]
_ARROW = {
    ENTRIES: pa.schema([*_ARROW_KEYS, pa.field(C.FIELDS, pa.list_(_PAIR))]),
    LIVE_IDS: pa.schema(_ARROW_KEYS),
    PENDING: pa.schema(
        [
            *_ARROW_KEYS,
            pa.field(C.GROUP, pa.string(), nullable=False),
            pa.field(C.OWNER, pa.string()),
            pa.field(C.DELIVERY_TIME_MS, pa.int64()),
            pa.field(C.DELIVERY_COUNT, pa.int64()),
        ]
    ),
}


class Staging:
    """The import's staged rows under ``folder`` (a new temporary folder by default); ``close`` removes it.

    Implements reading.Sink: ``entries``, ``live_ids`` and ``pending`` take a page of one stream.
    """

    def __init__(self, folder: str | None = None, rows_per_group: int = 10_000) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="streamclaim-import-", dir=folder))
        self.rows_per_group = rows_per_group
        self.reads: dict[str, int] = {}
        self.rows = dict.fromkeys(SCHEMAS, 0)
        self.payload_bytes = 0  # the staged entries' field names and values, every read's
        self._writers: dict[str, pq.ParquetWriter] = {}
        # Column buffers per kind (pyarrow builds arrays from lists ~5x faster than from row dicts); an
        # entry's pairs are flat field and value lists with list offsets.
        self._columns: dict[str, dict[str, list[Any]]] = {kind: _empty(kind) for kind in SCHEMAS}

    # --- reading.Sink ---------------------------------------------------------------------------

    def entries(self, key: str, page: Sequence[tuple[StreamId, list[bytes]]]) -> None:
        columns = self._columns[ENTRIES]
        fields, values, offsets = columns["_fields"], columns["_values"], columns["_offsets"]
        for _, flat in page:
            fields.extend(flat[0::2])
            values.extend(flat[1::2])
            offsets.append(len(fields))
        self._add(ENTRIES, key, stream_partition(key), [entry_id for entry_id, _ in page], {})

    def live_ids(self, key: str, page: Sequence[StreamId]) -> None:
        self._add(LIVE_IDS, key, stream_partition(key), page, {})

    def pending(self, key: str, group: str, page: Sequence[PendingRow]) -> None:
        extra: dict[str, list[Any]] = {
            C.GROUP: [group] * len(page),
            C.OWNER: [row[1] for row in page],
            C.DELIVERY_TIME_MS: [row[2] for row in page],
            C.DELIVERY_COUNT: [row[3] for row in page],
        }
        self._add(PENDING, key, group_partition(key, group), [row[0] for row in page], extra)

    def discard(self, key: str) -> None:
        self.reads[key] = self.reads.get(key, 1) + 1

    # --- the commit's side ----------------------------------------------------------------------

    def frame(self, spark: SparkSession, kind: str) -> DataFrame:
        """The staged rows of ``kind`` from each stream's last read, without the read number."""
        self._flush(kind, final=True)
        schema = SCHEMAS[kind]
        path = self.root / f"{kind}.parquet"
        if not path.exists():
            return spark.createDataFrame([], schema).drop(READ)
        return spark.read.schema(schema).parquet(path.as_uri()).where(self._accepted()).drop(READ)

    def table(self, kind: str) -> pa.Table:
        """``frame`` on the driver: the staged rows of ``kind`` from each stream's last read, as Arrow."""
        self._flush(kind, final=True)
        path = self.root / f"{kind}.parquet"
        if not path.exists():
            return _ARROW[kind].empty_table().drop_columns([READ])
        rows = pq.read_table(path, schema=_ARROW[kind])
        retried = {key: read for key, read in self.reads.items() if read > 1}
        if retried:
            keep = pc.invert(pc.is_in(rows[C.STREAM], value_set=pa.array(list(retried), pa.string())))
            for key, read in retried.items():
                keep = pc.or_(keep, pc.and_(pc.equal(rows[C.STREAM], key), pc.equal(rows[READ], read)))
            rows = rows.filter(keep)
        return rows.drop_columns([READ])

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def _accepted(self) -> Column:
        retried = {key: read for key, read in self.reads.items() if read > 1}
        if not retried:
            return F.lit(True)
        condition = ~F.col(C.STREAM).isin(*retried)
        for key, read in retried.items():
            condition = condition | ((F.col(C.STREAM) == key) & (F.col(READ) == read))
        return condition

    def _add(self, kind: str, key: str, partition: str, ids: Sequence[StreamId], extra: dict[str, list[Any]]) -> None:
        columns = self._columns[kind]
        count = len(ids)
        columns[C.PARTITION_ID].extend([partition] * count)
        columns[C.STREAM].extend([key] * count)
        columns[READ].extend([self.reads.get(key, 1)] * count)
        stored = [entry_id.stored() for entry_id in ids]
        columns[C.ID_MS].extend(ms for ms, _ in stored)
        columns[C.ID_SEQ].extend(seq for _, seq in stored)
        for name, values in extra.items():
            columns[name].extend(values)
        self.rows[kind] += count
        if len(columns[C.ID_MS]) >= self.rows_per_group:
            self._flush(kind)

    def _flush(self, kind: str, final: bool = False) -> None:
        columns = self._columns[kind]
        if columns[C.ID_MS]:
            if kind not in self._writers:
                self._writers[kind] = pq.ParquetWriter(self.root / f"{kind}.parquet", _ARROW[kind])
            table = _table(kind, columns)
            if kind == ENTRIES:
                pairs = pc.list_flatten(table[C.FIELDS])
                for part in ("field", "value"):
                    self.payload_bytes += pc.sum(pc.binary_length(pc.struct_field(pairs, part))).as_py() or 0
            self._writers[kind].write_table(table)
            self._columns[kind] = _empty(kind)
        if final and kind in self._writers:
            self._writers.pop(kind).close()


def _empty(kind: str) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [] for name in _ARROW[kind].names if name != C.FIELDS}
    if kind == ENTRIES:
        columns.update({"_fields": [], "_values": [], "_offsets": [0]})
    return columns


def _table(kind: str, columns: dict[str, list[Any]]) -> pa.Table:
    schema = _ARROW[kind]
    arrays = []
    for field in schema:
        if field.name == C.FIELDS:
            pairs = pa.StructArray.from_arrays(
                [pa.array(columns["_fields"], pa.binary()), pa.array(columns["_values"], pa.binary())],
                fields=list(_PAIR),
            )
            arrays.append(pa.ListArray.from_arrays(pa.array(columns["_offsets"], pa.int32()), pairs))
        else:
            arrays.append(pa.array(columns[field.name], field.type))
    return pa.Table.from_arrays(arrays, schema=schema)

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
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from streamclaim_spark import _constants as C
from streamclaim_spark.ids import StreamId, to_stored
from streamclaim_spark.partitions import group_partition, stream_partition
from streamclaim_spark.schema import FIELD_PAIR

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
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._buffers: dict[str, list[dict[str, Any]]] = {kind: [] for kind in SCHEMAS}

    # --- reading.Sink ---------------------------------------------------------------------------

    def entries(self, key: str, page: Sequence[tuple[StreamId, list[bytes]]]) -> None:
        base = self._base(key, stream_partition(key))
        self._add(
            ENTRIES,
            [
                {
                    **base,
                    **_id(entry_id),
                    C.FIELDS: [{"field": flat[i], "value": flat[i + 1]} for i in range(0, len(flat), 2)],
                }
                for entry_id, flat in page
            ],
        )

    def live_ids(self, key: str, page: Sequence[StreamId]) -> None:
        base = self._base(key, stream_partition(key))
        self._add(LIVE_IDS, [{**base, **_id(entry_id)} for entry_id in page])

    def pending(self, key: str, group: str, page: Sequence[tuple[StreamId, str, int, int]]) -> None:
        base = {**self._base(key, group_partition(key, group)), C.GROUP: group}
        self._add(
            PENDING,
            [
                {**base, **_id(entry_id), C.OWNER: owner, C.DELIVERY_TIME_MS: time, C.DELIVERY_COUNT: count}
                for entry_id, owner, time, count in page
            ],
        )

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

    def _base(self, key: str, partition: str) -> dict[str, Any]:
        return {C.PARTITION_ID: partition, C.STREAM: key, READ: self.reads.get(key, 1)}

    def _add(self, kind: str, rows: list[dict[str, Any]]) -> None:
        self._buffers[kind].extend(rows)
        self.rows[kind] += len(rows)
        if len(self._buffers[kind]) >= self.rows_per_group:
            self._flush(kind)

    def _flush(self, kind: str, final: bool = False) -> None:
        rows = self._buffers[kind]
        if rows:
            if kind not in self._writers:
                self._writers[kind] = pq.ParquetWriter(self.root / f"{kind}.parquet", _ARROW[kind])
            self._writers[kind].write_table(pa.Table.from_pylist(rows, schema=_ARROW[kind]))
            self._buffers[kind] = []
        if final and kind in self._writers:
            self._writers.pop(kind).close()


def _pairs(flat: list[bytes]) -> list[dict[str, bytes]]:
    return [{"field": flat[i], "value": flat[i + 1]} for i in range(0, len(flat), 2)]


def _id(entry_id: StreamId) -> dict[str, int]:
    return {C.ID_MS: to_stored(entry_id.ms), C.ID_SEQ: to_stored(entry_id.seq)}

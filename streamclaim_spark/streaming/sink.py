"""The ``streamclaim`` stream writer: each micro-batch appended as entries (XADD *), once.

Executors turn their rows into Arrow buffers (``write``); Spark's commit step gathers them on the
driver side, where ``commit`` appends them in one Delta commit that also records the batch ID as a
Delta transaction identifier (``txnAppId`` / ``txnVersion``). A replayed batch, whose ID is already
recorded, appends nothing: the check and the record are one commit, so no crash can add a batch twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from streamclaim_spark.fleet.bulk.arrow_append import append_table
from streamclaim_spark.state.delta_io import updated_snapshot
from streamclaim_spark.state.delta_txn import TXN_APP_ID, TXN_VERSION
from streamclaim_spark.streaming.driver import Linked
from streamclaim_spark.streaming.options import SinkOptions

if TYPE_CHECKING:
    from streamclaim_spark.fleet.bulk import BulkAppend
    from streamclaim_spark.store import StreamStore
    from streamclaim_spark.streaming.driver import DriverLink


@dataclass
class ArrowRows(WriterCommitMessage):
    """One task's rows, as an Arrow IPC stream."""

    payload: bytes
    rows: int

    def table(self) -> pa.Table:
        return pa.ipc.open_stream(self.payload).read_all()


def sink_app_id(sink_id: str) -> str:
    """The Delta transaction identifier of one sink (one checkpoint): batch IDs count per checkpoint."""
    return "streamclaim-sink-" + hashlib.sha256(sink_id.encode()).hexdigest()[:24]


def recorded_batch(store: StreamStore, app_id: str) -> int:
    """The last batch ID the state table records for ``app_id`` (-1: none)."""
    recorded = updated_snapshot(store.spark, store.state_path).transactions().get(app_id)
    return int(recorded.get()) if recorded.isDefined() else -1


def append_once(
    store: StreamStore, rows: DataFrame | pa.Table, options: SinkOptions, batch_id: int
) -> BulkAppend | None:
    """Appends ``rows`` as the sink's batch ``batch_id`` unless the store already holds that batch. Rows
    given as Arrow are made into entries on the driver where they can be (``arrow_append``)."""
    app_id = sink_app_id(options.sink_id)
    if recorded_batch(store, app_id) >= batch_id:
        return None
    session = store.session()
    session.conf.set(TXN_APP_ID, app_id)
    session.conf.set(TXN_VERSION, str(batch_id))
    try:
        if isinstance(rows, pa.Table):
            appended = (
                append_table(store.runner, options.stream, rows, options.stream_column) if not options.fields else None
            )
            if appended is not None:
                return appended
            rows = store.spark.createDataFrame(rows)
        if options.stream_column is not None:
            return store.append_streams(rows, options.stream_column, options.fields)
        assert options.stream is not None
        return store.append(options.stream, rows, options.fields)
    finally:
        session.conf.unset(TXN_APP_ID)
        session.conf.unset(TXN_VERSION)


class AppendWriter(Linked, DataSourceStreamArrowWriter):
    """Appends each micro-batch to the store as ``XADD *`` would, one commit per batch, once per batch ID."""

    def __init__(self, options: SinkOptions, link: DriverLink | None) -> None:
        super().__init__(options.path, link)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ArrowRows:
        sink = pa.BufferOutputStream()
        writer: pa.ipc.RecordBatchStreamWriter | None = None
        rows = 0
        for batch in iterator:
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is None:
            return ArrowRows(b"", 0)
        writer.close()
        return ArrowRows(sink.getvalue().to_pybytes(), rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tables = [m.table() for m in messages if isinstance(m, ArrowRows) and m.rows]
        if not tables:
            return
        append_once(self._store(), pa.concat_tables(tables), self.options, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was written: rows travel in the commit messages, and an aborted batch has none appended."""

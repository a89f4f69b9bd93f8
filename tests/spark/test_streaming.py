"""The ``streamclaim`` data source in real Structured Streaming queries on real Delta (docs/STREAMING.md).

A consumer group read from ``readStream`` delivers each micro-batch in one commit and acknowledges it
once Spark has committed it; a driver killed mid-run and restarted from its checkpoint loses nothing
and duplicates only the killed batch; the sink appends each batch once, whatever Spark replays.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadMaxRows

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import bucket_of, group_partition
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.fleet.bulk.arrow_append import append_table
from streamclaim_spark.state.tables import table_path
from streamclaim_spark.streaming import register, source
from streamclaim_spark.streaming.driver import DriverLink
from streamclaim_spark.streaming.options import sink_options, source_options
from streamclaim_spark.streaming.sink import AppendWriter, recorded_batch, sink_app_id
from streamclaim_spark.streaming.source import GroupReader
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.spark.test_concurrency import Worker
from tests.spark.test_file_commits import log_entry, state_version

pytestmark = pytest.mark.spark

EMPTY_PEL = [0, None, None, None]


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register(spark)


def group_stream(store: StreamStore, consumer: str, **options: Any) -> DataFrame:
    reader = (
        store.spark.readStream.format("streamclaim")
        .option("path", store.path)
        .option("group", "billing")
        .option("consumer", consumer)
    )
    for name, value in {"stream": "orders", **options}.items():
        if value is not None:
            reader = reader.option(name, value)
    return reader.load()


class Batches:
    """A ``foreachBatch`` function that keeps every batch's (stream, id, delivery_count) rows."""

    def __init__(self) -> None:
        self.rows: dict[int, list[tuple[str, str, int]]] = {}
        self._lock = threading.Lock()

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        rows = [(r["stream"], r["id"], r["delivery_count"]) for r in frame.collect()]
        with self._lock:
            self.rows[batch_id] = rows

    def ids(self) -> list[str]:
        return [entry_id for rows in self.rows.values() for _, entry_id, _ in rows]


def run_available_now(frame: DataFrame, sink: Batches, checkpoint: Path) -> None:
    query = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query.trigger(availableNow=True).start().awaitTermination()


def fill(spark: SparkSession, store: StreamStore, count: int, stream: str = "orders") -> list[str]:
    """``count`` entries in one commit, and the group ``billing`` from the start; returns their IDs."""
    added = store.append(stream, spark.range(count).selectExpr("CAST(id AS STRING) AS n", "id % 7 AS k"))
    store.execute("XGROUP", "CREATE", stream, "billing", "0")
    assert added.first_id is not None
    return [f"{added.first_id.ms}-{added.first_id.seq + n}" for n in range(count)]


def test_an_available_now_query_reads_ten_thousand_entries_once_each_and_acknowledges_all_it_still_owns(
    spark: SparkSession, store: StreamStore, tmp_path: Path
) -> None:
    ids = fill(spark, store, 10_000)
    # Three entries this consumer read before the query started (a query that died before its offset
    # log held them): they are pending to it, and the query emits them first.
    early = store.execute("XREADGROUP", "GROUP", "billing", "spark-1", "COUNT", "3", "STREAMS", "orders", ">")
    early_ids = [entry_id for entry_id, _ in early[0][1]]
    sink = Batches()
    claimed = ids[100]

    def claiming(frame: DataFrame, batch_id: int) -> None:
        sink(frame, batch_id)
        if batch_id == 0:  # the recovery job claims an in-flight entry: the query must not acknowledge it
            assert store.execute("XCLAIM", "orders", "billing", "recovery", "0", claimed, "JUSTID") == [claimed]
        if batch_id == 1:
            # Nothing touched this batch's PEL rows: the next batch's acknowledgement drops the file its
            # delivery wrote without opening it (a read of it would now fail the query).
            entry = log_entry(store, state_version(store))
            pel_bucket = bucket_of(group_partition("orders", "billing"), C.KIND_PENDING)
            written = [
                path
                for bucket, stats, path in entry["added"]
                if bucket == pel_bucket and stats["minValues"][C.OWNER] == stats["maxValues"][C.OWNER] == "spark-1"
            ]
            assert len(written) == 1  # beside it, batch 0's file rewritten without its rows: the claimed one
            (Path(table_path(store.path, C.STATE_TABLE_DIR)) / unquote(written[0])).unlink()

    query = group_stream(store, "spark-1", maxEntriesPerTrigger=4000).writeStream.foreachBatch(claiming)
    query.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start().awaitTermination()

    assert sorted(sink.ids()) == sorted(ids)  # every entry, none twice
    assert [len(rows) for _, rows in sorted(sink.rows.items())] == [4000, 4000, 2000]
    assert [entry_id for _, entry_id, _ in sink.rows[0][:3]] == early_ids
    # Emitting them again counts a delivery, as XREADGROUP's history read does; the rest were delivered once.
    assert {(entry_id, count) for rows in sink.rows.values() for _, entry_id, count in rows if count != 1} == {
        (entry_id, 2) for entry_id in early_ids
    }
    # The last batch too is acknowledged (Spark asks for one more offset after it, and gets none), all
    # but the claimed entry, which is its new owner's to acknowledge.
    assert store.execute("XPENDING", "orders", "billing") == [1, claimed, claimed, [["recovery", "1"]]]
    info = store.execute("XINFO", "GROUPS", "orders")[0]
    assert info[info.index("entries-read") + 1] == 10_000 and info[info.index("lag") + 1] == 0
    fields = store.execute("XRANGE", "orders", ids[42], ids[42])[0][1]
    read = spark.read.format("streamclaim").option("path", store.path).option("stream", "orders").load()
    row = read.where(F.col("id") == ids[42]).first()
    assert (
        row is not None
        and [x for pair in row["fields"] for x in (pair["field"].decode(), pair["value"].decode())] == fields
    )
    assert read.count() == 10_000 and read.where(F.col("delivery_count").isNotNull()).count() == 0
    spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW orders_entries USING streamclaim "
        f"OPTIONS (path '{store.path}', stream 'orders')"
    )
    sql = spark.sql(f"SELECT CAST(fields[0].value AS STRING) AS n FROM orders_entries WHERE id = '{ids[42]}'")
    assert [row["n"] for row in sql.collect()] == [fields[1]]


def test_two_queries_with_different_consumers_of_one_group_split_the_entries_of_several_streams(
    spark: SparkSession, store: StreamStore, tmp_path: Path
) -> None:
    entries = {("orders", i) for i in fill(spark, store, 2000)} | {
        ("audit-1", i) for i in fill(spark, store, 1000, "audit-1")
    }
    store.execute("XADD", "audit-2", "*", "not", "in the group")  # matched by the pattern, but has no group
    consumers = ("spark-a", "spark-b")
    sinks = {consumer: Batches() for consumer in consumers}
    # Each query's first batch waits (in its foreachBatch, after its rows are kept) until the other's
    # first batch has come too, so both are running at once and each gets a batch however slow the other
    # starts; a query that fails breaks the barrier, and the other then fails at once instead of waiting.
    together = threading.Barrier(len(consumers), timeout=600)
    failures: dict[str, BaseException] = {}

    def run(consumer: str) -> None:
        sink = sinks[consumer]

        def first_batches_together(frame: DataFrame, batch_id: int) -> None:
            sink(frame, batch_id)
            if batch_id == 0:
                together.wait()

        try:
            frame = group_stream(store, consumer, stream=None, streams="orders,audit-*", maxEntriesPerTrigger=1000)
            query = frame.writeStream.foreachBatch(first_batches_together)
            query = query.option("checkpointLocation", str(tmp_path / consumer)).trigger(availableNow=True)
            query.start().awaitTermination()
        except BaseException as error:  # kept for the test to fail on, not left to a thread warning
            failures[consumer] = error
            together.abort()

    threads = {consumer: threading.Thread(target=run, args=(consumer,), name=consumer) for consumer in consumers}
    for thread in threads.values():
        thread.start()
    for thread in threads.values():
        thread.join(timeout=900)
    assert [c for c, thread in threads.items() if thread.is_alive()] == [], "queries still running after 900 s"
    assert failures == {}, "\n".join(f"{c}: {type(e).__name__}: {e}" for c, e in failures.items())
    a, b = ({(s, i) for rows in sink.rows.values() for s, i, _ in rows} for sink in sinks.values())
    assert a and b, f"each consumer gets entries: spark-a got {len(a)}, spark-b {len(b)}"
    assert not a & b  # no entry delivered to both
    assert a | b == entries and sum(len(sink.ids()) for sink in sinks.values()) == 3000
    assert max(len(rows) for sink in sinks.values() for rows in sink.rows.values()) <= 1000
    for stream in ("orders", "audit-1"):
        assert store.execute("XPENDING", stream, "billing") == EMPTY_PEL


@pytest.mark.slow
def test_a_query_killed_mid_run_and_restarted_loses_nothing_and_repeats_only_the_killed_batch(
    spark: SparkSession, store: StreamStore, tmp_path: Path
) -> None:
    # Three batches of 1000: batch 0 commits, batch 1 is killed after its output, batch 2 is only read
    # after the restart; so the test tells a committed batch, the killed one and a fresh one apart.
    ids = fill(spark, store, 3000)
    output, checkpoint = tmp_path / "out", tmp_path / "ck"
    args = ["--path", store.path, "--output", str(output), "--checkpoint", str(checkpoint), "--stall-batch", "1"]
    worker = Worker(args, tmp_path / "worker.log", module="tests.spark.stream_worker")
    try:
        for batch in range(2):
            assert worker.expect("written ", timeout=300) == f"written {batch} 1000"
        worker.kill_group()  # SIGKILL of its driver (Python and JVM) while batch 1 is uncommitted
    finally:
        worker.close()
    # The killed batch's entries are pending to the query's consumer; the recovery job would claim them
    # once idle past min_idle if the query never came back.
    assert store.execute("XPENDING", "orders", "billing")[0] == 1000

    def resume(frame: DataFrame, batch_id: int) -> None:
        frame.withColumn("batch", F.lit(batch_id)).write.format("delta").mode("append").save(str(output))

    query = group_stream(store, "spark-1", maxEntriesPerTrigger=1000).writeStream.foreachBatch(resume)
    query.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination()

    rows = spark.read.format("delta").load(str(output))
    assert sorted(r["id"] for r in rows.select("id").distinct().collect()) == sorted(ids)  # at least once
    repeated = rows.groupBy("id").agg(F.count("*").alias("n"), F.collect_set("batch").alias("batches"))
    assert {(r["n"], tuple(r["batches"])) for r in repeated.where("n > 1").collect()} == {(2, (1,))}
    assert repeated.where("n > 1").count() == 1000  # exactly the killed batch, replayed as batch 1
    assert sorted(r["batch"] for r in rows.select("batch").distinct().collect()) == [0, 1, 2]
    assert store.execute("XPENDING", "orders", "billing") == EMPTY_PEL


def test_a_missing_group_or_a_bad_option_stops_the_query_with_the_message(store: StreamStore, tmp_path: Path) -> None:
    store.execute("XADD", "orders", "*", "a", "1")
    cases = [
        (dict(group="nope"), "NOGROUP No such key 'orders' or consumer group 'nope' in XREADGROUP with GROUP option"),
        (dict(maxEntriesPerTrigger="-5"), "option 'maxEntriesPerTrigger' is '-5': give a positive whole number"),
    ]
    for number, (options, message) in enumerate(cases):
        reader = group_stream(store, "spark-1", **{k: v for k, v in options.items() if k != "group"})
        if "group" in options:
            reader = (
                store.spark.readStream.format("streamclaim")
                .option("path", store.path)
                .option("stream", "orders")
                .option("group", options["group"])
                .option("consumer", "spark-1")
                .load()
            )
        with pytest.raises(StreamingQueryException) as raised:
            run_available_now(reader, Batches(), tmp_path / f"ck{number}")
        assert message in str(raised.value)
    assert store.execute("XLEN", "orders") == 1


def test_a_steady_micro_batch_runs_one_spark_job_and_its_rows_read_on_the_driver_are_the_rows_spark_reads(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders, audit = fill(spark, store, 2500), fill(spark, store, 500, "audit-1")
    # Two entries this consumer read before the query, one of them deleted since: the first batch emits
    # both again, the deleted one with null fields and its delivery count unchanged.
    store.execute("XREADGROUP", "GROUP", "billing", "spark-1", "COUNT", "2", "STREAMS", "orders", ">")
    store.execute("XDEL", "orders", orders[0])
    store.execute("XREADGROUP", "GROUP", "billing", "other", "COUNT", "5", "STREAMS", "audit-1", ">")
    options = {"path": store.path, "streams": "orders,audit-*", "group": "billing", "consumer": "spark-1"}
    reader = GroupReader(source_options(options), DriverLink.of(spark))
    offsets, jobs, emitted = [reader.initialOffset()], [], []
    for _ in range(3):
        with count_jobs(spark.sparkContext) as counted:
            end = reader.latestOffset(offsets[-1], ReadMaxRows(1000))
            parts = reader.partitions(offsets[-1], end)
        jobs.append(counted.jobs)
        on_driver = _emitted_rows(reader, parts)
        with monkeypatch.context() as patched:  # the same batch read through Spark, as a replay reads it
            patched.setattr(source, "batch_rows", lambda *args: None)
            through_spark = _emitted_rows(reader, reader.partitions(offsets[-1], end))
        assert_df_equality(spark.createDataFrame(on_driver), spark.createDataFrame(through_spark))
        emitted.append(on_driver.to_pylist())
        offsets.append(end)

    first = emitted[0]
    assert [(row["id"], row["fields"], row["delivery_count"]) for row in first[:2]] == [
        (orders[0], None, 1),
        (orders[1], [{"field": b"n", "value": b"1"}, {"field": b"k", "value": b"1"}], 2),
    ]
    # The oldest IDs first (the orders stream was filled first), each batch in stream and ID order.
    assert [[(row["stream"], row["id"]) for row in rows] for rows in emitted] == [
        [("orders", i) for i in orders[:1000]],
        [("orders", i) for i in orders[1000:2000]],
        [("audit-1", i) for i in audit[5:]] + [("orders", i) for i in orders[2000:]],
    ]
    # The first batch redelivers (a MERGE of the redelivered rows); a steady one writes its PEL rows and
    # group head on the driver (state/driver_writes.py) and reads its rows there: no Spark job.
    assert jobs[1:] == [0, 0], jobs


def _emitted_rows(reader: GroupReader, parts: Sequence[Any]) -> pa.Table:
    return pa.Table.from_batches([batch for part in parts for batch in reader.read(part)])


@pytest.fixture
def copy_source(spark: SparkSession, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "in"
    spark.createDataFrame([("a", b"\x00\xff"), ("b", b"")], "name STRING, blob BINARY").write.parquet(str(folder))
    yield folder


def test_rows_given_as_arrow_become_the_entries_an_append_of_the_same_dataframe_makes(
    spark: SparkSession, store: StreamStore
) -> None:
    rows = pa.table(
        {
            "who": ["x", None, "y"],
            "n": pa.array([1, None, -3], pa.int64()),
            "ok": [True, False, None],
            "blob": [b"\x00\xff", None, b""],
        }
    )
    by_arrow = append_table(store.runner, "arrow", rows)
    store.append("frame", spark.createDataFrame(rows))

    assert by_arrow is not None and by_arrow.count == 3 and by_arrow.first_id is not None
    entries = store.execute("XRANGE", "arrow", "-", "+", decode_responses=False)
    assert [entry_id.decode() for entry_id, _ in entries] == [f"{by_arrow.first_id.ms}-{seq}" for seq in range(3)]
    assert str(by_arrow.last_id) == entries[-1][0].decode()
    assert [fields for _, fields in entries] == [
        fields for _, fields in store.execute("XRANGE", "frame", "-", "+", decode_responses=False)
    ]
    # Spark reads the files the driver wrote as it reads its own.
    state = spark.read.format("delta").load(table_path(store.path, C.STATE_TABLE_DIR))
    stored = state.where((F.col(C.STREAM) == "arrow") & (F.col(C.ROW_KIND) == C.KIND_ENTRY)).orderBy(C.ID_SEQ)
    assert [[(pair.field, pair.value) for pair in row[C.FIELDS]][1:3] for row in stored.collect()] == [
        [(b"n", b"1"), (b"ok", b"true")],
        [(b"n", b""), (b"ok", b"false")],
        [(b"n", b"-3"), (b"ok", b"")],
    ]

    to_streams = append_table(store.runner, None, rows.append_column("to", pa.array(["b", "a", "b"])), "to")
    assert to_streams is not None and to_streams.first_id is None
    assert {name: count for name, (count, _, _) in to_streams.streams.items()} == {"a": 1, "b": 2}
    assert [fields[1] for _, fields in store.execute("XRANGE", "b", "-", "+", decode_responses=False)] == [b"x", b"y"]
    # Floats' text in Arrow is not Spark's: such rows take the DataFrame path (None here).
    assert append_table(store.runner, "floats", pa.table({"x": [1.5]})) is None
    with pytest.raises(InvalidArgumentError, match="stream_column='to': 1 row"):
        append_table(store.runner, None, pa.table({"to": ["a", None], "n": [1, 2]}), "to")


def test_the_sink_appends_each_batch_once_and_a_replayed_batch_adds_nothing(
    spark: SparkSession, store: StreamStore, copy_source: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "sink-ck"
    frame = spark.readStream.schema("name STRING, blob BINARY").parquet(str(copy_source))
    writer = frame.writeStream.format("streamclaim").option("path", store.path).option("stream", "copy")
    writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination()
    entries = store.execute("XRANGE", "copy", "-", "+", decode_responses=False)
    assert sorted(fields for _, fields in entries) == [
        [b"name", b"a", b"blob", b"\x00\xff"],
        [b"name", b"b", b"blob", b""],
    ]

    options = sink_options({"path": store.path, "stream": "copy", "checkpointlocation": str(checkpoint)})
    assert recorded_batch(store, sink_app_id(options.sink_id)) == 0
    sink = AppendWriter(options, DriverLink.of(spark))
    message = sink.write(iter(pa.table({"name": ["c"], "blob": [b"\x01"]}).to_batches()))
    version = store.snapshot().version
    sink.commit([message], 0)  # Spark replaying batch 0 after a crash before its commit log entry
    assert store.execute("XLEN", "copy") == 2 and store.snapshot().version == version
    sink.commit([message], 1)
    sink.commit([message], 1)
    assert store.execute("XLEN", "copy") == 3
    assert store.execute("XREVRANGE", "copy", "+", "-", "COUNT", "1")[0][1] == ["name", "c", "blob", "\x01"]

"""Structured Streaming through the ``streamclaim`` source and sink beside a redis-py loop (issue 13).

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.streaming --size 1000000 --per-trigger 250000

Source: a stream of ``--size`` entries and a group at 0; a ``Trigger.AvailableNow`` query reads the
group as one consumer, ``--per-trigger`` entries per micro-batch, into ``foreachBatch`` writing to
Spark's ``noop`` sink; timed from ``start()`` to the end, when every entry is acknowledged. Redis: the
same entries, one consumer looping ``XREADGROUP COUNT 10000`` then ``XACK`` of those IDs until none
are left, through redis-py. Sink: ``--size`` rows in parquet files (one per micro-batch) appended by
a ``Trigger.AvailableNow`` query into the store; Redis: the same rows as ``XADD *`` through pipelines
of 10,000. Prints entries per second of each and their ratio, and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.side_by_side import BODY, LOAD_CHUNK, READ_COUNT
from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from streamclaim_spark.streaming import register
from tests.redis_server import RedisServer

KEY, GROUP, CONSUMER = "orders", "billing", "spark-1"


def rows(spark: SparkSession, size: int) -> DataFrame:
    return spark.range(size).select(F.col("id").cast("string").alias("n"), F.lit(BODY).alias("body"))


def store_source(spark: SparkSession, root: Path, size: int, per_trigger: int) -> dict[str, Any]:
    store = StreamStore.open(str(root / "source"), spark=spark)
    store.append(KEY, rows(spark, size))
    store.execute("XGROUP", "CREATE", KEY, GROUP, "0")
    batches: list[tuple[int, float]] = []
    last = [time.perf_counter()]

    def consume(frame: DataFrame, batch_id: int) -> None:
        frame.write.format("noop").mode("overwrite").save()
        now = time.perf_counter()
        batches.append((batch_id, round(now - last[0], 1)))
        last[0] = now

    reader = spark.readStream.format("streamclaim").option("path", store.path).option("stream", KEY)
    reader = reader.option("group", GROUP).option("consumer", CONSUMER).option("maxEntriesPerTrigger", per_trigger)
    started = time.perf_counter()
    query = reader.load().writeStream.foreachBatch(consume).option("checkpointLocation", str(root / "source-ck"))
    query.trigger(availableNow=True).start().awaitTermination()
    seconds = time.perf_counter() - started
    assert store.execute("XPENDING", KEY, GROUP)[0] == 0, "entries left pending"
    info = store.execute("XINFO", "GROUPS", KEY)[0]
    assert info[info.index("entries-read") + 1] == size
    return {"seconds": round(seconds, 1), "per_second": round(size / seconds), "batches": batches}


def store_sink(spark: SparkSession, root: Path, size: int, per_trigger: int) -> dict[str, Any]:
    store = StreamStore.open(str(root / "sink"), spark=spark)
    folder = root / "sink-in"
    rows(spark, size).repartition(max(1, size // per_trigger)).write.parquet(str(folder))
    frame = spark.readStream.schema("n STRING, body STRING").option("maxFilesPerTrigger", 1).parquet(str(folder))
    writer = frame.writeStream.format("streamclaim").option("path", store.path).option("stream", KEY)
    started = time.perf_counter()
    writer.option("checkpointLocation", str(root / "sink-ck")).trigger(availableNow=True).start().awaitTermination()
    seconds = time.perf_counter() - started
    assert store.execute("XLEN", KEY) == size
    return {"seconds": round(seconds, 1), "per_second": round(size / seconds)}


def redis_loop(size: int) -> dict[str, Any]:
    with RedisServer() as server:
        client = redis.Redis(host=server.host, port=server.port)
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for n in range(size):
            pipe.xadd(KEY, {"n": str(n), "body": BODY})
            if len(pipe) == LOAD_CHUNK:
                pipe.execute()
        pipe.execute()
        added = time.perf_counter() - started
        client.xgroup_create(KEY, GROUP, "0")
        started = time.perf_counter()
        read = 0
        while True:
            reply = client.xreadgroup(GROUP, CONSUMER, {KEY: ">"}, count=READ_COUNT)
            if not reply or not reply[0][1]:
                break
            ids = [entry_id for entry_id, _ in reply[0][1]]
            read += client.xack(KEY, GROUP, *ids)
        consumed = time.perf_counter() - started
        assert read == size and client.xpending(KEY, GROUP)["pending"] == 0
    return {
        "xadd_seconds": round(added, 1),
        "xadd_per_second": round(size / added),
        "read_ack_seconds": round(consumed, 1),
        "read_ack_per_second": round(size / consumed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--per-trigger", type=int, default=250_000)
    parser.add_argument("--output", default="docs/benchmarks/streaming.json")
    args = parser.parse_args()
    spark = build_session(conf={"spark.driver.memory": "6g"})
    register(spark)
    root = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    results: dict[str, Any] = {"size": args.size, "per_trigger": args.per_trigger}
    results["redis"] = redis_loop(args.size)
    print("redis", results["redis"], flush=True)
    results["source"] = store_source(spark, root, args.size, args.per_trigger)
    print("source", results["source"], flush=True)
    results["sink"] = store_sink(spark, root, args.size, args.per_trigger)
    print("sink", results["sink"], flush=True)
    on_redis, source, sink = results["redis"], results["source"], results["sink"]
    results["ratios"] = {
        "source_vs_xreadgroup_xack": round(on_redis["read_ack_per_second"] / source["per_second"], 1),
        "sink_vs_pipelined_xadd": round(on_redis["xadd_per_second"] / sink["per_second"], 1),
    }
    print("ratios (Redis is this many times faster)", results["ratios"], flush=True)
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""A capped stream's hot path: ``XADD key MAXLEN ~ cap * ...``, store against redis-server.

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.capped_xadd --cap 1000 --calls 100

Both sides start from a stream already at the cap (one bulk append on the store, a pipeline on Redis),
then run ``--calls`` XADDs with ``MAXLEN ~ cap`` and, for comparison, with the exact ``MAXLEN cap``.
For each it prints the mean and p50 milliseconds per call, the final length, and on the store the
mean Spark jobs per call (``spark_jobs.count_jobs``). The ``~`` form trims whole chunks of 100 entries
(docs/DESIGN.md), so on the store most of its calls trim nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.redis_server import RedisServer

KEY = "capped"


def _summary(samples_ms: list[float], length: int, jobs: list[int] | None = None) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "mean_ms": round(statistics.fmean(samples_ms), 3),
        "p50_ms": round(statistics.median(samples_ms), 3),
        "final_length": length,
    }
    if jobs is not None:
        summary["mean_jobs"] = round(statistics.fmean(jobs), 2)
    return summary


def _timed_ms(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def run_redis(cap: int, calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with RedisServer() as server:
        client = redis.Redis(port=server.port)
        for form in ("~", "="):
            client.delete(KEY)
            pipe = client.pipeline(transaction=False)
            for n in range(cap):
                pipe.xadd(KEY, {"n": n})
            pipe.execute()
            argv = ["XADD", KEY, "MAXLEN", form, str(cap), "*", "f", "v"]
            samples = [_timed_ms(lambda argv=argv: client.execute_command(*argv)) for _ in range(calls)]
            results[f"MAXLEN {form}"] = _summary(samples, int(client.xlen(KEY)))
    return results


def run_store(cap: int, calls: int) -> dict[str, Any]:
    spark = build_session(conf={"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {}
    for form in ("~", "="):
        store = StreamStore.open(tempfile.mkdtemp(prefix="bench-capped-") + "/store", spark=spark)
        store.append(KEY, spark.range(cap).selectExpr("CAST(id AS STRING) AS n"))
        argv = ("XADD", KEY, "MAXLEN", form, str(cap), "*", "f", "v")
        samples, jobs = [], []
        for _ in range(calls):
            with count_jobs(spark.sparkContext) as counted:
                samples.append(_timed_ms(lambda argv=argv, store=store: store.execute(*argv)))
            jobs.append(counted.jobs)
        results[f"MAXLEN {form}"] = _summary(samples, int(store.execute("XLEN", KEY)), jobs)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cap", type=int, default=1000, help="the stream's MAXLEN (default 1000)")
    parser.add_argument("--calls", type=int, default=100, help="XADDs per form and side (default 100)")
    args = parser.parse_args(argv)
    if args.cap < 1 or args.calls < 1:
        parser.error("--cap and --calls must be 1 or more")
    report = {"cap": args.cap, "calls": args.calls, "redis": run_redis(args.cap, args.calls)}
    report["store"] = run_store(args.cap, args.calls)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

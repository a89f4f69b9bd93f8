"""What a fleet does to the state table: files, buckets, Delta log size, snapshot and XCLAIM time.

Run on stores that ``bench.fleet_recovery --root DIR`` left behind (``DIR/fleet-<G>``)::

    .venv/bin/python -m bench.fleet_layout /tmp/fleet/fleet-10 /tmp/fleet/fleet-10000

For each store: data files and Delta partitions (buckets) of the state table, the largest bucket in
files, the ``_delta_log`` size, the time to open a snapshot and read one stream's head (XLEN), and
single-command latencies — XCLAIM of one ID, XPENDING summary, XACK of one ID — each the median of
``--calls`` calls on the first stream's group (every call commits, except XPENDING).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import functions as F

from bench.layout import files
from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session

STREAM = "tenant-00000"
GROUP = "workers"


def median_seconds(action: Callable[[], Any], calls: int) -> float:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure(path: str, calls: int) -> dict[str, Any]:
    spark = build_session()
    table = files(spark, path)
    per_bucket = table.groupBy("partition").count()
    row = per_bucket.agg(F.count("*").alias("buckets"), F.sum("count").alias("files"), F.max("count").alias("most"))
    summary = row.first()
    assert summary is not None
    log_dir = os.path.join(path, "state", "_delta_log")
    store = StreamStore.open(path, spark=spark)
    groups = len(store.snapshot().all_streams())
    # Pending IDs, so that every XCLAIM and XACK below changes something and commits.
    ids = [entry[0] for entry in store.execute("XPENDING", STREAM, GROUP, "-", "+", str(calls))]

    def snapshot_and_head() -> None:
        store.execute("XLEN", STREAM)

    claim_ids = iter(ids)
    ack_ids = iter(ids)
    return {
        "store": path,
        "streams": groups,
        "data_files": summary["files"],
        "buckets": summary["buckets"],
        "files_in_largest_bucket": summary["most"],
        "delta_log_bytes": sum(os.path.getsize(os.path.join(log_dir, n)) for n in os.listdir(log_dir)),
        "xlen_s": median_seconds(snapshot_and_head, calls),
        "xclaim_s": median_seconds(
            lambda: store.execute("XCLAIM", STREAM, GROUP, "bench", "0", next(claim_ids), "JUSTID"), calls
        ),
        "xpending_s": median_seconds(lambda: store.execute("XPENDING", STREAM, GROUP), calls),
        "xack_s": median_seconds(lambda: store.execute("XACK", STREAM, GROUP, next(ack_ids)), calls),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args(argv)
    for path in args.stores:
        print(json.dumps(measure(path, args.calls)), flush=True)


if __name__ == "__main__":
    main()

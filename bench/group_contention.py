"""Claims on different groups racing: do they lose to each other, now that groups share buckets?

Run from the repo root::

    .venv/bin/python -m bench.group_contention --groups 4 --calls 5

The state table is partitioned by bucket (16 group buckets, schema.bucket_of), so two commands on
different groups conflict in Delta's partition-level check only when their groups share a bucket. For
two sets of K groups (one stream each) — all K in **one** bucket (the worst case), and K in K different
buckets — K threads each run ``--calls`` XAUTOCLAIM COUNT 10 on their own group at once, and the
script prints the attempts each command needed (``store.last_attempts``; 1 = no lost race).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import bucket_of, group_partition
from streamclaim_spark.state.session import build_session

GROUP = "workers"


def streams_in(buckets: str, count: int) -> list[str]:
    """``count`` stream names whose group ``workers`` is in one bucket ("same") or all in different ones."""
    chosen: list[str] = []
    seen: set[str] = set()
    index = 0
    while len(chosen) < count:
        name = f"tenant-{index:05d}"
        bucket = bucket_of(group_partition(name, GROUP), C.KIND_PENDING)
        index += 1
        if (buckets == "same" and (not chosen or bucket in seen)) or (buckets == "spread" and bucket not in seen):
            chosen.append(name)
            seen.add(bucket)
    return chosen


def race(store: StreamStore, streams: list[str], calls: int) -> dict[str, list[int]]:
    attempts: dict[str, list[int]] = {name: [] for name in streams}
    start = threading.Barrier(len(streams))

    def claimer(name: str) -> None:
        start.wait()
        for call in range(calls):
            store.execute("XAUTOCLAIM", name, GROUP, f"c{call}", "0", "0", "COUNT", "10")
            attempts[name].append(store.last_attempts)

    threads = [threading.Thread(target=claimer, args=(name,)) for name in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return attempts


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args(argv)
    spark = build_session()
    results: dict[str, Any] = {}
    for layout in ("spread", "same"):
        streams = streams_in(layout, args.groups)
        store = StreamStore.open(tempfile.mkdtemp(prefix=f"bench-contention-{layout}-"), spark=spark)
        rows = spark.range(len(streams) * 100).select(
            F.element_at(F.array(*(F.lit(s) for s in streams)), (F.col("id") % len(streams) + 1).cast("int")).alias(
                "stream"
            ),
            F.col("id").alias("n"),
        )
        store.append_streams(rows, stream_column="stream")
        store.create_groups([(name, GROUP, "0") for name in streams])
        store.deliver_many([(name, GROUP, "dead") for name in streams])
        started = time.perf_counter()
        attempts = race(store, streams, args.calls)
        seconds = time.perf_counter() - started
        flat = [a for values in attempts.values() for a in values]
        results[layout] = {
            "buckets": sorted({bucket_of(group_partition(name, GROUP), C.KIND_PENDING) for name in streams}),
            "commands": len(flat),
            "lost_races": sum(a - 1 for a in flat),
            "commands_that_retried": sum(1 for a in flat if a > 1),
            "max_attempts": max(flat),
            "seconds": round(seconds, 1),
            "attempts": attempts,
        }
        print(layout, json.dumps(results[layout]), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()

"""One lever at a time: what capped, ID-ordered files do to single commands on a big PEL.

Run from the repo root::

    .venv/bin/python -m bench.levers --sizes 10000 1000000 --rows-per-file 0 100000

For each PEL size and each ``rows_per_file`` (0: no cap, Spark's default of one file per write task),
builds a store with one stream of N entries all delivered to ``dead``, then times, ``--calls`` times
each: XAUTOCLAIM COUNT 1000 from the middle of the PEL, XCLAIM of one ID, XACK of one ID, XPENDING.
Prints the median per command. The ID-range conditions (transaction.id_bounds, Snapshot.with_ids)
are always on; without the cap there is one file per partition, so they have nothing to skip.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence

from pyspark.sql import SparkSession

from bench.layout import summary
from bench.side_by_side import BODY, GROUP, KEY, MIN_IDLE_MS, entries, timed
from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session


def measure(spark: SparkSession, root: str, size: int, rows_per_file: int, calls: int) -> dict[str, float]:
    """Median seconds per command on a fresh PEL of ``size`` entries written with ``rows_per_file``."""
    path = os.path.join(root, f"pel-{size}-{rows_per_file}")
    store = StreamStore.open(path, spark=spark, rows_per_file=rows_per_file)
    first = store.append(KEY, entries(spark, size)).first_id
    assert first is not None
    store.execute("XGROUP", "CREATE", KEY, GROUP, "0")
    store.deliver(KEY, GROUP, "dead")
    files = summary(spark, store.path).collect()
    time.sleep(MIN_IDLE_MS / 1000 * 1.5)
    samples: dict[str, list[float]] = {"XAUTOCLAIM COUNT 1000": [], "XCLAIM 1 ID": [], "XACK 1 ID": [], "XPENDING": []}
    for call in range(calls):
        middle = f"{first.ms}-{first.seq + size // 2 + call * 1000}"
        single = f"{first.ms}-{first.seq + size // 3 + call}"
        argv = ("XAUTOCLAIM", KEY, GROUP, "rescuer", str(MIN_IDLE_MS), middle, "COUNT", "1000")
        samples["XAUTOCLAIM COUNT 1000"].append(timed(store.execute, *argv)[0])
        samples["XCLAIM 1 ID"].append(timed(store.execute, "XCLAIM", KEY, GROUP, "other", "0", single)[0])
        samples["XACK 1 ID"].append(timed(store.execute, "XACK", KEY, GROUP, single)[0])
        samples["XPENDING"].append(timed(store.execute, "XPENDING", KEY, GROUP)[0])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    medians["files in the PEL partition"] = float(max(row["files"] for row in files))
    return medians


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--rows-per-file", type=int, nargs="+", default=[0, 100_000])
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args(argv)
    spark = build_session(conf={"spark.driver.memory": "12g", "spark.sql.shuffle.partitions": "4"})
    root = tempfile.mkdtemp(prefix="bench-levers-")
    warm = StreamStore.open(os.path.join(root, "warm"), spark=spark)
    warm.append(KEY, entries(spark, 100))
    warm.execute("XADD", KEY, "*", "body", BODY)
    rows = []
    for size in args.sizes:
        for cap in args.rows_per_file:
            result = measure(spark, root, size, cap, args.calls)
            rows.append((size, cap, result))
            print(f"PEL {size:,}, rows_per_file {cap or 'no cap'}: {result}", flush=True)
    names = list(rows[0][2])
    print("\n| PEL size | rows per file | " + " | ".join(names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for size, cap, result in rows:
        cells = [f"{int(result[n])}" if n.startswith("files") else f"{result[n]:.2f} s" for n in names]
        print(f"| {size:,} | {cap or 'no cap'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

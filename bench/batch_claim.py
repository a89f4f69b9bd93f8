"""Time of one batched claim of N stale entries (issue: claim 100k and 1M in one transaction).

Run: ``.venv/bin/python -m bench.batch_claim --sizes 100000 1000000`` from the repo root. For each N:
one stream of N entries, one group, all delivered to a consumer that then "dies"; an hour later one
``claim_stale`` moves them all to a live consumer. Prints setup and claim times; results are DataFrames,
nothing is collected to the driver but counts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence

from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.session import build_session

HOUR_MS = 3_600_000


def run(size: int, spark_conf: dict[str, str]) -> dict[str, float]:
    spark = build_session(conf=spark_conf)
    clock = [1_700_000_000_000]
    store = StreamStore.open(tempfile.mkdtemp(prefix=f"bench-claim-{size}-"), spark=spark, clock=lambda: clock[0])
    timings: dict[str, float] = {}
    started = time.perf_counter()
    store.append("s", spark.range(size).selectExpr("id AS n", "'payload-0123456789' AS body"))
    timings["append"] = time.perf_counter() - started
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    started = time.perf_counter()
    delivered = store.deliver("s", "g", "dead")
    timings["deliver"] = time.perf_counter() - started
    assert delivered.count == size
    clock[0] += HOUR_MS
    started = time.perf_counter()
    result = store.claim_stale(StaleSelection(min_idle_ms=60_000), "rescuer", just_id=True)
    timings["claim"] = time.perf_counter() - started
    assert result.total_claimed == size, result.counts
    started = time.perf_counter()
    summary = store.execute("XPENDING", "s", "g")
    timings["xpending"] = time.perf_counter() - started
    assert summary[3] == [["rescuer", str(size)]], summary
    return timings


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shuffle-partitions", default="4")
    args = parser.parse_args(argv)
    conf = {"spark.sql.shuffle.partitions": args.shuffle_partitions, "spark.driver.memory": "8g"}
    print(f"{'N':>10} {'append':>9} {'deliver':>9} {'claim':>9} {'XPENDING':>9}")
    for size in args.sizes:
        t = run(size, conf)
        print(f"{size:>10} {t['append']:>8.1f}s {t['deliver']:>8.1f}s {t['claim']:>8.1f}s {t['xpending']:>8.1f}s")


if __name__ == "__main__":
    main()

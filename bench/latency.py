"""Single-command warm latency: the store's ``execute`` against a real redis-server, same workload.

Run: ``.venv/bin/python -m bench.latency --calls 100`` (from the repo root). Prints a table of p50/p99 in
milliseconds per command and the ratio store/redis, and the Spark session start time separately.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence

from streamclaim_spark import StreamStore
from streamclaim_spark.session import build_session
from tests.redis_server import RedisServer
from tests.resp import RespClient

Execute = Callable[..., object]


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def workload(execute: Execute, calls: int) -> dict[str, list[float]]:
    """XADD, XREADGROUP (one entry), XACK, XPENDING (summary), XCLAIM (one ID): ``calls`` of each."""
    timings: dict[str, list[float]] = {name: [] for name in ("XADD", "XREADGROUP", "XACK", "XPENDING", "XCLAIM")}

    def timed(name: str, *argv: str) -> object:
        started = time.perf_counter()
        reply = execute(name, *argv)
        timings[name].append((time.perf_counter() - started) * 1000)
        return reply

    execute("XGROUP", "CREATE", "bench", "g", "$", "MKSTREAM")
    for _ in range(calls):
        entry_id = str(timed("XADD", "bench", "*", "payload", "x" * 64))
        timed("XREADGROUP", "GROUP", "g", "worker", "COUNT", "1", "STREAMS", "bench", ">")
        timed("XCLAIM", "bench", "g", "rescuer", "0", entry_id, "JUSTID")
        timed("XPENDING", "bench", "g")
        timed("XACK", "bench", "g", entry_id)
    return timings


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100, help="calls per command (default 100)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    spark = build_session()
    spark_start = time.perf_counter() - started
    store = StreamStore.open(tempfile.mkdtemp(prefix="bench-latency-"), spark=spark)
    store.execute("XADD", "warmup", "*", "f", "v")  # first commit pays JIT and class loading
    store_times = workload(store.execute, args.calls)
    with RedisServer() as server:
        client: RespClient = server.client()
        redis_times = workload(client.execute, args.calls)
        client.close()

    print(f"Spark session start: {spark_start:.1f} s (paid once per job)")
    print(f"{'command':<11} {'store p50':>10} {'store p99':>10} {'redis p50':>10} {'redis p99':>10} {'p50 ratio':>10}")
    for name, samples in store_times.items():
        reference = redis_times[name]
        ratio = statistics.median(samples) / statistics.median(reference)
        print(
            f"{name:<11} {percentile(samples, 0.5):>8.0f}ms {percentile(samples, 0.99):>8.0f}ms "
            f"{percentile(reference, 0.5):>8.3f}ms {percentile(reference, 0.99):>8.3f}ms {ratio:>9.0f}x"
        )


if __name__ == "__main__":
    main()

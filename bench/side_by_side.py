"""The store and a real redis-server on the same workloads, in one run (the benchmark issue).

Run from the repo root, after ``bash scripts/setup.sh``::

    .venv/bin/python -m bench.side_by_side --sizes 10000 100000 1000000 --out docs/benchmarks

For each N both systems get one stream of N entries (fields ``n`` and a 24-byte ``body``), one group
``g``, all N entries delivered to consumer ``dead``, which then dies. Then, in this order: XPENDING
summary; claim 1,000 stale entries with one ``XAUTOCLAIM ... COUNT 1000``; single-command latencies
(XCLAIM of one ID, XPENDING, XACK of one ID; at the smallest N only); recovery of all N stale entries
(Redis: XAUTOCLAIM loops through redis-py until the cursor is ``0-0``; the store: one batched claim,
and the same loops through ``execute``, run for ``--loop-calls`` calls and projected to all of them);
then XACK of every entry. Each recovery starts after the entries have been idle ``MIN_IDLE_MS``.
Prints Markdown tables, and writes ``results.json`` and ``time_vs_n.png`` to ``--out``.
The Spark session start is timed separately: a job pays it once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.report import REDIS, STORE, Timing, comparison_table, latency_table, plot, projected
from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.state.session import build_session
from streamclaim_spark.store import DEFAULT_ROWS_PER_FILE
from tests.redis_server import RedisServer

KEY = "bench"
GROUP = "g"
MIN_IDLE_MS = 100
BODY = "payload-0123456789abcdef"
LOAD_CHUNK = 10_000
READ_COUNT = 10_000
ACK_CHUNK = 1_000
# Redis' default stream node sizes (the parity tests' server sets node bytes to 0; a benchmark should not).
REDIS_ARGS = ("--stream-node-max-bytes", "4096")
LATENCY_COMMANDS = ("XCLAIM", "XPENDING", "XACK")

Steps = dict[str, dict[str, Any]]


def wait_until_stale() -> None:
    """Every delivery so far is idle at least MIN_IDLE_MS afterwards (both systems use wall clocks)."""
    time.sleep(MIN_IDLE_MS / 1000 * 1.5)


def timed(action: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Wall seconds of ``action(*args, **kwargs)``, and its result."""
    started = time.perf_counter()
    result = action(*args, **kwargs)
    return time.perf_counter() - started, result


def calls_for(size: int, count: int) -> int:
    """Calls a loop of COUNT ``count`` makes over ``size`` entries (the call taking the last ones returns 0-0)."""
    return max(1, -(-size // count))


# --- Redis ------------------------------------------------------------------------------------------------


class RedisWorkload:
    """The workload through redis-py (with hiredis), as a Python recovery job would drive Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        # redis-py's xautoclaim(justid=True) returns the IDs without the cursor; this client keeps raw replies.
        self.raw: Any = redis.Redis(connection_pool=client.connection_pool)
        self.raw.set_response_callback("XAUTOCLAIM", lambda response, **options: response)

    def load(self, size: int) -> list[bytes]:
        self.client.flushall()
        ids: list[bytes] = []
        pipe = self.client.pipeline(transaction=False)
        for n in range(size):
            pipe.xadd(KEY, {"n": n, "body": BODY})
            if len(pipe) == LOAD_CHUNK:
                ids.extend(pipe.execute())
        ids.extend(pipe.execute())
        self.client.xgroup_create(KEY, GROUP, "0")
        return ids

    def deliver(self) -> int:
        delivered = 0
        while True:
            reply: Any = self.client.xreadgroup(GROUP, "dead", {KEY: ">"}, count=READ_COUNT)
            if not reply or not reply[0][1]:
                return delivered
            delivered += len(reply[0][1])

    def xpending(self) -> int:
        return int(self.client.xpending(KEY, GROUP)["pending"])

    def autoclaim_once(self, count: int) -> int:
        reply = self.client.xautoclaim(KEY, GROUP, "rescuer-1k", MIN_IDLE_MS, "0-0", count=count)
        return len(reply[1])

    def autoclaim_loop(self, count: int, just_id: bool, consumer: str) -> tuple[int, int]:
        """XAUTOCLAIM from 0-0 until the cursor comes back 0-0; returns (claimed, calls)."""
        cursor: bytes | str = "0-0"
        claimed = calls = 0
        while True:
            calls += 1
            if just_id:
                reply = self.raw.execute_command(
                    "XAUTOCLAIM", KEY, GROUP, consumer, MIN_IDLE_MS, cursor, "COUNT", count, "JUSTID"
                )
            else:
                reply = self.client.xautoclaim(KEY, GROUP, consumer, MIN_IDLE_MS, cursor, count=count)
            claimed += len(reply[1])
            cursor = reply[0]
            if cursor in (b"0-0", "0-0"):
                return claimed, calls

    def ack_all(self, ids: Sequence[bytes]) -> int:
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(ids), ACK_CHUNK):
            pipe.xack(KEY, GROUP, *ids[start : start + ACK_CHUNK])
        return sum(pipe.execute())

    def latency(self, ids: Sequence[bytes], calls: int) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {name: [] for name in LATENCY_COMMANDS}
        for entry_id in ids[-calls:]:
            samples["XCLAIM"].append(_ms(self.client.xclaim, KEY, GROUP, "lat", 0, [entry_id]))
            samples["XPENDING"].append(_ms(self.client.xpending, KEY, GROUP))
            samples["XACK"].append(_ms(self.client.xack, KEY, GROUP, entry_id))
        return samples


def run_redis(workload: RedisWorkload, size: int, latency_calls: int) -> tuple[Steps, dict[str, list[float]]]:
    steps: Steps = {}
    seconds, ids = timed(workload.load, size)
    steps["load"] = Timing(seconds, calls=size, items=size).as_dict()
    seconds, delivered = timed(workload.deliver)
    assert delivered == size, f"redis delivered {delivered} of {size}"
    steps["deliver"] = Timing(seconds, calls=calls_for(size, READ_COUNT), items=delivered).as_dict()
    seconds, pending = timed(workload.xpending)
    assert pending == size
    steps["xpending"] = Timing(seconds).as_dict()
    wait_until_stale()
    seconds, claimed = timed(workload.autoclaim_once, 1000)
    assert claimed == min(1000, size)
    steps["claim_1k"] = Timing(seconds, items=claimed).as_dict()
    latency = workload.latency(ids, latency_calls) if latency_calls else {}
    expected = size - latency_calls
    loops = (("autoclaim_100", 100, False), ("autoclaim_1000", 1000, False), ("autoclaim_justid", 100, True))
    for step, count, just_id in loops:
        wait_until_stale()
        seconds, (claimed, calls) = timed(workload.autoclaim_loop, count, just_id, f"rescuer-{step}")
        assert claimed == expected, f"redis {step} claimed {claimed} of {expected}"
        steps[step] = Timing(seconds, calls=calls, items=claimed).as_dict()
    seconds, acked = timed(workload.ack_all, ids)
    assert acked == expected
    steps["ack_all"] = Timing(seconds, calls=calls_for(size, ACK_CHUNK), items=acked).as_dict()
    return steps, latency


# --- the store --------------------------------------------------------------------------------------------


def entries(spark: SparkSession, size: int) -> DataFrame:
    return spark.range(size).select(F.col("id").alias("n"), F.lit(BODY).alias("body"))


def run_store(
    spark: SparkSession,
    root: str,
    size: int,
    latency_calls: int,
    loop_calls: int,
    rows_per_file: int = DEFAULT_ROWS_PER_FILE,
) -> tuple[Steps, dict[str, list[float]]]:
    """The workload on a fresh store under ``root``; loops through ``execute`` stop after ``loop_calls`` calls."""
    store = StreamStore.open(os.path.join(root, f"store-{size}"), spark=spark, rows_per_file=rows_per_file)
    steps: Steps = {}
    seconds, appended = timed(store.append, KEY, entries(spark, size))
    steps["load"] = Timing(seconds, items=appended.count).as_dict()
    store.execute("XGROUP", "CREATE", KEY, GROUP, "0")
    seconds, delivered = timed(store.deliver, KEY, GROUP, "dead")
    assert delivered.count == size
    steps["deliver"] = Timing(seconds, items=delivered.count).as_dict()
    seconds, summary = timed(store.execute, "XPENDING", KEY, GROUP)
    assert summary[0] == size
    steps["xpending"] = Timing(seconds).as_dict()
    wait_until_stale()
    claim_1k = ("XAUTOCLAIM", KEY, GROUP, "rescuer-1k", str(MIN_IDLE_MS), "0-0", "COUNT", "1000")
    seconds, reply = timed(store.execute, *claim_1k)
    assert len(reply[1]) == min(1000, size)
    steps["claim_1k"] = Timing(seconds, items=len(reply[1])).as_dict()
    first, seq0 = appended.first_id.ms, appended.first_id.seq
    ids = [f"{first}-{seq0 + n}" for n in range(size - latency_calls, size)]
    latency = store_latency(store, ids) if latency_calls else {}
    expected = size - latency_calls
    wait_until_stale()
    selection = StaleSelection(min_idle_ms=MIN_IDLE_MS, streams=(KEY,), groups=(GROUP,))
    seconds, result = timed(store.claim_stale, selection, "rescuer-batch")
    assert result.total_claimed == expected, result.counts
    steps["batched_claim"] = Timing(seconds, items=result.total_claimed).as_dict()
    wait_until_stale()
    seconds, result = timed(store.claim_stale, selection, "rescuer-batch-justid", just_id=True)
    assert result.total_claimed == expected, result.counts
    steps["batched_claim_justid"] = Timing(seconds, items=result.total_claimed).as_dict()
    for step, count in (("autoclaim_100", 100), ("autoclaim_1000", 1000)):
        wait_until_stale()
        steps[step] = store_autoclaim_loop(store, count, expected, loop_calls, f"rescuer-{step}")
    all_ids = entries(spark, size).select(
        F.concat(F.lit(f"{first}-"), (F.col("n") + F.lit(seq0)).cast("string")).alias("id")
    )
    seconds, acked = timed(store.acknowledge, KEY, GROUP, all_ids)
    assert acked.count == expected
    steps["ack_all"] = Timing(seconds, items=acked.count).as_dict()
    return steps, latency


def store_autoclaim_loop(store: StreamStore, count: int, stale: int, max_calls: int, consumer: str) -> dict[str, Any]:
    """XAUTOCLAIM through ``execute`` from 0-0, at most ``max_calls`` calls; projected to the whole loop."""
    cursor = "0-0"
    samples: list[float] = []
    claimed = 0
    while len(samples) < max_calls:
        argv = ("XAUTOCLAIM", KEY, GROUP, consumer, str(MIN_IDLE_MS), cursor, "COUNT", str(count))
        seconds, reply = timed(store.execute, *argv)
        samples.append(seconds)
        claimed += len(reply[1])
        cursor = reply[0]
        if cursor == "0-0":
            assert claimed == stale, f"store loop claimed {claimed} of {stale}"
            break
    timing = projected(samples, calls_for(stale, count))
    return {**timing.as_dict(), "items": claimed, "measured_calls": len(samples)}


def store_latency(store: StreamStore, ids: Sequence[str]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in LATENCY_COMMANDS}
    for entry_id in ids:
        samples["XCLAIM"].append(_ms(store.execute, "XCLAIM", KEY, GROUP, "lat", "0", entry_id))
        samples["XPENDING"].append(_ms(store.execute, "XPENDING", KEY, GROUP))
        samples["XACK"].append(_ms(store.execute, "XACK", KEY, GROUP, entry_id))
    return samples


def _ms(action: Callable[..., Any], *args: Any) -> float:
    seconds, _ = timed(action, *args)
    return seconds * 1000


# --- the run ----------------------------------------------------------------------------------------------


def machine() -> str:
    cores = os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cores} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}"


def java_version() -> str:
    try:
        output = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    except OSError:
        return "unknown"
    return output.splitlines()[0] if output else "unknown"


def run(
    sizes: Sequence[int],
    *,
    latency_calls: int = 20,
    loop_calls: int = 5,
    spark: SparkSession | None = None,
    spark_conf: dict[str, str] | None = None,
    warm_up: bool = True,
    root: str | None = None,
    rows_per_file: int = DEFAULT_ROWS_PER_FILE,
    redis_from: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Runs the whole comparison and returns the results dictionary (see bench.report).

    ``redis_from``: an earlier run's results; sizes it measured take its Redis figures instead of
    running Redis again (Redis' times do not depend on the store's code). The results say so.
    """
    reused = (redis_from or {}).get("sizes", {})
    spark_start = None
    if spark is None:
        spark_start, spark = timed(build_session, conf=spark_conf)
    assert spark is not None
    root = root or tempfile.mkdtemp(prefix="bench-side-by-side-")
    results: dict[str, Any] = {"sizes": {}, "latency": {}}
    with RedisServer(extra_args=REDIS_ARGS) as server:
        client = redis.Redis(host=server.host, port=server.port)
        workload = RedisWorkload(client)
        if warm_up:  # JIT, class loading and the first Delta log of each kind, on both sides
            run_store(spark, os.path.join(root, "warm-up"), 200, 2, 1)
            run_redis(workload, 200, 2)
        smallest = min(sizes)
        for size in sorted(sizes):
            calls = latency_calls if size == smallest else 0
            if str(size) in reused and not calls:
                print(f"[N={size:,}] redis: taken from the earlier run", flush=True)
                redis_steps, redis_latency = reused[str(size)][REDIS], dict[str, list[float]]()
            else:
                print(f"[N={size:,}] redis ...", flush=True)
                redis_steps, redis_latency = run_redis(workload, size, calls)
            print(f"[N={size:,}] store ...", flush=True)
            store_steps, store_latency_ms = run_store(spark, root, size, calls, loop_calls, rows_per_file)
            results["sizes"][str(size)] = {REDIS: redis_steps, STORE: store_steps}
            if calls:
                results["latency"] = {REDIS: redis_latency, STORE: store_latency_ms}
            shutil.rmtree(os.path.join(root, f"store-{size}"), ignore_errors=True)
        client.flushall()
        results["meta"] = {
            "machine": machine(),
            "python": platform.python_version(),
            "java": java_version(),
            "pyspark": spark.version,
            "redis_version": server.version,
            "redis_py": redis.__version__,
            "spark_master": spark.sparkContext.master,
            "spark_conf": spark_conf or {},
            "spark_session_start_seconds": spark_start,
            "min_idle_ms": MIN_IDLE_MS,
            "loop_calls": loop_calls,
            "latency_calls": latency_calls,
            "rows_per_file": rows_per_file,
            "redis_reused_for": sorted(int(size) for size in reused if int(size) in sizes),
        }
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--latency-calls", type=int, default=20, help="calls per command, at the smallest N")
    parser.add_argument(
        "--loop-calls", type=int, default=5, help="XAUTOCLAIM calls the store's loops run before projecting"
    )
    parser.add_argument("--driver-memory", default="12g")
    parser.add_argument("--shuffle-partitions", default="4")
    parser.add_argument(
        "--rows-per-file", type=int, default=DEFAULT_ROWS_PER_FILE, help="the store's file cap (0: none)"
    )
    parser.add_argument("--out", default="docs/benchmarks", help="folder for results.json and time_vs_n.png")
    parser.add_argument(
        "--redis-from",
        help="an earlier results.json whose Redis figures to reuse (sizes without latency calls); "
        "only comparable if the machine is as fast as it was then",
    )
    args = parser.parse_args(argv)
    redis_from = None
    if args.redis_from:
        with open(args.redis_from, encoding="utf-8") as handle:
            redis_from = json.load(handle)
    conf = {
        "spark.driver.memory": args.driver_memory,
        "spark.sql.shuffle.partitions": args.shuffle_partitions,
        "spark.ui.enabled": "false",
    }
    results = run(
        args.sizes,
        latency_calls=args.latency_calls,
        loop_calls=args.loop_calls,
        spark_conf=conf,
        rows_per_file=args.rows_per_file,
        redis_from=redis_from,
    )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
    plot(results, os.path.join(args.out, "time_vs_n.png"))
    print(f"\nSpark session start: {results['meta']['spark_session_start_seconds']:.1f} s (once per job)\n")
    print(comparison_table(results))
    print()
    print(latency_table(results))


if __name__ == "__main__":
    main()

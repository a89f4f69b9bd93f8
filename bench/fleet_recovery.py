"""Fleet recovery side by side with redis-server: G groups, one stream each, every pending entry stale.

Run from the repo root, after ``bash scripts/setup.sh``::

    .venv/bin/python -m bench.fleet_recovery --groups 10 1000 10000 --out docs/benchmarks

For each G both systems get G streams (``tenant-00001`` ...) of ``--per-group`` entries, one group
``workers`` per stream, every entry delivered to consumer ``dead``, which then dies.

* Building the fleet: Redis by pipelined XADD, XGROUP CREATE and XREADGROUP (COUNT per-group) through
  redis-py; the store by its bulk APIs (``append_streams``, ``create_groups``, ``deliver_many``), one
  commit each.
* Recovery: Redis by an XAUTOCLAIM loop per group (COUNT 100), pipelined across groups: each round
  sends one call for every group whose cursor is not back at 0-0. The store by one run of the real
  ``streamclaim-recover`` command in its own process (``--min-idle 1s``); its time is reported both
  end to end (process start, JVM, Spark session) and as the run itself (the summary's started/ended).

Writes ``fleet.json`` to ``--out`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import redis
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.side_by_side import REDIS_ARGS, machine, timed
from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from tests.redis_server import RedisServer

GROUP = "workers"
BODY = "payload-0123456789abcdef"
MIN_IDLE_MS = 1_000
PIPELINE_CHUNK = 10_000
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stream_name(index: int) -> str:
    return f"tenant-{index:05d}"


# --- Redis ------------------------------------------------------------------------------------------------


def redis_build(client: redis.Redis, groups: int, per_group: int) -> dict[str, float]:
    """Loads, creates and delivers the fleet through pipelines; returns seconds per step."""
    client.flushall()
    names = [stream_name(i) for i in range(groups)]

    def pipelined(calls: Sequence[tuple[str, ...]]) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(calls), PIPELINE_CHUNK):
            pipe = client.pipeline(transaction=False)
            for call in calls[start : start + PIPELINE_CHUNK]:
                pipe.execute_command(*call)
            replies.extend(pipe.execute())
        return replies

    adds = [("XADD", name, "*", "n", str(n), "body", BODY) for name in names for n in range(per_group)]
    seconds: dict[str, float] = {}
    seconds["append"], _ = timed(pipelined, adds)
    seconds["create_groups"], _ = timed(pipelined, [("XGROUP", "CREATE", name, GROUP, "0") for name in names])
    reads = [("XREADGROUP", "GROUP", GROUP, "dead", "COUNT", str(per_group), "STREAMS", name, ">") for name in names]
    seconds["deliver"], _ = timed(pipelined, reads)
    pending = sum(int(client.xpending(name, GROUP)["pending"]) for name in names[:3])
    assert pending == min(3, groups) * per_group, pending
    return seconds


def redis_recover(client: redis.Redis, groups: int) -> tuple[float, int, int]:
    """XAUTOCLAIM COUNT 100 per group until each cursor is 0-0, pipelined across groups.

    Returns (seconds, entries claimed, calls).
    """
    cursors = {stream_name(i): "0-0" for i in range(groups)}
    claimed = calls = 0
    started = time.perf_counter()
    while cursors:
        names = list(cursors)
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.execute_command("XAUTOCLAIM", name, GROUP, "recovery", MIN_IDLE_MS, cursors[name], "COUNT", 100)
        replies = pipe.execute()
        calls += len(names)
        for name, reply in zip(names, replies, strict=True):
            claimed += len(reply[1])
            cursor = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if cursor == "0-0":
                del cursors[name]
            else:
                cursors[name] = cursor
    return time.perf_counter() - started, claimed, calls


# --- the store --------------------------------------------------------------------------------------------


def store_build(spark: SparkSession, path: str, groups: int, per_group: int) -> dict[str, float]:
    """Builds the fleet with the bulk APIs (one commit each); returns seconds per step."""
    store = StreamStore.open(path, spark=spark)
    rows = (
        spark.range(groups * per_group)
        .select(
            F.format_string("tenant-%05d", (F.col("id") / per_group).cast("long")).alias("stream"),
            (F.col("id") % per_group).alias("n"),
            F.lit(BODY).alias("body"),
        )
        .repartition(2, "stream")
    )
    seconds: dict[str, float] = {}
    seconds["append"], _ = timed(store.append_streams, rows, "stream")
    new_groups = [(stream_name(i), GROUP, "0") for i in range(groups)]
    seconds["create_groups"], created = timed(store.create_groups, new_groups)
    assert created == groups
    targets = [(stream_name(i), GROUP, "dead") for i in range(groups)]
    seconds["deliver"], deliveries = timed(store.deliver_many, targets, per_group)
    assert sum(d.count for d in deliveries) == groups * per_group
    return seconds


def store_recover(path: str) -> dict[str, Any]:
    """One run of the real ``streamclaim-recover`` in its own process; its timing and summary."""
    command = [
        os.path.join(os.path.dirname(sys.executable), "streamclaim-recover"),
        "--store",
        path,
        "--min-idle",
        f"{MIN_IDLE_MS}ms",
        "--log-level",
        "INFO",
        "--verbose",  # the whole log on stderr, timestamped: its step lines go into the results
    ]
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        raise RuntimeError(f"streamclaim-recover exited {finished.returncode}:\n{finished.stderr[-4000:]}")
    summary = json.loads(finished.stdout.strip().splitlines()[-1])

    def at(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    progress = [line for line in finished.stderr.splitlines() if "streamclaim_spark.fleet.recovery" in line]
    return {
        "process_seconds": seconds,
        "run_seconds": at(summary["ended_at"]) - at(summary["started_at"]),
        "totals": summary["totals"],
        "status": summary["status"],
        "progress": [line for line in progress if "/workers:" not in line],
    }


def state_layout(spark: SparkSession, path: str) -> dict[str, Any]:
    """Files, partitions and Delta log size of the state table."""
    from bench.layout import files

    table = files(spark, path)
    row = table.agg(F.count("*").alias("files"), F.countDistinct("partition").alias("partitions")).first()
    assert row is not None
    log_dir = os.path.join(path, "state", "_delta_log")
    log_bytes = sum(os.path.getsize(os.path.join(log_dir, name)) for name in os.listdir(log_dir))
    return {"files": row["files"], "partitions": row["partitions"], "delta_log_bytes": log_bytes}


def run(group_counts: Sequence[int], per_group: int, root: str) -> dict[str, Any]:
    spark = build_session()
    results: dict[str, Any] = {"groups": {}, "per_group": per_group}
    with RedisServer(extra_args=REDIS_ARGS) as server:
        client = redis.Redis(host=server.host, port=server.port)
        for groups in sorted(group_counts):
            print(f"[G={groups:,}] redis ...", flush=True)
            redis_steps = redis_build(client, groups, per_group)
            time.sleep(MIN_IDLE_MS / 1000 * 1.5)
            seconds, claimed, calls = redis_recover(client, groups)
            assert claimed == groups * per_group, (claimed, groups * per_group)
            redis_steps["recover"] = seconds
            redis_steps["recover_calls"] = calls
            client.flushall()
            print(f"[G={groups:,}] store ...", flush=True)
            path = os.path.join(root, f"fleet-{groups}")
            store_steps: dict[str, Any] = store_build(spark, path, groups, per_group)
            time.sleep(MIN_IDLE_MS / 1000 * 1.5)
            recovered = store_recover(path)
            assert recovered["totals"]["claimed"] == groups * per_group, recovered["totals"]
            store_steps.update(recovered)
            store_steps["layout"] = state_layout(spark, path)
            results["groups"][str(groups)] = {"redis": redis_steps, "store": store_steps}
            print(json.dumps(results["groups"][str(groups)], indent=1), flush=True)
        results["meta"] = {"machine": machine(), "redis_version": server.version, "pyspark": spark.version}
    spark.stop()
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "| G groups (entries) | step | Redis (pipelined) | store | store ÷ Redis |",
        "|---|---|---|---|---|",
    ]
    for groups, sides in sorted(results["groups"].items(), key=lambda item: int(item[0])):
        redis_steps, store_steps = sides["redis"], sides["store"]
        entries = int(groups) * results["per_group"]
        label = f"{int(groups):,} ({entries:,})"
        for step in ("append", "create_groups", "deliver"):
            r, s = redis_steps[step], store_steps[step]
            lines.append(f"| {label} | build: {step} | {r:.2f} s | {s:.1f} s | {s / r:.1f}× |")
        r = redis_steps["recover"]
        for name, key in (("recover (run)", "run_seconds"), ("recover (process)", "process_seconds")):
            s = store_steps[key]
            lines.append(f"| {label} | {name} | {r:.2f} s | {s:.1f} s | {s / r:.2f}× |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--per-group", type=int, default=100)
    parser.add_argument("--out", default=None, help="folder for fleet.json")
    parser.add_argument("--root", default=None, help="folder for the stores (default a temporary one)")
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="bench-fleet-")
    results = run(args.groups, args.per_group, root)
    print(table(results))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fleet.json"), "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()

"""``streamclaim-import`` of a big Redis stream, beside the floor of reading the same data from Redis.

Run from the repo root, after ``bash scripts/setup.sh``::

    .venv/bin/python -m bench.import_redis --entries 1000000 --pel 100000 --out docs/benchmarks

redis-server gets one stream of ``--entries`` entries (pipelined XADD through redis-py with hiredis)
and one group whose consumer ``dead`` was delivered the first ``--pel`` of them. Then, each in its own
process as a scheduled job runs it:

* the first import into a new store (every entry and PEL row copied);
* a re-run with nothing changed in Redis (only heads, consumers and the PEL are read and replaced);
* a re-run after ``--more`` new entries, 1,000 acks and one XDEL (appended, plus a diff of live IDs).

Each is reported end to end (process, JVM, session) and as the import itself (the summary's seconds).
The floor is what any copy must do on Redis' side: XRANGE COUNT 10000 over the stream and XPENDING
COUNT 10000 over the PEL through redis-py with hiredis, in this process. Writes ``import.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any

import redis

from bench.side_by_side import REDIS_ARGS, machine
from streamclaim_spark.importer.redis_reader import raw_replies
from tests.redis_server import RedisServer

KEY = "events"
GROUP = "workers"
BODY = "payload-0123456789abcdef"
CHUNK = 10_000


def load(client: redis.Redis, entries: int, pel: int) -> dict[str, float]:
    client.flushall()
    started = time.perf_counter()
    for start in range(0, entries, CHUNK):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(entries, start + CHUNK)):
            pipe.execute_command("XADD", KEY, "*", "n", n, "body", BODY)
        pipe.execute()
    loaded = time.perf_counter() - started
    client.xgroup_create(KEY, GROUP, "0")
    delivered = 0
    while delivered < pel:
        reply = client.execute_command(
            "XREADGROUP", "GROUP", GROUP, "dead", "COUNT", min(CHUNK, pel - delivered), "STREAMS", KEY, ">"
        )
        delivered += len(reply[0][1])
    return {"xadd_pipelined": loaded}


def read_floor(client: redis.Redis) -> float:
    """XRANGE and XPENDING pages over everything, the Redis side of any copy."""
    started = time.perf_counter()
    low = "-"
    while True:
        page = client.execute_command("XRANGE", KEY, low, "+", "COUNT", CHUNK)
        if len(page) < CHUNK:
            break
        low = "(" + (page[-1][0].decode() if isinstance(page[-1][0], bytes) else page[-1][0])
    low = "-"
    while True:
        rows = client.execute_command("XPENDING", KEY, GROUP, low, "+", CHUNK)
        if len(rows) < CHUNK:
            break
        low = "(" + (rows[-1][0].decode() if isinstance(rows[-1][0], bytes) else rows[-1][0])
    return time.perf_counter() - started


def run_import(url: str, store: str) -> dict[str, Any]:
    command = [os.path.join(os.path.dirname(sys.executable), "streamclaim-import"), "--from", url, "--store", store]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"streamclaim-import exited {done.returncode}:\n{done.stderr[-4000:]}")
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    summary["end_to_end_s"] = round(wall, 2)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--pel", type=int, default=100_000)
    parser.add_argument("--more", type=int, default=10_000)
    parser.add_argument("--root", default=None, help="folder for the store (default: a new temporary one)")
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="import-bench-")
    store = os.path.join(root, "store")
    with RedisServer(extra_args=REDIS_ARGS) as server:
        client = raw_replies(redis.Redis(host=server.host, port=server.port, protocol=2))
        url = f"redis://{server.host}:{server.port}/0"
        result: dict[str, Any] = {"machine": machine(), "date": datetime.now().isoformat(timespec="seconds")}
        result.update(entries=args.entries, pel=args.pel, redis=load(client, args.entries, args.pel))
        result["redis"]["read_floor_s"] = round(read_floor(client), 2)
        result["first"] = run_import(url, store)
        result["unchanged"] = run_import(url, store)
        client.execute_command("XADD", KEY, "*", "n", "late", "body", BODY)
        for start in range(0, args.more - 1, CHUNK):
            pipe = client.pipeline(transaction=False)
            for n in range(start, min(args.more - 1, start + CHUNK)):
                pipe.execute_command("XADD", KEY, "*", "n", n, "body", BODY)
            pipe.execute()
        first_ids = [row[0] for row in client.execute_command("XPENDING", KEY, GROUP, "-", "+", 1001)]
        client.execute_command("XACK", KEY, GROUP, *first_ids[:1000])
        client.execute_command("XDEL", KEY, first_ids[1000])
        result["changed"] = run_import(url, store)
    floor = result["redis"]["read_floor_s"]
    print(f"| run | end to end | import | entries copied | entries/s | vs Redis read floor ({floor} s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in ("first", "unchanged", "changed"):
        run = result[name]
        print(
            f"| {name} | {run['end_to_end_s']} s | {run['seconds']} s | {run['entries_copied']:,} | "
            f"{run['entries_per_second']:,.0f} | {run['seconds'] / floor:.1f}x |"
        )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "import.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()

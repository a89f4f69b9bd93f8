"""Throughput through the server as clients are added: streamclaim-server beside redis-server (issue 27).

Run from the repo root, with nothing else running::

    .venv/bin/python -m bench.server_clients --clients 1 5 20 50 --rounds 3

Each of C redis-py clients (hiredis installed) does ``--rounds`` rounds of XADD, XREADGROUP COUNT 10 and
XACK of what it got, all at once, first on **one** stream and group, then with the clients spread over
50 streams (one group each). The same workload runs against streamclaim-server (group commit on, the
default) and a real redis-server. For each run: wall time, commands per second, and for the server
the batches it committed and commands per batch (INFO batches). Afterwards every entry must have been
delivered exactly once and each PEL must be empty (checked, not assumed).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis

from streamclaim_spark import StreamStore
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.server import StreamClaimServer
from streamclaim_spark.state.session import build_session
from tests.redis_server import RedisServer

GROUP = "workers"


def _streams(layout: str, clients: int) -> list[str]:
    return ["shared"] if layout == "one stream" else [f"s{n}" for n in range(min(clients, 50))]


def run(port: int, clients: int, rounds: int, layout: str) -> tuple[float, int]:
    """Runs the workload on the server at ``port``; returns (seconds, commands) after checking it."""
    streams = _streams(layout, clients)
    with redis.Redis(port=port, decode_responses=True, socket_timeout=3600) as admin:
        admin.flushall()
        pipe = admin.pipeline(transaction=False)
        for key in streams:
            pipe.xgroup_create(key, GROUP, "$", mkstream=True)
        pipe.execute()
    delivered: dict[int, list[str]] = {}
    added: dict[int, list[str]] = {}
    failures: list[BaseException] = []
    commands = [0] * clients
    barrier = threading.Barrier(clients + 1)

    def work(n: int) -> None:
        key = streams[n % len(streams)]
        try:
            with redis.Redis(port=port, decode_responses=True, socket_timeout=3600) as client:
                client.ping()
                barrier.wait()
                added[n], delivered[n] = [], []
                for _ in range(rounds):
                    added[n].append(client.xadd(key, {"n": str(n)}))
                    got = client.xreadgroup(GROUP, f"c{n}", {key: ">"}, count=10)
                    ids = [i for _, entries in got for i, _ in entries]
                    commands[n] += 2
                    if ids:
                        client.xack(key, GROUP, *ids)
                        commands[n] += 1
                    delivered[n] += ids
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    with redis.Redis(port=port, decode_responses=True, socket_timeout=3600) as admin:
        rest = []
        for key in streams:
            got = admin.xreadgroup(GROUP, "drain", {key: ">"})
            ids = [i for _, entries in got for i, _ in entries]
            if ids:
                admin.xack(key, GROUP, *ids)
            rest += [(key, i) for i in ids]
            assert admin.xpending(key, GROUP)["pending"] == 0, f"{key}: PEL not empty"
    everything = sorted([(streams[n % len(streams)], i) for n, ids in added.items() for i in ids])
    seen = sorted([*rest, *((streams[n % len(streams)], i) for n, ids in delivered.items() for i in ids)])
    assert seen == everything, "an entry was delivered twice or never"
    return elapsed, sum(commands)


def _batches(port: int) -> dict[str, float]:
    with redis.Redis(port=port, decode_responses=True, socket_timeout=3600) as client:
        return {k: float(v) for k, v in client.info("batches").items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 5, 20, 50])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layouts", nargs="+", default=["one stream", "50 streams"])
    args = parser.parse_args(argv)
    spark = build_session(master="local[2]", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root, RedisServer() as reference:
        store = StreamStore.open(f"{root}/store", spark=spark)
        server = StreamClaimServer(store, ServerConfig(port=0, allow_flush=True)).start()
        try:
            run(server.port, 1, 1, "one stream")  # warm-up: the first commits compile Spark's classes
            for layout in args.layouts:
                for clients in args.clients:
                    before = _batches(server.port)
                    ours, commands = run(server.port, clients, args.rounds, layout)
                    after = _batches(server.port)
                    theirs, _ = run(reference.port, clients, args.rounds, layout)
                    batches = after["batches"] - before["batches"]
                    batched = after["batched_commands"] - before["batched_commands"]
                    row = {
                        "layout": layout,
                        "clients": clients,
                        "commands": commands,
                        "store_s": ours,
                        "redis_s": theirs,
                        "batches": int(batches),
                        "per_batch": batched / batches if batches else 0.0,
                    }
                    rows.append(row)
                    print(row, flush=True)
        finally:
            server.stop(grace_s=30)
    print()
    print(
        "| layout | clients | commands | store | commands/s | batches (commands each) "
        "| redis-server | commands/s | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['layout']} | {row['clients']} | {row['commands']} | {row['store_s']:.1f} s "
            f"| {row['commands'] / row['store_s']:.1f} | {row['batches']} ({row['per_batch']:.1f}) "
            f"| {row['redis_s'] * 1000:.1f} ms | {row['commands'] / row['redis_s']:.0f} "
            f"| {row['store_s'] / row['redis_s']:.0f}x |"
        )


if __name__ == "__main__":
    main()

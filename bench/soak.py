"""A store that runs for months, in minutes: streamclaim-server under steady load, disk against live data.

Run from the repo root, with nothing else running::

    .venv/bin/python -m bench.soak --minutes 10 --clients 8 --maintain off   # then streamclaim-maintain
    .venv/bin/python -m bench.soak --minutes 60 --clients 8 --maintain on --retain 5m --every 1m

``streamclaim-server`` runs as its own process (the console script's code, conf/ and flags), on a fresh
store. Each of ``--clients`` redis-py clients (hiredis) loops: a pipeline of 5 XADDs, XREADGROUP COUNT 5
on one group, XACK of what it got. Every minute the bench records entries/s, the p50/p99 round latency,
and the state table's disk against its newest version: data files (outside ``_delta_log``) and their
bytes, log files and bytes, and the live files the log's newest version references (replayed from the
log's checkpoint and commits with pyarrow: no second Spark driver beside the server). At the end every
entry must have been delivered exactly once and the PEL must be empty (checked). With ``--maintain off``,
a minute after the load stops ``streamclaim-maintain --retain 1m`` runs as its own process, and XLEN and
XPENDING must answer the same before and after it. The result goes to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import redis

PROJECT = Path(__file__).resolve().parents[1]
GROUP = "workers"
STREAM = "soak"


def disk(table: Path) -> dict[str, int]:
    """The table's data files and log files on disk (hidden ``.crc`` files left out, as Spark lists)."""
    usage = {"data_files": 0, "data_bytes": 0, "log_files": 0, "log_bytes": 0}
    for root, _, names in os.walk(table):
        kind = "log" if "_delta_log" in Path(root).parts else "data"
        for name in names:
            if name.startswith(
                ("."),
            ) or name.startswith("_"):
                continue
            usage[f"{kind}_files"] += 1
            usage[f"{kind}_bytes"] += (Path(root) / name).stat().st_size
    return usage


def live(table: Path) -> dict[str, int]:
    """Files and bytes the newest version references: the last checkpoint, then every commit after it."""
    log = table / "_delta_log"
    files: dict[str, int] = {}
    start = 0
    last = log / "_last_checkpoint"
    if last.exists():
        version = json.loads(last.read_text())["version"]
        for part in sorted(log.glob(f"{version:020d}.checkpoint*.parquet")):
            adds = pq.read_table(part, columns=["add"]).column("add").to_pylist()
            files.update({a["path"]: a["size"] for a in adds if a is not None})
        start = version + 1
    version = start
    while (commit := log / f"{version:020d}.json").exists():
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                files[action["add"]["path"]] = action["add"]["size"]
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
        version += 1
    return {"live_files": len(files), "live_bytes": sum(files.values()), "version": version - 1}


class Load:
    """The clients' loop, their rounds' latencies, and what they added and were delivered."""

    def __init__(self, port: int, clients: int) -> None:
        self.port, self.clients = port, clients
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.added: list[str] = []
        self.delivered: list[str] = []
        self.failures: list[BaseException] = []

    def work(self, n: int) -> None:
        try:
            with redis.Redis(port=self.port, decode_responses=True, socket_timeout=3600) as client:
                while not self.stop.is_set():
                    started = time.perf_counter()
                    pipe = client.pipeline(transaction=False)
                    for i in range(5):
                        pipe.xadd(STREAM, {"client": str(n), "i": str(i), "payload": "x" * 200})
                    added = pipe.execute()
                    got = client.xreadgroup(GROUP, f"c{n}", {STREAM: ">"}, count=5)
                    ids = [entry_id for _, entries in got for entry_id, _ in entries]
                    if ids:
                        client.xack(STREAM, GROUP, *ids)
                    with self.lock:
                        self.latencies.append(time.perf_counter() - started)
                        self.added += added
                        self.delivered += ids
        except BaseException as error:
            self.failures.append(error)

    def take_latencies(self) -> list[float]:
        with self.lock:
            taken, self.latencies = self.latencies, []
        return taken


def start_server(store: Path, port: int, flags: list[str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "streamclaim_spark.server", "--conf-dir", str(PROJECT / "conf")]
    command += ["--store", str(store), "--port", str(port), *flags]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=PROJECT)
    assert server.stdout is not None
    for line in server.stdout:
        if "ready on" in line:
            return server
    raise RuntimeError(f"the server exited with {server.wait()} before it was ready")


def sample(minute: int, table: Path, load: Load, seconds: float, entries_before: int) -> dict[str, Any]:
    latencies = sorted(load.take_latencies())
    with load.lock:
        entries = len(load.added)
    row: dict[str, Any] = {"minute": minute, "entries_per_s": (entries - entries_before) / seconds}
    if latencies:
        row["p50_ms"] = 1000 * statistics.median(latencies)
        row["p99_ms"] = 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    row.update(disk(table))
    row.update(live(table))
    row["data_over_live"] = row["data_bytes"] / row["live_bytes"] if row["live_bytes"] else None
    row["entries"] = entries
    print(json.dumps(row), flush=True)
    return row


def pel_and_length(port: int) -> tuple[int, int]:
    with redis.Redis(port=port, decode_responses=True, socket_timeout=3600) as client:
        return client.xlen(STREAM), client.xpending(STREAM, GROUP)["pending"]


def maintain(store: Path, table: Path, port: int, replies: tuple[int, int]) -> dict[str, Any]:
    """Runs ``streamclaim-maintain --retain 1m`` as its own process; checks XLEN and XPENDING did not move."""
    command = [sys.executable, "-m", "streamclaim_spark.cli.maintain", "--conf-dir", str(PROJECT / "conf")]
    command += ["--store", str(store), "--retain", "1m", "--log-level", "WARNING"]
    began = time.monotonic()
    maintained = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT, timeout=3600)
    assert maintained.returncode == 0, maintained.stderr[-3000:]
    seconds = time.monotonic() - began
    assert pel_and_length(port) == replies, "maintenance changed XLEN or XPENDING"
    summary = json.loads(maintained.stdout.strip().splitlines()[-1])
    return {**disk(table), **live(table), "seconds": seconds, "summary": summary["tables"]["state"]}


# Long: the soak in order (server, load and its per-minute samples, the checks, the maintenance run and
# its own checks); each step is a few lines and shares the store, the server and the samples.
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--maintain", choices=("on", "off"), default="off", help="the server's background maintenance")
    parser.add_argument("--retain", default="5m", help="store.history_retention with --maintain on")
    parser.add_argument("--every", default="1m", help="server.maintain_every with --maintain on")
    parser.add_argument("--port", type=int, default=6391)
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args(argv)
    flags = (
        ["--no-maintain"]
        if args.maintain == "off"
        else ["--maintain", "--retain", args.retain, "--maintain-every", args.every]
    )
    result: dict[str, Any] = {
        "minutes": args.minutes,
        "clients": args.clients,
        "maintain": args.maintain,
        "flags": flags,
    }
    with tempfile.TemporaryDirectory() as root:
        store = Path(root) / "store"
        table = store / "state"
        server = start_server(store, args.port, flags)
        try:
            with redis.Redis(port=args.port, decode_responses=True, socket_timeout=3600) as admin:
                admin.xgroup_create(STREAM, GROUP, "$", mkstream=True)
            load = Load(args.port, args.clients)
            threads = [threading.Thread(target=load.work, args=(n,)) for n in range(args.clients)]
            for thread in threads:
                thread.start()
            samples, entries, started = [], 0, time.monotonic()
            for minute in range(1, int(args.minutes) + 1):
                time.sleep(max(0.0, started + 60 * minute - time.monotonic()))
                samples.append(sample(minute, table, load, 60.0, entries))
                entries = samples[-1]["entries"]
                if load.failures:
                    raise load.failures[0]
            load.stop.set()
            for thread in threads:
                thread.join()
            result["samples"] = samples
            with redis.Redis(port=args.port, decode_responses=True, socket_timeout=3600) as admin:
                rest = [i for _, entries_ in admin.xreadgroup(GROUP, "drain", {STREAM: ">"}) for i, _ in entries_]
                if rest:
                    admin.xack(STREAM, GROUP, *rest)
            assert sorted([*load.delivered, *rest]) == sorted(load.added), "an entry was delivered twice or never"
            length, pending = pel_and_length(args.port)
            assert (length, pending) == (len(load.added), 0), (length, pending, len(load.added))
            result["after_load"] = {**disk(table), **live(table), "xlen": length, "pending": pending}
            print("after load", json.dumps(result["after_load"]), flush=True)
            if args.maintain == "off":
                # streamclaim-maintain a minute after the load stops, and once more a minute later: the
                # first run's compaction leaves the files it replaced for the retention, as any commit does.
                for run in ("after_maintain", "after_second_maintain"):
                    time.sleep(60)
                    result[run] = maintain(store, table, args.port, (length, pending))
                    print(run, json.dumps(result[run]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=300)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

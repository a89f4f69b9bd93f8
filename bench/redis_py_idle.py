"""redis-py's own ``test_xpending_range_idle`` against streamclaim-server: a real client's timing window.

Run from the repo root, with nothing else running::

    .venv/bin/python -m bench.redis_py_idle --runs 5 --out /tmp/redis-py-idle.json

redis-py 8.1's test reads one entry with each of two consumers, checks XPENDING lists both, then that
none is idle for 1,000 ms: the two XREADGROUPs and the first XPENDING must take less than that second.
A test that passes or fails by time belongs in no test suite (tests assert budgets, not times), so it
runs here: its steps as redis-py's suite writes them, against ``streamclaim-server`` run as its own
process on a fresh store, ``--runs`` times (the key deleted between), each run's outcome and duration.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from bench.soak import start_server


def test_xpending_range_idle(r: redis.Redis) -> None:
    """redis-py 8.1's ``tests/test_commands.py::test_xpending_range_idle``, its steps unchanged."""
    stream, group, consumer1, consumer2 = "stream", "group", "consumer1", "consumer2"
    r.xadd(stream, {"foo": "bar"})
    r.xadd(stream, {"foo": "bar"})
    r.xgroup_create(stream, group, 0)

    # read 1 message from the group with each consumer
    r.xreadgroup(group, consumer1, streams={stream: ">"}, count=1)
    r.xreadgroup(group, consumer2, streams={stream: ">"}, count=1)

    response = r.xpending_range(stream, group, min="-", max="+", count=5)
    assert len(response) == 2
    response = r.xpending_range(stream, group, min="-", max="+", count=5, idle=1000)
    assert len(response) == 0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--port", type=int, default=6392)
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root:
        server: subprocess.Popen[str] = start_server(Path(root) / "store", args.port, ["--no-maintain"])
        try:
            with redis.Redis(port=args.port, socket_timeout=3600) as client:
                for _ in range(args.runs):
                    client.delete("stream")
                    started = time.perf_counter()
                    try:
                        test_xpending_range_idle(client)
                        outcome = "passed"
                    except AssertionError:
                        outcome = "failed"
                    runs.append({"outcome": outcome, "ms": round(1000 * (time.perf_counter() - started), 1)})
                    print(json.dumps(runs[-1]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=60)
    result = {"run": {"date": datetime.date.today().isoformat()}, "runs": runs}
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())

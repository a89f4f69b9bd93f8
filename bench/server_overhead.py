"""What streamclaim-server adds to a command: the same commands through ``execute`` and over RESP.

Run from the repo root::

    .venv/bin/python -m bench.server_overhead --calls 15

Opens a one-entry store, starts the server on a free loopback port in the same process, and times PING
over RESP (no Spark) and XLEN and XRANGE both through ``StreamStore.execute`` and through redis-py
against the server, alternating the two paths call by call so warm-up and caching fall on both alike.
Prints the median of each in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from streamclaim_spark import StreamStore
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.server import StreamClaimServer
from streamclaim_spark.state.session import build_session


def _ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=15, help="timed calls per command and path")
    args = parser.parse_args(argv)
    spark = build_session(master="local[2]", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    with tempfile.TemporaryDirectory() as root:
        store = StreamStore.open(f"{root}/store", spark=spark)
        server = StreamClaimServer(store, ServerConfig(port=0)).start()
        store.execute("XADD", "s", "1-1", "f", "v")
        client = redis.Redis(port=server.port, decode_responses=True)
        try:
            pings = [_ms(client.ping) for _ in range(200)]
            print(f"PING over RESP: p50 {statistics.median(pings):.3f} ms")
            for name, argv_ in (("XLEN", ("XLEN", "s")), ("XRANGE", ("XRANGE", "s", "-", "+"))):
                direct, wire = [], []
                store.execute(*argv_)
                client.execute_command(*argv_)
                for _ in range(args.calls):
                    direct.append(_ms(lambda a=argv_: store.execute(*a)))
                    wire.append(_ms(lambda a=argv_: client.execute_command(*a)))
                print(
                    f"{name}: execute p50 {statistics.median(direct):.1f} ms, "
                    f"over RESP p50 {statistics.median(wire):.1f} ms"
                )
        finally:
            client.close()
            server.stop(grace_s=5)
    spark.stop()


if __name__ == "__main__":
    main()

"""Fixtures for the streamclaim-server tests: one server on a store and one reference redis-server per module.

The server runs in the test process on the session's SparkSession (no second JVM), on a free loopback port.
Tests in a module share both servers and start by flushing them, so each sees empty stores.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TypeVar

import hiredis
import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.server import StreamClaimServer
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.redis_server import RedisServer


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """The reference redis-server for this module."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamClaimServer]:
    """streamclaim-server on a fresh store, FLUSHDB allowed, on a free port.

    The store's clock stands still (``ManualClock``): a command takes the store a second or two of Spark work
    and redis-server microseconds, so on the wall clock the store's idle times would grow by that much per
    command; standing still, they are 0 as Redis' are, within the parity harness's tolerance."""
    path = str(tmp_path_factory.mktemp("served") / "store")
    store = StreamStore.open(path, spark=spark, clock=ManualClock(wall_clock_ms()))
    server = StreamClaimServer(store, ServerConfig(port=0, allow_flush=True)).start()
    yield server
    server.stop(grace_s=10)


class RawConnection:
    """A socket that sends bytes and returns each reply exactly as the server framed it."""

    def __init__(self, port: int, timeout: float = 120.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = hiredis.Reader()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sock.close()

    def call(self, *argv: str | bytes) -> bytes:
        """Sends one command as a multibulk frame and returns its reply's bytes."""
        return self.send(encode(argv))[0]

    def send(self, data: bytes, replies: int = 1) -> list[bytes]:
        """Sends raw bytes and returns the next ``replies`` replies, each as raw bytes."""
        self.sock.sendall(data)
        return [self._reply() for _ in range(replies)]

    def _reply(self) -> bytes:
        raw = bytearray()
        while True:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError(f"closed after {bytes(raw)!r}")
            raw += chunk
            self.reader.feed(chunk)
            if self.reader.gets() is not False:
                return bytes(raw)

    def until_closed(self) -> bytes:
        """Everything the server sends until it closes the connection."""
        data = bytearray()
        while chunk := self.sock.recv(65536):
            data += chunk
        return bytes(data)


def encode(argv: tuple[str | bytes, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        data = arg.encode() if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


Variant = TypeVar("Variant")

# Commands that change the stores: a script runs each once, in one variant (protocol, client flags).
STORE_WRITES = frozenset(
    {"FLUSHALL", "XADD", "XGROUP", "XREADGROUP", "XDEL", "XSETID", "XCLAIM", "XAUTOCLAIM", "XACK", "XTRIM", "DEL"}
)


def variants_per_step(
    commands: Sequence[str], writes: frozenset[str], variants: tuple[Variant, Variant]
) -> list[tuple[Variant, ...]]:
    """The variants (protocols, client flags) each step of a script runs in: both for a step that changes
    no store; one for a write, alternating per command name starting with ``variants[0]``. Each write's
    commit is paid once, and a command written more than once is seen in both variants."""
    seen: Counter[str] = Counter()
    plan: list[tuple[Variant, ...]] = []
    for command in commands:
        if command in writes:
            plan.append((variants[seen[command] % 2],))
            seen[command] += 1
        else:
            plan.append(variants)
    return plan

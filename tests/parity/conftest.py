"""Fixtures for the parity tests: one real redis-server per test run and a clean connection per test.

Every test that uses the server is marked ``parity`` automatically, so ``-m "not parity"`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisServer
from tests.resp import RespClient


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The reference redis-server, started once per run and stopped when the run ends."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[RespClient]:
    """A raw RESP connection to the reference server, emptied with FLUSHALL before the test."""
    client = redis_server.client()
    try:
        client.execute("FLUSHALL")
        yield client
    finally:
        client.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the reference server as ``parity``."""
    for item in items:
        if "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.parity)

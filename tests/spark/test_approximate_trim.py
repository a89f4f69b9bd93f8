"""``~`` trimming across several nodes, step by step against a real redis-server.

Redis trims with ``~`` by whole listpack nodes (up to stream-node-max-entries entries each, 100 by
default). Under KEEPREF the store counts chunks of ``NODE_ENTRIES`` live entries from the oldest and
removes whole chunks only, within LIMIT. The parity suite's scenarios are single-node streams; this one
has three nodes (100, 100, 50): the store builds its stream in one commit, redis-server gets the same
entries by XADD with the same IDs, on the same node size (``CONFIG SET`` to ``NODE_ENTRIES`` and no byte
limit), and every step that follows must reply the same on both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.commands.trimming import NODE_ENTRIES
from tests.parity.conftest import redis_server  # noqa: F401  (the parity tests' redis-server)
from tests.parity.harness import Step, assert_same_outcomes, run_on
from tests.redis_server import RedisServer
from tests.resp import RespClient

pytestmark = pytest.mark.spark

LENGTH = 250  # nodes of 100, 100 and 50 entries
# Redis' node size as the store's chunk: NODE_ENTRIES entries, no limit in bytes.
NODE_ENTRIES_SETTINGS = {"stream-node-max-entries": str(NODE_ENTRIES), "stream-node-max-bytes": "0"}


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[RespClient]:  # noqa: F811
    """The reference server, emptied, its stream nodes sized as the store's chunks (restored after)."""
    client = redis_server.client()

    def setting(name: str) -> str:
        reply = client.execute("CONFIG", "GET", name)
        assert isinstance(reply, list) and isinstance(reply[1], str), reply
        return reply[1]

    before = {name: setting(name) for name in ("stream-node-max-entries", "stream-node-max-bytes")}
    try:
        client.execute("FLUSHALL")
        assert client.execute("CONFIG", "SET", *_pairs(NODE_ENTRIES_SETTINGS)) == "OK"
        yield client
    finally:
        client.execute("CONFIG", "SET", *_pairs(before))
        client.close()


def _pairs(settings: dict[str, str]) -> list[str]:
    return [x for pair in settings.items() for x in pair]


def test_approximate_trims_of_a_stream_of_several_nodes_reply_as_redis_server(
    spark: SparkSession, store: StreamStore, redis: RespClient
) -> None:
    added = store.append("s", spark.range(LENGTH).selectExpr("CAST(id AS STRING) AS n"))
    assert added.first_id is not None and added.first_id.seq == 0
    ms = added.first_id.ms
    for n in range(LENGTH):  # the same entries, one node filled after the other
        assert redis.execute("XADD", "s", f"{ms}-{n}", "n", str(n)) == f"{ms}-{n}"
    steps: list[Step] = [
        ("XRANGE", "s", "-", "+"),  # the same stream on both sides
        ("XTRIM", "s", "MAXLEN", "~", "120"),  # the first node
        ("XTRIM", "s", "MAXLEN", "~", "120"),  # not the second: that would leave 50
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "99"),  # a node is more than the limit
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "120"),
        ("XRANGE", "s", "-", "+", "COUNT", "1"),
        ("XTRIM", "s", "MINID", "~", f"{ms}-249"),  # the last, partial node: not every entry is below
        ("XADD", "s", "MINID", "~", f"{ms + 1}", f"{ms + 1}-0", "f", "v"),
        ("XLEN", "s"),  # the new entry joined the last node, which is no longer all below
        ("XTRIM", "s", "MINID", "~", f"{ms + 2}"),
        ("XINFO", "STREAM", "s"),
    ]
    expected = run_on(redis, steps)
    actual = run_on(store, steps)

    assert_same_outcomes(steps, expected, actual)

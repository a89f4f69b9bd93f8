"""Random, mostly malformed argv thrown at a real redis-server and at the store: same reply or error.

Every example is one command run on both; state evolves identically on both sides, so the commands of
later examples meet streams, groups and pending entries made by earlier ones. Tokens avoid ``*`` IDs
(which depend on each side's clock), BLOCK (which would wait) and ``~`` (Redis trims by node, the
store by chunks of 100 live entries, which agree only without gaps: test_parity's ``~`` scenarios and
test_approximate_trim.py check it); everything else is fair game,
including wrong arities, unknown options, bad numbers, bad IDs and names that do not exist.
A Python traceback in place of a Redis error fails the test (the harness raises StepRaisedError).

The store's clock reads, for each command, the moment redis-server ran the same command, so time passes
alike on both sides (the examples span minutes, during which Redis' idle times grow) while a store command's
own seconds of Spark work never show: clock fields are compared at the harness's tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamclaim_spark import StreamStore
from tests.clock import ManualClock
from tests.parity.harness import assert_same_outcomes, at_the_moment_redis_ran, run_on
from tests.parity.test_parity import _like_server
from tests.resp import RespClient

COMMANDS = [
    "XADD", "XRANGE", "XREVRANGE", "XLEN", "XDEL", "XTRIM", "XSETID", "XGROUP", "XREADGROUP", "XREAD",
    "XACK", "XPENDING", "XCLAIM", "XAUTOCLAIM", "XINFO", "EXISTS",
]  # fmt: skip
TOKENS = [
    "s", "t", "g", "h", "alice", "bob", "", "0", "1", "-1", "5", "007", "+5", "abc", "1-0", "2-0", "3-1",
    "0-0", "1-*", "18446744073709551615-18446744073709551615", "(1-0", "(", "-", "+", "$", ">", "=",
    "MAXLEN", "MINID", "LIMIT", "NOMKSTREAM", "COUNT", "STREAMS", "GROUP", "NOACK", "IDLE", "TIME",
    "RETRYCOUNT", "FORCE", "JUSTID", "LASTID", "CREATE", "SETID", "DESTROY", "CREATECONSUMER",
    "DELCONSUMER", "MKSTREAM", "ENTRIESREAD", "STREAM", "GROUPS", "CONSUMERS", "FULL", "HELP", "f", "v",
    "9223372036854775808", "3600000",
]  # fmt: skip

argv_strategy = st.builds(
    lambda name, rest: (name, *rest),
    st.sampled_from(COMMANDS),
    st.lists(st.sampled_from(TOKENS), min_size=0, max_size=8),
)


@pytest.fixture(scope="module")
def fuzz_pair(
    redis_server: object, spark: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RespClient, StreamStore, ManualClock]]:
    """One server connection and one store (on a hand-moved clock) for the whole module, both starting empty."""
    client = redis_server.client()  # type: ignore[attr-defined]
    client.execute("FLUSHALL")
    clock = ManualClock(0)
    path = str(tmp_path_factory.mktemp("fuzz") / "store")
    store = StreamStore.open(path, spark=spark, clock=clock)  # type: ignore[arg-type]
    # A little state to aim at: a stream with entries, a group, a consumer with pending entries.
    seed = [
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "2-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
    ]
    at_the_moment_redis_ran(clock, run_on(client, seed))
    run_on(store, seed)
    yield client, store, clock
    client.close()


@pytest.mark.spark
@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=argv_strategy)
def test_random_argv_gets_the_same_reply_or_error_from_both(
    fuzz_pair: tuple[RespClient, StreamStore, ManualClock], argv: tuple[str, ...]
) -> None:
    client, store, clock = fuzz_pair
    steps = [argv]
    expected = run_on(client, steps)
    at_the_moment_redis_ran(clock, expected)
    actual = [_like_server(argv, expected[0], outcome) for outcome in run_on(store, steps)]
    assert_same_outcomes(steps, expected, actual)

"""Checks of the parity harness itself, run against two independent real redis-servers.

Two real servers must always agree, so any failure here is a harness bug: the comparison is too strict
(clock fields), too lax (a real difference is missed) or the RESP client misreads a reply.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from streamclaim_spark import errors
from streamclaim_spark.errors import ReplyError
from tests.clock import ManualClock
from tests.parity.harness import (
    Outcome,
    Pause,
    Step,
    StepRaisedError,
    assert_same_outcomes,
    compare_scenario,
    diff_outcome,
    run_on,
)
from tests.redis_server import RedisServer
from tests.resp import RespClient

CONSUMER_GROUP_SCENARIO: list[Step] = [
    ("XADD", "s", "1-1", "f", "v1"),
    ("XADD", "s", "1-2", "f", "v2"),
    ("XADD", "s", "1-3", "f", "v3"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    ("XPENDING", "s", "g"),
    ("XPENDING", "s", "g", "-", "+", "10"),
    ("XPENDING", "s", "g", "IDLE", "0", "-", "+", "10", "alice"),
    ("XCLAIM", "s", "g", "bob", "0", "1-1"),
    ("XAUTOCLAIM", "s", "g", "carol", "0", "0-0", "COUNT", "10", "JUSTID"),
    ("XACK", "s", "g", "1-2"),
    ("XINFO", "GROUPS", "s"),
    ("XINFO", "CONSUMERS", "s", "g"),
    ("XINFO", "STREAM", "s"),
    ("XINFO", "STREAM", "s", "FULL"),
    ("XPENDING", "s", "nosuchgroup", "-", "+", "10"),
    ("xadd", "s"),
    ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"),
    ("GET", "missing"),
]


class Delayed:
    """Wraps a target and sleeps after each ``after`` command, so later clock-based values differ."""

    def __init__(self, target: RespClient, after: str, ms: int) -> None:
        self.target = target
        self.after = after
        self.ms = ms

    def execute(self, *argv: str | bytes) -> object:
        reply = self.target.execute(*argv)
        if isinstance(argv[0], str) and argv[0].upper() == self.after:
            time.sleep(self.ms / 1000)
        return reply


class Exploding:
    """A target whose XLEN raises a plain Python exception, like a store with a bug."""

    def __init__(self, target: RespClient) -> None:
        self.target = target

    def execute(self, *argv: str | bytes) -> object:
        if argv[0] == "XLEN":
            raise ValueError("boom")
        return self.target.execute(*argv)


@pytest.fixture(scope="module")
def other_server() -> Iterator[RedisServer]:
    """A second, independent redis-server playing the part of the store."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def other(other_server: RedisServer) -> Iterator[RespClient]:
    client = other_server.client()
    try:
        client.execute("FLUSHALL")
        yield client
    finally:
        client.close()


def test_two_real_servers_agree_on_a_consumer_group_scenario(redis: RespClient, other: RespClient) -> None:
    outcomes = compare_scenario(other, redis, CONSUMER_GROUP_SCENARIO)

    assert outcomes[4].error == errors.BUSYGROUP
    assert outcomes[17].error == errors.nogroup_key_or_group("s", "nosuchgroup").line
    assert outcomes[18].error == errors.wrong_arity("xadd").line
    assert outcomes[20] == Outcome(None)
    assert outcomes[8].reply is not None and isinstance(outcomes[8].reply, list) and len(outcomes[8].reply) == 3


def test_error_outcomes_carry_the_full_redis_error_line_including_the_code(redis: RespClient) -> None:
    steps: list[Step] = [
        ("XGROUP", "CREATE", "nokey", "g", "$"),
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "1-1", "f", "v"),
        ("XRANGE", "s", "x", "+"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XINFO", "CONSUMERS", "s", "g"),
    ]

    outcomes = run_on(redis, steps)

    assert [outcome.error for outcome in outcomes] == [
        errors.XGROUP_KEY_REQUIRED,
        None,
        "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        errors.INVALID_STREAM_ID,
        errors.nogroup_xreadgroup("s", "g").line,
        errors.nogroup_for_key_name("s", "g").line,
    ]


@pytest.mark.parametrize(
    ("probe", "field"),
    [
        (("XPENDING", "s", "g", "-", "+", "10"), "idle"),
        (("XINFO", "CONSUMERS", "s", "g"), "idle"),
        (("XINFO", "STREAM", "s", "FULL"), "delivery time"),
    ],
)
def test_clock_fields_that_differ_by_a_short_sleep_are_tolerated_but_not_ignored(
    redis: RespClient, other: RespClient, probe: tuple[str, ...], field: str
) -> None:
    steps: list[Step] = [
        ("XADD", "s", "1-1", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        probe,
    ]
    expected = run_on(redis, steps)
    actual = run_on(Delayed(other, after="XREADGROUP", ms=100), steps)

    assert diff_outcome(probe, expected[3], actual[3], tolerance_ms=50) is not None, "the sleep changed nothing"
    assert_same_outcomes(steps, expected, actual)
    with pytest.raises(AssertionError, match=rf"step 3: .*\n.*{field}.*tolerance 10 ms"):
        assert_same_outcomes(steps, expected, actual, tolerance_ms=10)


def test_a_real_difference_is_reported_with_the_step_its_argv_and_both_outcomes(
    redis: RespClient, other: RespClient
) -> None:
    other.execute("XADD", "s", "0-5", "f", "extra")
    steps: list[Step] = [("XADD", "s", "1-1", "f", "v"), ("XLEN", "s"), ("XRANGE", "s", "-", "+"), ("XLEN", "s")]

    with pytest.raises(AssertionError) as failure:
        compare_scenario(other, redis, steps)

    message = str(failure.value)
    assert message.startswith("outcomes differ at step 1: XLEN s\n  reply: 1 != 2\n")
    assert "redis-server" in message and "store" in message
    assert "later steps that differ too: 2, 3" in message
    assert ">>   1  XLEN s" in message


def test_an_error_on_one_side_only_is_a_difference(redis: RespClient) -> None:
    steps: list[Step] = [("XLEN", "s")]
    with pytest.raises(AssertionError, match=r"error: None != 'ERR boom'"):
        assert_same_outcomes(steps, run_on(redis, steps), [Outcome(error="ERR boom")])


def test_an_exception_other_than_reply_error_fails_the_test_naming_the_step(redis: RespClient) -> None:
    steps: list[Step] = [("XADD", "s", "1-1", "f", "v"), ("XLEN", "s")]

    with pytest.raises(StepRaisedError, match=r"step 1: XLEN s\n.*raised ValueError: boom") as failure:
        run_on(Exploding(redis), steps)

    assert isinstance(failure.value, AssertionError)
    assert isinstance(failure.value.__cause__, ValueError)


def test_reply_types_must_match_exactly_not_just_compare_equal() -> None:
    steps: list[Step] = [("XLEN", "s")]
    with pytest.raises(AssertionError, match=r"1 \(int\) != True \(bool\)"):
        assert_same_outcomes(steps, [Outcome(1)], [Outcome(True)])
    with pytest.raises(AssertionError, match=r"\(list\) != .* \(tuple\)"):
        assert_same_outcomes(steps, [Outcome(["1-1"])], [Outcome(("1-1",))])


def test_pause_steps_let_min_idle_time_claims_agree(redis: RespClient, other: RespClient) -> None:
    steps: list[Step] = [
        ("XADD", "s", "1-1", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "bob", "200", "1-1", "JUSTID"),
        Pause(250),
        ("XCLAIM", "s", "g", "bob", "200", "1-1", "JUSTID"),
    ]

    outcomes = compare_scenario(other, redis, steps)

    assert outcomes[3].reply == []
    assert outcomes[5].reply == ["1-1"]


def _full_reply(seen_time: int, delivered: int, active_time: int | None = None) -> list[object]:
    consumer: list[object] = ["name", "alice", "seen-time", seen_time]
    if active_time is not None:
        consumer += ["active-time", active_time]
    consumer += ["pel-count", 1, "pending", [["1-1", delivered, 1]]]
    group = ["name", "g", "pel-count", 1, "pending", [["1-1", "alice", delivered, 1]], "consumers", [consumer]]
    return ["length", 1, "groups", [group]]


def test_absolute_times_are_compared_as_ages_so_runs_at_different_moments_agree() -> None:
    step: Step = ("XINFO", "STREAM", "s", "FULL")
    hour = 3_600_000
    expected = Outcome(_full_reply(10_000, 10_000), started_ms=10_100, finished_ms=10_101)
    same_ages = Outcome(_full_reply(10_000 + hour, 10_000 + hour), started_ms=10_100 + hour, finished_ms=10_103 + hour)
    older = Outcome(_full_reply(10_000 + hour, 5_000 + hour), started_ms=10_100 + hour, finished_ms=10_103 + hour)

    assert diff_outcome(step, expected, same_ages) is None
    found = diff_outcome(step, expected, older)
    assert (
        found is not None
        and "[groups][0][pending][0][2] (delivery time)" in found
        and "ages at the step 100..101 ms vs 5100..5103 ms" in found
    )


def test_never_values_of_inactive_and_active_time_must_match_exactly() -> None:
    consumers_step: Step = ("XINFO", "CONSUMERS", "s", "g")
    never = Outcome([["name", "c", "pending", 0, "idle", 5, "inactive", -1]])
    recent = Outcome([["name", "c", "pending", 0, "idle", 5, "inactive", 3]])
    assert diff_outcome(consumers_step, never, recent) == "reply[0][inactive]: -1 != 3"

    full_step: Step = ("XINFO", "STREAM", "s", "FULL")
    expected = Outcome(_full_reply(100, 100, active_time=-1), started_ms=200, finished_ms=200)
    actual = Outcome(_full_reply(100, 100, active_time=199), started_ms=200, finished_ms=200)
    assert diff_outcome(full_step, expected, actual) == "reply[groups][0][consumers][0][active-time]: -1 != 199"


def test_resp_client_maps_each_reply_type(redis: RespClient) -> None:
    assert redis.execute("PING") == "PONG"
    assert redis.execute("SET", "k", "héllo") == "OK"
    assert redis.execute("GET", "k") == "héllo"
    assert redis.execute("SET", "raw", b"\xff\xfe") == "OK"
    assert redis.execute("GET", "raw") == b"\xff\xfe"
    assert redis.execute("GET", "missing") is None
    assert redis.execute("RPUSH", "l", "a", "b") == 2
    assert redis.execute("XREAD", "STREAMS", "nostream", "0") is None
    redis.execute("XADD", "s", "1-1", "f", "v")
    assert redis.execute("XRANGE", "s", "-", "+") == [["1-1", ["f", "v"]]]


def test_resp_client_reads_replies_larger_than_one_socket_read(redis: RespClient) -> None:
    big = "x" * 1_000_000
    redis.execute("SET", "big", big)
    for i in range(200):
        redis.execute("RPUSH", "list", f"{i}-" + "y" * 1000)

    assert redis.execute("GET", "big") == big
    items = redis.execute("LRANGE", "list", "0", "-1")
    assert isinstance(items, list) and len(items) == 200 and items[199] == "199-" + "y" * 1000


def test_resp_client_raises_errors_nested_in_arrays_and_stays_in_step(redis: RespClient) -> None:
    redis.execute("SET", "k", "v")
    redis.execute("MULTI")
    redis.execute("LPUSH", "k", "x")
    redis.execute("SET", "other", "1")

    with pytest.raises(ReplyError, match=r"^WRONGTYPE "):
        redis.execute("EXEC")

    assert redis.execute("GET", "other") == "1"
    assert redis.execute("PING") == "PONG"


def test_redis_server_exposes_its_version_and_leaves_no_process_behind() -> None:
    with RedisServer() as server:
        pid = server.pid
        assert pid is not None and server.port > 0
        assert server.version.split(".")[0].isdigit()
        with server.client() as client:
            assert client.execute("CONFIG", "GET", "stream-node-max-bytes") == ["stream-node-max-bytes", "0"]

    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_missing_redis_server_skips_locally_but_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(RuntimeError, match="redis-server is not on PATH"):
        RedisServer().start()

    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=r"scripts/setup\.sh"):
        RedisServer().start()


class _OnManualClock:
    """A target timed on a hand-moved clock, like a store opened with one; it runs nothing."""

    def __init__(self, now: int) -> None:
        self.clock = ManualClock(now)

    def execute(self, *argv: str | bytes) -> object:
        return self.clock.now


def test_a_pause_moves_a_manual_clock_by_its_length_instead_of_sleeping() -> None:
    target = _OnManualClock(1_000)
    started = time.monotonic()

    outcomes = run_on(target, [("TIME",), Pause(60_000), ("TIME",)])

    assert time.monotonic() - started < 1
    assert [o.reply for o in outcomes] == [1_000, None, 61_000]
    assert (outcomes[1].started_ms, outcomes[1].finished_ms) == (1_000, 61_000)

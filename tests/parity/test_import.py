"""``streamclaim-import``: a real redis-server's streams copied into a store, which then answers like it.

One test copies a varied Redis (groups and consumers, deleted and trimmed entries, binary payloads, a
stream without groups, a group whose entries-read is unknown, PEL entries with high delivery counts and
old delivery times set by XCLAIM TIME/RETRYCOUNT, a PEL entry whose stream entry is gone) and compares
every reading command's reply; then Redis changes and a second import must bring the store level again.
The first import pages (``page=4``), the second reads each stream in one atomic reply.

The store's clock is hand-moved: the import copies Redis' absolute times, so the store's idle times match
Redis' when its clock reads what Redis' did when it answered the same checks, and that is where it is set
(the checks take Redis milliseconds, the store seconds). Clock fields are compared at the harness's tolerance.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from streamclaim_spark import StreamStore
from streamclaim_spark.cli.import_redis import EXIT_BAD_INPUT, EXIT_OK, EXIT_REDIS, redacted, run_import
from streamclaim_spark.core.config import SparkConfig
from streamclaim_spark.engine.file_commit import FILES_OPERATION
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.importer import StoreChangedError, StreamCopy, import_redis
from streamclaim_spark.importer.redis_reader import MAX_READS, raw_replies, read_stream
from streamclaim_spark.importer.staging import ENTRIES, Staging
from streamclaim_spark.state.delta_io import commit_info
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.parity.harness import Outcome, Step, assert_same_outcomes, at_the_moment_redis_ran, run_on
from tests.parity.test_parity import _AsRespClientSees, _like_server
from tests.redis_server import RedisServer, free_port
from tests.resp import RespClient
from tests.spark.pel import current_version

SETUP: list[Step] = [
    *(("XADD", "orders", f"1-{n}", "item", f"i{n}", "qty", str(n), "item", "dup") for n in range(1, 15)),
    ("XADD", "orders", "2-0", b"\xff\x00bin", b"\x80\x81", b"", b""),
    ("XGROUP", "CREATE", "orders", "billing", "0"),
    ("XGROUP", "CREATE", "orders", "late", "1-5"),  # entries-read unknown
    ("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "6", "STREAMS", "orders", ">"),
    ("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "5", "STREAMS", "orders", ">"),
    ("XREADGROUP", "GROUP", "late", "carol", "COUNT", "3", "STREAMS", "orders", ">"),
    ("XCLAIM", "orders", "billing", "dave", "0", "1-2", "1-3", "TIME", "1000", "RETRYCOUNT", "57"),
    ("XCLAIM", "orders", "billing", "alice", "0", "1-9", "IDLE", "86400000", "RETRYCOUNT", "12"),
    ("XACK", "orders", "billing", "1-4", "1-5"),
    ("XGROUP", "CREATECONSUMER", "orders", "billing", "idle-erin"),
    ("XDEL", "orders", "1-3", "1-12"),  # 1-3 stays pending in billing: its entry is gone
    ("XTRIM", "orders", "MINID", "1-2"),
    *(("XADD", "plain", f"5-{n}", "n", str(n)) for n in range(3)),  # a stream without groups
    ("XADD", "bin", "7-1", bytes(range(256)), b"\x00\xff", b"dup", b"\xc3\x28", b"dup", b"\x80"),
    ("XGROUP", "CREATE", "bin", "g", "$", "ENTRIESREAD", "1"),
    ("XADD", "drained", "9-1", "f", "v"),
    ("XDEL", "drained", "9-1"),
    ("SET", "not-a-stream", "x"),
]

CHANGES: list[Step] = [
    ("XADD", "orders", "3-1", "item", "new"),
    ("XACK", "orders", "billing", "1-6", "1-7"),
    ("XCLAIM", "orders", "billing", "frank", "0", "1-8", "1-10"),
    ("XGROUP", "CREATE", "orders", "audit", "1-9"),
    ("XREADGROUP", "GROUP", "audit", "gina", "COUNT", "2", "STREAMS", "orders", ">"),
    ("XGROUP", "DELCONSUMER", "orders", "billing", "bob"),
    ("XDEL", "orders", "1-7"),
    ("XGROUP", "DESTROY", "bin", "g"),
    ("DEL", "plain"),
    ("XADD", "fresh", "8-1", "f", "v"),
]


# After CHANGES, what an import decides on the driver: no stream, group or consumer goes.
ADDITIONS: list[Step] = [
    ("XADD", "orders", "4-1", "item", "later"),
    ("XDEL", "orders", "1-13"),
    ("XTRIM", "orders", "MINID", "1-6"),
    ("XADD", "orders", "4-2", "item", "later"),
    ("XACK", "orders", "billing", "1-9", "1-10"),
    ("XACK", "orders", "late", "1-6"),
    ("XCLAIM", "orders", "billing", "hal", "0", "1-8"),
    ("XREADGROUP", "GROUP", "audit", "gina", "COUNT", "1", "STREAMS", "orders", ">"),
]


def checks(streams: dict[str, list[str]]) -> list[Step]:
    """Every reading command the import promises, on each stream and group."""
    steps: list[Step] = []
    for key, groups in streams.items():
        steps += [("XLEN", key), ("XRANGE", key, "-", "+"), ("XINFO", "STREAM", key)]
        steps += [("XINFO", "STREAM", key, "FULL", "COUNT", "3"), ("XINFO", "STREAM", key, "FULL", "COUNT", "0")]
        steps.append(("XINFO", "GROUPS", key))
        for group in groups:
            steps += [("XPENDING", key, group), ("XPENDING", key, group, "-", "+", "100")]
            steps += [("XPENDING", key, group, "-", "+", "100", "alice"), ("XINFO", "CONSUMERS", key, group)]
    return steps


BEFORE = {"orders": ["billing", "late"], "plain": [], "bin": ["g"], "drained": []}
AFTER = {"orders": ["audit", "billing", "late"], "bin": [], "drained": [], "fresh": []}


@pytest.fixture
def client(redis: RespClient, redis_server: RedisServer) -> Iterator[redis_py.Redis]:
    connection = redis_py.Redis(host=redis_server.host, port=redis_server.port, protocol=2)
    try:
        yield connection
    finally:
        connection.close()


def assert_store_answers_like(
    redis: RespClient, store: StreamStore, clock: ManualClock, streams: dict[str, list[str]]
) -> None:
    """The checks on both; the store's in one pipeline, which reads each stream once (~5x faster here), on
    its clock set to when Redis started them."""
    steps = checks(streams)
    expected = run_on(redis, steps)
    at_the_moment_redis_ran(clock, expected)
    started = clock.now
    pipe = store.pipeline(decode_responses=False)
    for step in steps:
        pipe.execute_command(*step)  # type: ignore[misc]
    replies = pipe.execute(raise_on_error=False)
    finished = clock.now
    shaped = _AsRespClientSees(store)._shaped
    actual = [
        Outcome(None, str(reply), started, finished)
        if isinstance(reply, ReplyError)
        else Outcome(shaped(reply), None, started, finished)
        for reply in replies
    ]
    actual = [_like_server(step, e, a) for step, e, a in zip(steps, expected, actual, strict=True)]
    assert_same_outcomes(steps, expected, actual)


def delivery_times(reply: Any) -> dict[tuple[str, str], int]:
    """(group, entry ID) -> delivery time, from an XINFO STREAM FULL reply: absolute times, copied as they are."""
    fields = dict(zip(reply[0::2], reply[1::2], strict=True))
    times = {}
    for group in fields["groups"]:
        record = dict(zip(group[0::2], group[1::2], strict=True))
        times.update({(record["name"], item[0]): item[2] for item in record["pending"]})
    return times


def assert_same_delivery_times(redis: RespClient, store: StreamStore, key: str, slack_ms: int) -> None:
    """The harness compares times as ages, loosely; the import copies them, so they must agree to ``slack_ms``."""
    argv = ("XINFO", "STREAM", key, "FULL", "COUNT", "0")
    expected = delivery_times(redis.execute(*argv))
    actual = delivery_times(_AsRespClientSees(store).execute(*argv))
    assert expected.keys() == actual.keys()
    assert all(abs(actual[k] - expected[k]) <= slack_ms for k in expected), (expected, actual)


@pytest.mark.spark
def test_an_import_answers_as_redis_did_and_a_second_run_after_changes_brings_the_store_level(
    redis: RespClient, client: redis_py.Redis, make_store: Any
) -> None:
    run_on(redis, SETUP)
    clock = ManualClock(wall_clock_ms())
    store = make_store(decode_responses=False, clock=clock)

    first = import_redis(store, client, ["orders", "plain", "bin", "drained"], page=4)

    assert (first.streams, first.groups, first.consumers) == (4, 3, 5)
    assert first.modes == {"full": 4}
    assert first.entries_copied == 12 + 3 + 1
    # The summary's metrics are the import commit's, whatever auto compaction committed after it.
    assert first.rows_inserted == first.entries_copied + first.pel_rows + first.consumers + first.groups + 4
    assert_store_answers_like(redis, store, clock, BEFORE)
    # Paged or not, delivery times are copied exactly (reading._pending_pages says how).
    assert_same_delivery_times(redis, store, "orders", slack_ms=0)
    run_on(redis, CHANGES)

    second = import_redis(store, client, ["orders", "plain", "bin", "drained", "fresh"])

    assert second.streams_removed == ["plain"]
    assert second.modes == {"diff": 1, "append": 2, "full": 1}
    assert second.entries_copied == 1 + 1
    assert second.changed_while_read == []
    assert_store_answers_like(redis, store, clock, AFTER)
    assert_same_delivery_times(redis, store, "orders", slack_ms=0)
    assert store.execute("XLEN", "plain") == 0

    third = import_redis(store, client, ["orders", "bin", "drained", "fresh"])

    # Nothing changed in Redis: the re-run, decided on the driver, finds the store level and commits
    # nothing; its version is the one it read (the second import's, or an auto compaction's after it).
    assert (third.entries_copied, third.rows_inserted, third.rows_updated, third.rows_deleted) == (0, 0, 0, 0)
    assert second.commit_version <= third.commit_version == store.runner.snapshot().version
    assert_store_answers_like(redis, store, clock, AFTER)
    length = store.execute("XLEN", "orders")
    run_on(redis, ADDITIONS)
    entries_gone = length + 2 - redis.execute("XLEN", "orders")

    fourth = import_redis(store, client, ["orders", "bin", "drained", "fresh"])

    # Acks, claims, deliveries, new entries and a deleted one: still decided on the driver, and level with Redis.
    assert fourth.modes == {"append": 3, "diff": 1}
    # Only the live IDs up to the largest one XDEL removed (1-13) are read: the later ones are all live,
    # and the trimmed ones lie below the first live ID.
    live_before = redis.execute("XRANGE", "orders", "-", "1-13")
    assert isinstance(live_before, list)
    assert fourth.live_ids_compared == len(live_before) > 0
    assert commit_info(store.spark, store.state_path, fourth.commit_version)["operation"] == FILES_OPERATION
    # 2 entries, audit's new PEL row, consumer hal; 7 heads, billing's claimed row, gina seen again; 3 acks
    # and the entries deleted or trimmed.
    assert entries_gone > 1
    assert (fourth.rows_inserted, fourth.rows_deleted) == (2 + 1 + 1, 3 + entries_gone)
    assert fourth.rows_updated == 7 + 1 + 1
    assert_store_answers_like(redis, store, clock, AFTER)
    assert_same_delivery_times(redis, store, "orders", slack_ms=0)
    run_on(redis, [("XACK", "orders", "billing", "1-8")])

    fifth = import_redis(store, client, ["orders", "bin", "drained", "fresh"])

    # One group's acks: the removal's IDs are held on the driver (two groups' went to Spark as a frame).
    assert (fifth.rows_inserted, fifth.rows_updated, fifth.rows_deleted) == (0, 7, 1)
    assert_store_answers_like(redis, store, clock, AFTER)


def _args(**values: Any) -> argparse.Namespace:
    defaults = {"streams": ["*"], "page": 1000, "staging": None, "summary_file": None}
    return argparse.Namespace(**{**defaults, **values})


def test_the_console_script_refuses_bad_input_before_starting_spark(
    redis: RespClient, redis_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    run_on(redis, [("XADD", "s1", "1-1", "f", "v"), ("SET", "text", "x")])
    not_a_store = tmp_path / "notes"
    not_a_store.mkdir()
    (not_a_store / "todo.txt").write_text("x")
    store = str(tmp_path / "store")
    nowhere = f"redis://127.0.0.1:{free_port()}"
    # A SparkConfig the refusals never reach: each answers before a session would be built.
    spark = SparkConfig()

    cases = [
        (_args(source=nowhere, store=store), EXIT_REDIS, f"cannot use Redis at {nowhere}"),
        (_args(source=url.replace("//", "//:secret@"), store=store), EXIT_REDIS, "redis://:***@127.0.0.1"),
        (_args(source=url, store=store, streams=["orders:*"]), EXIT_BAD_INPUT, "the server has 1 stream(s)"),
        (_args(source=url, store=store, streams=["text"]), EXIT_BAD_INPUT, "key 'text' holds a string, not a stream"),
        (_args(source=url, store=str(not_a_store)), EXIT_BAD_INPUT, "is not a store"),
        (_args(source="http://x", store=store), EXIT_BAD_INPUT, "give redis://host:port[/db]"),
    ]
    for args, code, message in cases:
        assert run_import(args, spark) == code, args
        assert message in capsys.readouterr().err
    assert not Path(store).exists()
    assert redis.execute("DBSIZE") == 2


@pytest.mark.spark
def test_the_console_script_prints_a_progress_line_per_stream_and_a_json_summary(
    redis: RespClient,
    redis_server: RedisServer,
    spark: Any,
    make_store: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_on(redis, [("XADD", "s1", "1-1", "f", "v"), ("XGROUP", "CREATE", "s1", "g", "0")])
    summary = tmp_path / "summary.json"
    path = make_store().path
    args = _args(source=f"redis://{redis_server.host}:{redis_server.port}", store=path)
    args.summary_file = str(summary)

    assert run_import(args, SparkConfig(), spark=spark) == EXIT_OK

    out, err = capsys.readouterr()
    assert "streamclaim-import: s1: 1 entries (full), 0 PEL rows, 1 groups in" in err
    assert '"status": "ok"' in out and '"entries_copied": 1' in out
    assert summary.read_text() == out
    assert StreamStore.open(path, spark=spark).execute("XINFO", "GROUPS", "s1")[0][1] == "g"


def test_a_password_never_reaches_messages_or_the_summary() -> None:
    assert redacted("redis://user:pw@h:1/2") == "redis://user:***@h:1/2"
    assert redacted("rediss://:pw@h:1") == "rediss://:***@h:1"
    assert redacted("redis://h:1") == "redis://h:1"


class _WriterDuringRead:
    """A sink in front of the staging that appends to the stream while its pages are read (a live Redis)."""

    def __init__(self, staging: Staging, redis: RespClient, times: int) -> None:
        self.staging, self.redis, self.times = staging, redis, times

    def entries(self, key: str, page: Any) -> None:
        if self.times > 0:
            self.times -= 1
            self.redis.execute("XADD", key, "*", "late", "1")
        self.staging.entries(key, page)

    def live_ids(self, key: str, page: Any) -> None:
        self.staging.live_ids(key, page)

    def pending(self, key: str, group: str, page: Any) -> None:
        self.staging.pending(key, group, page)

    def discard(self, key: str) -> None:
        self.staging.discard(key)


@pytest.mark.spark
def test_a_paged_stream_that_moves_while_read_is_read_again_and_only_its_last_read_is_staged(
    redis: RespClient, client: redis_py.Redis, spark: Any, tmp_path: Path
) -> None:
    run_on(redis, [("XADD", "s", f"1-{n}", "n", str(n)) for n in range(1, 8)])
    raw_replies(client)
    staging = Staging(str(tmp_path), rows_per_group=3)
    try:
        moved_once = read_stream(client, "s", None, _WriterDuringRead(staging, redis, times=1), page=3)
        assert moved_once is not None
        assert (moved_once.reads, moved_once.changed, moved_once.entries) == (2, False, 8)
        staged = staging.frame(spark, ENTRIES).select("id_seq").collect()
        assert len(staged) == 8  # the first read's rows stay in the file, filtered out by their read number

        always_moving = read_stream(client, "s", None, _WriterDuringRead(staging, redis, times=99), page=3)
        assert always_moving is not None
        assert (always_moving.reads, always_moving.changed) == (MAX_READS, True)
    finally:
        staging.close()


@pytest.mark.spark
def test_an_import_that_finds_the_store_changed_by_another_writer_writes_nothing(
    redis: RespClient, client: redis_py.Redis, make_store: Any
) -> None:
    run_on(redis, [("XADD", "s", "1-1", "f", "v"), ("XGROUP", "CREATE", "s", "g", "0")])
    store = make_store()
    before = current_version(store)

    def another_writer(copy: StreamCopy) -> None:  # runs after Redis was read, before the commit
        store.execute("XADD", copy.meta.key, "5-5", "other", "writer")

    with pytest.raises(StoreChangedError, match=r"stream\(s\) s changed in the store while the import read Redis"):
        import_redis(store, client, ["s"], progress=another_writer)

    assert current_version(store) == before + 1  # the other writer's XADD alone
    assert store.execute("XRANGE", "s", "-", "+") == [["5-5", ["other", "writer"]]]
    assert store.execute("XINFO", "GROUPS", "s") == []

"""Batches of commands (batch.py) beyond what the parity scenarios compare: lost races, WATCH between the
units of one batch, and the Python pipeline's redis-py behaviour (errors, EXECABORT, splitting, bytes).

The replies themselves are compared with redis-server in tests/parity/test_batches.py and, for MULTI/EXEC
on the wire, tests/server/test_server.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from streamclaim_spark import StreamStore
from streamclaim_spark.commands import dispatch
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.engine.batch import Unit, reads, run_batch, watch_signatures
from streamclaim_spark.engine.batch.reads import BatchReads
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def _interfering(store: StreamStore, argv: Sequence[str]) -> Callable[[Runner, Sequence[str], Callable[[], bool]], Any]:
    """``dispatch`` that, during the batch's first attempt only, lets another client commit ``argv``
    (from a thread of its own) before running its first command: the batch must lose its commit race."""
    done: list[Any] = []

    def run(runner: Runner, command: Sequence[str], cancelled: Callable[[], bool]) -> Any:
        if not done:
            other = threading.Thread(target=lambda: done.append(store.execute(*argv)))
            other.start()
            other.join()
        return dispatch(runner, command, cancelled)

    return run


def test_a_batch_that_loses_its_commit_race_runs_again_and_replies_from_the_new_state(
    make_store: Callable[..., StreamStore],
) -> None:
    store = make_store(clock=ManualClock(T0))
    store.execute("XADD", "s", "1-1", "f", "v")
    commands = [["XADD", "s", "*", "f", "w"], ["XLEN", "s"], ["XRANGE", "s", "-", "+"]]

    result = run_batch(store.runner, [Unit(commands)], _interfering(store, ["XADD", "s", "2-1", "f", "x"]))

    assert result.attempts == 2
    new_id = f"{T0}-0"
    assert result.replies == [new_id, 3, [["1-1", [b"f", b"v"]], ["2-1", [b"f", b"x"]], [new_id, [b"f", b"w"]]]]
    assert store.execute("XRANGE", "s", "-", "+") == [
        ["1-1", ["f", "v"]],
        ["2-1", ["f", "x"]],
        [new_id, ["f", "w"]],
    ]


def test_a_watched_unit_sees_the_change_an_earlier_unit_of_its_batch_made_and_the_others_run(
    make_store: Callable[..., StreamStore],
) -> None:
    store = make_store(clock=ManualClock(T0))
    store.execute("XADD", "s", "1-1", "f", "v")
    store.execute("XADD", "t", "1-1", "f", "v")
    watched = watch_signatures(store.snapshot(), ["s", "t"])
    units = [
        Unit([["XADD", "s", "2-1", "f", "v"]]),
        Unit([["XADD", "t", "3-1", "f", "v"]], watched={"s": watched["s"]}),
        Unit([["XLEN", "t"]], watched={"t": watched["t"]}),
    ]

    result = run_batch(store.runner, units, dispatch)

    assert [(unit.replies, unit.aborted) for unit in result.units] == [(["2-1"], False), ([], True), ([1], False)]
    assert result.version is not None and store.execute("XLEN", "t") == 1


@pytest.fixture
def piped(make_store: Callable[..., StreamStore]) -> StreamStore:
    store = make_store(clock=ManualClock(T0))
    store.execute("XADD", "s", "1-1", "f", "v")
    return store


def test_a_pipeline_raises_its_first_error_after_every_command_ran(piped: StreamStore) -> None:
    pipe = piped.pipeline().execute_command("XADD", "s", "5-0", "f", "v")
    pipe.execute_command("XADD", "s", "1-0", "f", "v").execute_command("XGROUP", "CREATE", "s", "g", "0")

    with pytest.raises(ReplyError) as raised:
        pipe.execute()

    assert str(raised.value) == "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    assert piped.execute("XLEN", "s") == 2 and piped.execute("XINFO", "GROUPS", "s")[0][1] == "g"
    assert len(pipe.results) == 1 and len(pipe) == 0


def test_a_transaction_with_a_command_refused_while_queuing_runs_nothing(piped: StreamStore) -> None:
    version = piped.snapshot().version
    pipe = piped.pipeline().execute_command("XADD", "s", "*", "f", "v").execute_command("XLEN")

    with pytest.raises(ReplyError) as raised:
        pipe.execute()

    assert str(raised.value) == "EXECABORT Transaction discarded because of previous errors."
    assert piped.snapshot().version == version


def test_dbsize_in_a_transaction_counts_the_streams_its_earlier_commands_created_and_deleted(
    piped: StreamStore,
) -> None:
    # Every head is read once per snapshot (Snapshot.all_streams); a batch's commands still see each other's.
    pipe = piped.pipeline().execute_command("DBSIZE").execute_command("XADD", "t", "1-1", "f", "v")
    pipe.execute_command("DBSIZE").execute_command("DEL", "s").execute_command("DBSIZE")

    assert pipe.execute() == [1, "1-1", 2, 1, 1]


def test_a_pipeline_without_transaction_answers_refused_commands_in_place_and_splits_its_commits(
    piped: StreamStore,
) -> None:
    version = piped.snapshot().version or 0
    pipe = piped.pipeline(transaction=False, max_batch=2, decode_responses=False)
    for n in range(2, 6):
        pipe.execute_command("XADD", "s", f"{n}-1", b"f", b"\xff")
    pipe.execute_command("NOPE").execute_command("XLEN", "s")

    replies = pipe.execute(raise_on_error=False)

    assert replies[:4] == [b"2-1", b"3-1", b"4-1", b"5-1"]
    assert str(replies[4]) == "ERR unknown command 'NOPE', with args beginning with: "
    assert replies[5] == 5
    first, second, refused = (result.version for result in pipe.results)
    assert (first, refused) == (version + 1, None)
    assert first is not None and second is not None
    # Between the two batches' commits only Delta's auto compaction may commit (the XADDs' entry files
    # are small files of their own since heads lie apart).
    # Each batch is one commit of files (a WRITE: its row writes applied on the driver).
    assert operations(piped, first, second) == ["WRITE", *(["OPTIMIZE"] * (second - first - 1)), "WRITE"]
    assert piped.execute("XRANGE", "s", "5-1", "+", decode_responses=False) == [[b"5-1", [b"f", b"\xff"]]]


@pytest.mark.parametrize("load_limit", [0, 10_000], ids=["read-through-spark", "in-memory"])
def test_claims_found_by_a_scan_move_their_entries_whether_the_pel_is_in_memory_or_read_through_spark(
    make_store: Callable[..., StreamStore], load_limit: int
) -> None:
    clock = ManualClock(T0)
    store = make_store(clock=clock)
    for n in range(1, 5):
        store.execute("XADD", "s", f"{n}-1", "f", "v")
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.execute("XREADGROUP", "GROUP", "g", "dead", "STREAMS", "s", ">")
    clock.now = T0 + 60_000
    pipe = store.pipeline(load_limit=load_limit)
    pipe.execute_command("XAUTOCLAIM", "s", "g", "a", "1000", "0", "COUNT", "2", "JUSTID")
    pipe.execute_command("XREADGROUP", "GROUP", "g", "b", "COUNT", "1", "CLAIM", "1000", "STREAMS", "s", ">")
    pipe.execute_command("XACK", "s", "g", "1-1")

    assert pipe.execute() == [["3-1", ["1-1", "2-1"], []], [["s", [["3-1", ["f", "v"], 60_000, 1]]]], 1]
    assert store.execute("XPENDING", "s", "g", "-", "+", "10") == [
        ["2-1", "a", 0, 1],  # JUSTID leaves the count
        ["3-1", "b", 0, 2],
        ["4-1", "dead", 60_000, 1],
    ]


def test_a_partition_found_too_big_to_load_is_read_through_spark_by_later_batches_without_a_probe(
    make_store: Callable[..., StreamStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(clock=ManualClock(T0))
    for n in range(1, 5):
        store.execute("XADD", "s", f"{n}-1", "f", "v")
    store.execute("XLEN", "s")  # both batches below start at this version, its files already kept
    probed: list[int | None] = []
    probe = BatchReads._probe

    def counted_probe(self: BatchReads, partitions: Sequence[str]) -> list[dict[str, Any]] | None:
        rows = probe(self, partitions)
        probed.append(None if rows is None else len(rows))
        return rows

    monkeypatch.setattr(BatchReads, "_probe", counted_probe)

    def batch() -> list[Any]:
        pipe = store.pipeline(load_limit=2).execute_command("XLEN", "s")
        pipe.execute_command("XRANGE", "s", "-", "+", "COUNT", "1")
        return pipe.execute()

    first = batch()
    assert stream_partition("s") in store.runner.big_partitions
    probes_of_first = list(probed)
    second = batch()

    assert first == second == [4, [["1-1", ["f", "v"]]]]
    # The files' statistics count the stream's 5 rows (its head and 4 entries): too many to load, unread.
    assert probes_of_first == [None]
    assert probed == probes_of_first  # the second batch remembers: no probe


def test_a_batch_over_a_stream_in_more_files_than_it_loads_reads_its_stored_rows_with_its_own_writes_over_them(
    make_store: Callable[..., StreamStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(clock=ManualClock(T0))
    for n in range(1, 6):
        store.execute("XADD", "s", f"{n}-1", "f", f"v{n}")  # a file each
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    monkeypatch.setattr(reads, "LOAD_FILES_MAX", 1)  # the stream's files are too many to load; the group's not
    pipe = store.pipeline()
    pipe.execute_command("XADD", "s", "6-1", "f", "v6")
    pipe.execute_command("XDEL", "s", "2-1")
    pipe.execute_command("XREADGROUP", "GROUP", "g", "a", "COUNT", "3", "STREAMS", "s", ">")
    pipe.execute_command("XACK", "s", "g", "1-1")
    pipe.execute_command("XRANGE", "s", "4-1", "+")
    pipe.execute_command("XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
    pipe.execute_command("XCLAIM", "s", "g", "b", "0", "3-1", "JUSTID")
    pipe.execute_command("XPENDING", "s", "g", "-", "+", "10")

    with count_jobs(store.spark.sparkContext) as jobs:
        replies = pipe.execute()

    assert replies == [
        "6-1",
        1,
        [["s", [["1-1", ["f", "v1"]], ["3-1", ["f", "v3"]], ["4-1", ["f", "v4"]]]]],  # 2-1 deleted, 6-1 not reached
        1,
        [["4-1", ["f", "v4"]], ["5-1", ["f", "v5"]], ["6-1", ["f", "v6"]]],  # the batch's own entry among stored ones
        [["s", [["5-1", ["f", "v5"]], ["6-1", ["f", "v6"]]]]],
        ["3-1"],
        [["3-1", "b", 0, 1], ["4-1", "a", 0, 1], ["5-1", "b", 0, 1], ["6-1", "b", 0, 1]],
    ]
    # Every read of the stream took its stored rows on the driver; through the overlaid table each was a job.
    assert jobs.jobs == 0, jobs.descriptions
    assert store.execute("XPENDING", "s", "g", "-", "+", "10") == replies[-1]
    assert store.execute("XLEN", "s") == 5


def test_a_batch_of_one_command_runs_as_the_command_alone_with_no_spark_job(store: StreamStore) -> None:
    store.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    store.execute("XADD", "s", "1-1", "f", "v")
    read = Unit([["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]])
    run_batch(store.runner, [Unit([["XLEN", "s"]])], dispatch)  # its version's files kept, as a server's are

    with count_jobs(store.spark.sparkContext) as jobs:
        result = run_batch(store.runner, [read], dispatch)

    assert result.replies == [[["s", [["1-1", [b"f", b"v"]]]]]]  # as RESP frames it: payloads as stored
    assert result.version == store.snapshot().version and result.attempts == 1
    assert jobs.jobs == 0, jobs.descriptions  # as a batch snapshot of one command: 1
    assert run_batch(store.runner, [Unit([["XLEN", "s"]])], dispatch).version is None  # read only: no commit


def operations(store: StreamStore, first: int, last: int) -> list[str]:
    """The operations of the state table's commits ``first``..``last``, in order."""
    history = store.spark.sql(f"DESCRIBE HISTORY delta.`{store.path}/{C.STATE_TABLE_DIR}`")
    rows = history.where(history.version.between(first, last)).orderBy("version").collect()
    return [row.operation for row in rows]

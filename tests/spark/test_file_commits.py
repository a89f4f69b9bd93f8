"""Bulk appends, deliveries and acknowledgements committed as files, not MERGEs (issue 45).

Each budget is read from the commit's own log entry (the files it added and removed, with Delta's row
counts), never timed. The races are made deterministic: another client's commit is run at the exact
point (before the transaction reads, or after it read and before it commits) where it must make the
attempt lose and re-run.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import APART_PREFIX, bucket_of, group_partition, stream_partition
from streamclaim_spark.core.placement import placed, placement
from streamclaim_spark.engine import file_commit, transaction
from streamclaim_spark.engine.context import Context
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state import commit_settings, delta_txn, small_files
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.tables import table_path
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock
from tests.spark.pel import duplicates, pel_rows

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
ROWS_PER_FILE = 1_000
ENTRIES = 10_000


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    """Stream ``s`` of 10,000 entries in files of 1,000 rows, all pending in group ``g`` (consumer ``dead``)."""
    path = str(tmp_path_factory.mktemp("file-commits") / "store")
    store = StreamStore.open(path, spark=spark, clock=ManualClock(T0), rows_per_file=ROWS_PER_FILE)
    store.append("s", spark.range(ENTRIES).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    assert store.deliver("s", "g", "dead").count == ENTRIES
    return store


def log_entry(store: StreamStore, version: int) -> dict[str, Any]:
    """Commit ``version``'s actions: its commitInfo, and the files it added and removed (bucket, rows)."""
    log = Path(table_path(store.path, C.STATE_TABLE_DIR)) / "_delta_log" / f"{version:020d}.json"
    entry: dict[str, Any] = {"added": [], "removed": []}
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            entry["info"] = action["commitInfo"]
        for kind, key in (("add", "added"), ("remove", "removed")):
            if kind in action:
                stats = json.loads(action[kind].get("stats") or "{}")
                entry[key].append((action[kind]["partitionValues"][C.BUCKET], stats, action[kind]["path"]))
    return entry


def state_version(store: StreamStore) -> int:
    return latest_version(store.spark, table_path(store.path, C.STATE_TABLE_DIR))


def test_a_bulk_append_writes_new_files_and_rewrites_only_the_stream_heads_file(
    store: StreamStore, spark: SparkSession
) -> None:
    jvm = spark._jvm
    assert jvm is not None
    active_before = jvm.SparkSession.getActiveSession()

    appended = store.append("s", spark.range(2_500).selectExpr("id + 10000 AS n"))

    # The transaction made its own session active while it ran and put the caller's back: left so,
    # the caller's next query in this thread would resolve names (a data source) in the wrong session.
    active_after = jvm.SparkSession.getActiveSession()
    assert active_after.isDefined() == active_before.isDefined()
    assert not active_before.isDefined() or active_after.get().equals(active_before.get())
    assert appended.version is not None
    entry = log_entry(store, appended.version)
    assert entry["info"]["operation"] == "WRITE"
    assert entry["info"]["userMetadata"].startswith("BULK APPEND ")
    # The only file removed is the one holding the stream head: no entry was read or copied.
    assert [bucket[0] for bucket, _, _ in entry["removed"]] == [APART_PREFIX]
    entry_files = [stats for bucket, stats, _ in entry["added"] if not bucket.startswith(APART_PREFIX)]
    assert sum(stats["numRecords"] for stats in entry_files) == 2_500
    assert all(stats["numRecords"] <= ROWS_PER_FILE for stats in entry_files)
    # Capped files of consecutive IDs, in ID order: reads by ID range skip them by their statistics.
    ranges = sorted((stats["minValues"][C.ID_SEQ], stats["maxValues"][C.ID_SEQ]) for stats in entry_files)
    assert all(high < next_low for (_, high), (next_low, _) in itertools.pairwise(ranges))
    assert store.execute("XLEN", "s") == ENTRIES + 2_500
    last = store.execute("XREVRANGE", "s", "+", "-", "COUNT", "1")[0]
    assert last == [str(appended.last_id), ["n", "12499"]]


# Spark jobs of a bulk acknowledgement: the named IDs collected to the driver, the heads' files and the
# files it takes some rows of written (the IDs found there broadcast to the rewrite), the commit's own;
# the group's heads are read, the files listed and the PEL files' rows counted on the driver. 9 while
# Delta listed the heads' and the PEL's files and the heads read lists theirs (state/logged_files.py),
# 14 while Spark parsed the IDs for their range and counted the rows taken from each file (3 jobs), 13
# while an eager checkpoint pinned the IDs in a job of its own, 11 while every file in the range was
# rewritten uncounted.
ACKNOWLEDGEMENT_JOBS = 4


def pel_files(store: StreamStore) -> dict[str, list[str]]:
    """The group ``g``'s PEL as the table holds it now: each data file's name, with its rows' IDs."""
    rows = (
        store.table_at(state_version(store))
        .where((F.col(C.ROW_KIND) == C.KIND_PENDING) & (F.col(C.GROUP) == "g"))
        .select(F.element_at(F.split("_metadata.file_path", "/"), -1).alias("file"), C.ID_MS, C.ID_SEQ)
        .collect()
    )
    files: dict[str, list[str]] = {}
    for row in rows:
        files.setdefault(row["file"], []).append(str(StreamId.from_stored(row[C.ID_MS], row[C.ID_SEQ])))
    return files


def test_an_acknowledgement_rewrites_only_the_pel_files_holding_its_ids(
    store: StreamStore, spark: SparkSession
) -> None:
    before = store.execute("XPENDING", "s", "g")[0]
    pending = [row.id for row in pel_rows(store, "s", "g")]
    files = pel_files(store)
    whole = next(name for name, ids in files.items() if pending[5_000] in ids)
    # The PEL's first and last IDs (the range reaches every file), 5 IDs of a file in the middle, one of
    # them named twice, every ID of another file, and text that is no ID (ignored, as XACK ignores it).
    named = [pending[0], *pending[3_010:3_015], "not-an-id", pending[3_010], *files[whole], pending[-1]]
    holding = {name for name, ids in files.items() if set(ids) & set(named)}
    acknowledged = len(set(named) - {"not-an-id"})

    with count_jobs(spark.sparkContext) as counted:
        acked = store.acknowledge("s", "g", spark.createDataFrame([(i,) for i in named], "id string"))

    assert acked.count == acknowledged
    assert acked.version is not None
    assert counted.jobs <= ACKNOWLEDGEMENT_JOBS, counted.jobs
    entry = log_entry(store, acked.version)
    # Only the files holding named IDs went; the one taken whole is not written again, the others are
    # rewritten without the named rows; the files between them, in the IDs' range, are untouched.
    removed = {Path(path).name: stats["numRecords"] for bucket, stats, path in entry["removed"] if bucket[0] == "g"}
    added = [stats["numRecords"] for bucket, stats, _ in entry["added"] if bucket.startswith("g")]
    assert set(removed) == holding and len(holding) == 4
    kept = [removed[name] - len(set(files[name]) & set(named)) for name in holding if name != whole]
    assert sum(added) == sum(kept) == 3 * ROWS_PER_FILE - 7
    assert store.execute("XPENDING", "s", "g")[0] == before - acknowledged
    assert [row.id for row in pel_rows(store, "s", "g")] == [i for i in pending if i not in named]
    # The same IDs again, none pending now: nothing is committed, as XACK of them changes nothing.
    version = state_version(store)
    again = store.acknowledge("s", "g", spark.createDataFrame([(i,) for i in named], "id string"))
    assert (again.count, again.version) == (0, None)
    assert state_version(store) == version


@pytest.mark.parametrize("matched", ["on the driver", "by Spark", "by Spark, the box too large to pack"])
def test_an_acknowledgement_takes_exactly_the_named_pending_ids_however_they_are_matched(
    store: StreamStore, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, matched: str
) -> None:
    # The named IDs T0-5, T0-7, T0-19 and (T0+1)-7 span milliseconds T0..T0+1 and sequences 5..19: the
    # match numbers each ID of that box (ms offset x 15 + seq offset). (T0+1)-4 lies outside it (its
    # sequence is below 5): numbered as inside, it would take T0-19's number (15 - 1 = 14) and go too.
    key = f"box-{matched}"
    pipe = store.pipeline()
    for n in (5, 7, 19):
        pipe.execute_command("XADD", key, f"{T0}-{n}", "n", str(n))
    for n in (4, 7):
        pipe.execute_command("XADD", key, f"{T0 + 1}-{n}", "n", str(n))
    pipe.execute_command("XGROUP", "CREATE", key, "g", "0").execute_command(
        "XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"
    )
    pipe.execute()
    named = [f"{T0}-5", f"{T0}-7", f"{T0}-19", f"{T0 + 1}-7"]
    # By Spark: more IDs than the driver holds, parsed, pinned and joined by Spark.
    held_ids = 2 if matched == "by Spark" else placement().ack_ids
    if matched.endswith("too large to pack"):  # held on the driver, the PEL files' rows matched by Spark
        named += ["0-0", "18446744073709551615-18446744073709551615"]

    with placed(ack_ids=held_ids):
        acked = store.acknowledge(key, "g", spark.createDataFrame([(i,) for i in named], "id string"))

    assert acked.count == 4
    assert [row.id for row in pel_rows(store, key, "g")] == [f"{T0 + 1}-4"]


def test_files_outside_their_bucket_folders_are_rewritten_by_the_buckets_the_log_gives(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Random file prefixes (an object store's setting) put data files outside their partition folders:
    # a rewrite then takes each file's bucket from its log entry, not from its path.
    store = StreamStore.open(str(tmp_path / "store"), spark=spark, clock=ManualClock(T0))
    state = table_path(store.path, C.STATE_TABLE_DIR)
    spark.sql(f"ALTER TABLE delta.`{state}` SET TBLPROPERTIES ('delta.randomizeFilePrefixes' = 'true')")
    store.append("s", spark.range(20).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "c")
    named = [f"{T0}-{n}" for n in (0, 1, 2, 7, 19)]

    acked = store.acknowledge("s", "g", spark.createDataFrame([(i,) for i in named], "id string"))

    assert acked.count == 5
    assert acked.version is not None
    rewritten = log_entry(store, acked.version)["removed"]
    assert {bucket[0] for bucket, _, _ in rewritten} == {"g", APART_PREFIX}
    assert not any(f"{C.BUCKET}=" in path for _, _, path in rewritten)
    assert store.execute("XPENDING", "s", "g") == [15, f"{T0}-3", f"{T0}-18", [["c", "15"]]]
    assert store.execute("XACK", "s", "g", f"{T0}-3", f"{T0}-19") == 1
    assert store.execute("XINFO", "STREAM", "s")[1] == 20


def test_a_delivery_after_setid_moved_the_cursor_back_overwrites_pending_rows_as_redis_does(
    store: StreamStore, spark: SparkSession
) -> None:
    store.append("r", spark.range(4).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "r", "g", "0")
    store.deliver("r", "g", "a")
    store.execute("XGROUP", "SETID", "r", "g", "0")

    redelivered = store.deliver("r", "g", "b")

    # Redis moves the NACK to the new consumer and restarts its count; it never adds a second one.
    assert redelivered.count == 4
    rows = pel_rows(store, "r", "g")
    assert duplicates([row.id for row in rows]) == {}
    assert [(row.owner, row.delivery_count) for row in rows] == [("b", 1)] * 4
    assert store.execute("XPENDING", "r", "g")[3] == [["b", "4"]]


def run_in_another_thread(action: Callable[[], Any]) -> None:
    """Runs ``action`` as another client (a thread of its own, so a session of its own) and waits."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as error:  # reported to the test below
            failures.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert not failures, failures


@pytest.fixture
def once_before(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Any, str, Callable[[], Any]], None]]:
    """Patches ``owner.name`` so that its first call first runs ``action`` in another thread."""

    def patch(owner: Any, name: str, action: Callable[[], Any]) -> None:
        original = getattr(owner, name)
        calls: list[int] = []

        def patched(*args: Any, **kwargs: Any) -> Any:
            if not calls:
                calls.append(1)
                run_in_another_thread(action)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, patched)

    yield patch


def test_an_append_whose_stream_moved_after_its_decision_loses_to_the_guard_and_runs_again(
    store: StreamStore, spark: SparkSession, once_before: Callable[[Any, str, Callable[[], Any]], None]
) -> None:
    store.append("race", spark.range(3).selectExpr("id AS n"))
    once_before(transaction, "commit_files", lambda: store.execute("XADD", "race", "*", "n", "other"))

    appended = store.append("race", spark.range(5).selectExpr("id + 100 AS n"))

    assert store.last_attempts == 2 and appended.first_id is not None
    ids = [entry[0] for entry in store.execute("XRANGE", "race", "-", "+")]
    assert len(ids) == 9 and ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    # The re-run placed its entries after the other client's: none was overwritten or given twice.
    assert ids[-5:] == [str(StreamId(appended.first_id.ms, appended.first_id.seq + n)) for n in range(5)]
    assert store.execute("XRANGE", "race", ids[3], ids[3])[0][1] == ["n", "other"]


def test_an_append_that_loses_delta_s_conflict_check_at_commit_runs_again(
    store: StreamStore, spark: SparkSession, once_before: Callable[[Any, str, Callable[[], Any]], None]
) -> None:
    store.append("late", spark.range(3).selectExpr("id AS n"))
    once_before(delta_txn.DeltaTransaction, "commit", lambda: store.execute("XADD", "late", "*", "n", "other"))

    store.append("late", spark.range(5).selectExpr("id + 100 AS n"))

    assert store.last_attempts == 2
    fields = [entry[1][1] for entry in store.execute("XRANGE", "late", "-", "+")]
    assert fields == ["0", "1", "2", "other", "100", "101", "102", "103", "104"]
    assert store.execute("XLEN", "late") == 9


def test_racing_acknowledgements_of_the_same_ids_count_each_id_once(
    store: StreamStore, spark: SparkSession, once_before: Callable[[Any, str, Callable[[], Any]], None]
) -> None:
    pending = [row.id for row in pel_rows(store, "s", "g")][:20]
    ids = spark.createDataFrame([(i,) for i in pending], "id string")
    counts: list[int] = []
    once_before(
        delta_txn.DeltaTransaction, "commit", lambda: counts.append(store.acknowledge("s", "g", ids.limit(10)).count)
    )

    acked = store.acknowledge("s", "g", ids)

    assert store.last_attempts == 2
    assert (counts, acked.count) == ([10], 10)
    remaining = {row.id for row in pel_rows(store, "s", "g")}
    assert not remaining & set(pending)


def test_a_commit_of_files_compacts_a_bucket_it_adds_to_once_it_holds_enough_small_files(
    store: StreamStore, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = {bucket_of(stream_partition(name), C.KIND_ENTRY) for name in ("s", "r", "race", "late")}
    name = next(f"c{n}" for n in itertools.count() if bucket_of(stream_partition(f"c{n}"), C.KIND_ENTRY) not in taken)
    store.append(name, spark.range(1).selectExpr("0 AS n"))  # a 1-row file, not small at this store's size
    # Every file small and three of them enough (50 at the store's real sizes), for our count and Delta's.
    for module in (commit_settings, file_commit):
        monkeypatch.setattr(module, "small_file_bytes", lambda rows_per_file: 1 << 30)
    monkeypatch.setattr(small_files, "AUTO_COMPACT_MIN_FILES", 3)

    first = store.append(name, spark.range(1).selectExpr("1 AS n")).version
    second = store.append(name, spark.range(1).selectExpr("2 AS n")).version

    # Two small files after the first append: nothing to do. Three with the second: its commit writes the
    # two it finds as one (engine/bucket_compaction.py), on the driver; no OPTIMIZE follows.
    assert first is not None and second == first + 1 == state_version(store)
    entry = log_entry(store, second)
    bucket = bucket_of(stream_partition(name), C.KIND_ENTRY)
    assert entry["info"]["operation"] == "WRITE"
    assert sorted(non_head_files(entry["removed"])) == [(bucket, 1), (bucket, 1)]
    assert sorted(non_head_files(entry["added"])) == [(bucket, 1), (bucket, 2)]
    assert store.execute("XRANGE", name, "-", "+") == [[f"{T0}-{seq}", ["n", str(seq)]] for seq in range(3)]


def non_head_files(files: list[tuple[str, dict[str, Any], str]]) -> list[tuple[str, int]]:
    """(bucket, rows) of the entry and PEL files among a log entry's added or removed files."""
    return [(bucket, stats["numRecords"]) for bucket, stats, _ in files if not bucket.startswith(APART_PREFIX)]


def test_a_command_commits_as_files_rewriting_only_the_pel_file_that_holds_its_id(store: StreamStore) -> None:
    target = [row.id for row in pel_rows(store, "s", "g")][500]

    assert store.execute("XACK", "s", "g", target) == 1

    assert store.last_commit_version is not None
    entry = log_entry(store, store.last_commit_version)
    assert entry["info"]["operation"] == "WRITE"
    [(bucket, rows)] = non_head_files(entry["removed"])
    assert non_head_files(entry["added"]) == [(bucket, rows - 1)]
    assert target not in {row.id for row in pel_rows(store, "s", "g")}


def test_a_command_s_insert_is_a_file_of_its_own_and_reads_no_entry_file(store: StreamStore) -> None:
    added = store.execute("XADD", "s", "*", "f", "v")

    assert store.last_commit_version is not None
    entry = log_entry(store, store.last_commit_version)
    assert (entry["info"]["operation"], non_head_files(entry["removed"])) == ("WRITE", [])
    assert non_head_files(entry["added"]) == [(bucket_of(stream_partition("s"), C.KIND_ENTRY), 1)]
    assert store.execute("XREVRANGE", "s", "+", "-", "COUNT", "1") == [[added, ["f", "v"]]]


def test_writes_reaching_more_stored_rows_than_the_driver_rewrites_commit_by_merge(store: StreamStore) -> None:
    target = [row.id for row in pel_rows(store, "s", "g")][600]

    with placed(apply_rows=10):
        assert store.execute("XACK", "s", "g", target) == 1

    assert store.last_commit_version is not None
    assert log_entry(store, store.last_commit_version)["info"]["operation"] == "MERGE"
    assert target not in {row.id for row in pel_rows(store, "s", "g")}


def test_reads_and_writes_past_the_driver_bytes_take_spark_and_give_the_same_replies(
    spark: SparkSession, store: StreamStore
) -> None:
    target = [row.id for row in pel_rows(store, "s", "g")][601]
    with count_jobs(spark.sparkContext) as on_driver:
        summary = store.execute("XPENDING", "s", "g", "-", "+", "3")

    with placed(driver_bytes=1), count_jobs(spark.sparkContext) as by_spark:
        assert store.execute("XPENDING", "s", "g", "-", "+", "3") == summary
        assert store.execute("XACK", "s", "g", target) == 1

    assert (on_driver.jobs, by_spark.jobs > 0) == (0, True)
    assert store.last_commit_version is not None
    assert log_entry(store, store.last_commit_version)["info"]["operation"] == "MERGE"
    assert target not in {row.id for row in pel_rows(store, "s", "g")}


def test_two_removals_that_may_rewrite_one_file_are_refused_and_write_nothing(store: StreamStore) -> None:
    # Each removal rewrites its files from the snapshot: two rewriting one file would keep one's change.
    store.execute("XADD", "apart", "1-1", "f", "v")
    store.execute("XGROUP", "CREATE", "apart", "g", "0")
    store.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "apart", ">")
    partition = group_partition("apart", "g")
    version = state_version(store)

    def decide(ctx: Context) -> None:
        ctx.plan.add_removal(Removal(C.KIND_PENDING, (partition,), None))
        ctx.plan.add_removal(Removal(C.KIND_PENDING, (partition,), None))

    with pytest.raises(InvalidArgumentError, match="removals must lie in different files"):
        store.runner.transact("TWO REMOVALS", decide)

    assert state_version(store) == version
    assert store.execute("XPENDING", "apart", "g")[0] == 1

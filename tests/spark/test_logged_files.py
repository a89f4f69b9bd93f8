"""Files listed on the driver from the log's commits: always the files Delta's own state lists.

Each check compares ``logged_files.files_at`` with Delta's ``Snapshot.allFiles`` at the same version,
after writes that add, rewrite and remove files, for a table written anew at the same path, and where
the kept files are too far behind to be brought forward; a transaction's listing with Delta's
``filterFiles`` for the same filter; a read over the kept files (``logged_table``) with Delta's read; and
a prefetch answered on the driver from the kept files (``prefetch_rows``) with its Spark query.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Need, Scan
from streamclaim_spark.core.partitions import bucket_of, group_partition
from streamclaim_spark.core.placement import placed
from streamclaim_spark.state import log_tip, logged_files, pel_summary
from streamclaim_spark.state.columns import entry_from_row, pending_from_row
from streamclaim_spark.state.delta_io import delta_log, updated_snapshot
from streamclaim_spark.state.delta_txn import DeltaTransaction, active_session
from streamclaim_spark.state.log_tip import still_newest
from streamclaim_spark.state.logged_table import logged_table
from streamclaim_spark.state.pruning_filters import pruning_filters
from streamclaim_spark.state.scala_seqs import java_list
from streamclaim_spark.state.schema import file_condition
from streamclaim_spark.state.tables import table_path
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def delta_files(spark: SparkSession, path: str) -> dict[str, tuple[int, str]]:
    """Every file of the table's newest loaded snapshot by Delta's state: path -> (size, bucket)."""
    jvm = spark._jvm
    assert jvm is not None
    rows = delta_log(spark, path).unsafeVolatileSnapshot().allFiles().toJSON().collectAsList()
    adds = [json.loads(line) for line in str(jvm.java.lang.String.join("\n", rows)).split("\n") if line]
    return {add["path"]: (add["size"], add["partitionValues"][C.BUCKET]) for add in adds}


def logged(spark: SparkSession, path: str) -> dict[str, tuple[int, str]]:
    files = logged_files.files_at(spark, path, delta_log(spark, path).unsafeVolatileSnapshot())
    assert files is not None
    return {file.path: (file.size, file.bucket) for file in files}


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    """Stream ``s`` of 1,000 entries in files of 100 rows, all pending in groups ``g`` and ``h``."""
    path = str(tmp_path_factory.mktemp("logged-files") / "store")
    store = StreamStore.open(path, spark=spark, clock=ManualClock(T0), rows_per_file=100)
    store.append("s", spark.range(1_000).selectExpr("id AS n"))
    for group in ("g", "h"):
        store.execute("XGROUP", "CREATE", "s", group, "0")
        store.deliver("s", group, "c")
    return store


@pytest.fixture
def fresh(spark: SparkSession, tmp_path: Path) -> tuple[StreamStore, str]:
    """An empty store of its own and its state table's path."""
    store = StreamStore.open(str(tmp_path / "store"), spark=spark, clock=ManualClock(T0))
    return store, table_path(store.path, C.STATE_TABLE_DIR)


def first_id(store: StreamStore) -> StreamId:
    return store.snapshot().stream("s").first_id  # type: ignore[union-attr]


def test_a_transaction_lists_the_files_deltas_pruning_lists_and_every_file_holding_a_named_row(
    spark: SparkSession, store: StreamStore
) -> None:
    path = table_path(store.path, C.STATE_TABLE_DIR)
    first = first_id(store)
    low, high = StreamId(first.ms, first.seq + 250), StreamId(first.ms, first.seq + 449)
    partition = group_partition("s", "g")
    query = FileQuery((partition,), (C.KIND_PENDING,), low, high, every_partition_named=True)
    jvm = spark._jvm
    assert jvm is not None
    with active_session(spark):
        listed = {str(file.path()) for file in DeltaTransaction(spark, path).files_in(query)}
        filters = pruning_filters(spark, path, file_condition(query))
        txn = delta_log(spark, path).startTransaction()
        pruned = {str(file.path()) for file in java_list(jvm, txn.filterFiles(filters, True))}
    table = spark.read.format("delta").load(path)
    holding = {row[0] for row in table.where(file_condition(query)).select("_metadata.file_path").distinct().collect()}
    assert listed == pruned
    assert {name.rsplit("/", 1)[-1] for name in holding} <= {name.rsplit("/", 1)[-1] for name in listed}
    group_files = [
        name for name, (_, bucket) in delta_files(spark, path).items() if bucket == bucket_of(partition, C.KIND_PENDING)
    ]
    assert 0 < len(holding) <= len(listed) < len(group_files)  # rows 250-449 of g's 1,000: a few files of 100


def test_the_files_kept_on_the_driver_follow_appends_rewrites_and_removals(
    spark: SparkSession, store: StreamStore
) -> None:
    path = table_path(store.path, C.STATE_TABLE_DIR)
    assert logged(spark, path) == delta_files(spark, path)
    first = first_id(store)
    half = spark.range(500).select(
        F.concat(F.lit(f"{first.ms}-"), (F.col("id") + first.seq).cast("string")).alias("id")
    )
    assert store.acknowledge("s", "g", half).count == 500  # files rewritten without those rows, or dropped
    assert logged(spark, path) == delta_files(spark, path)
    assert store.acknowledge("s", "h", None).count == 1_000  # files removed whole
    store.execute("XADD", "t", "*", "f", "v")
    files = logged_files.files_at(spark, path, delta_log(spark, path).unsafeVolatileSnapshot())
    assert files is not None
    assert {file.path: (file.size, file.bucket) for file in files} == delta_files(spark, path)
    assert all(file.bounds is not None for file in files)


def test_the_files_of_a_commit_made_here_are_kept_as_written_without_reading_its_log_entry_back(
    spark: SparkSession, fresh: tuple[StreamStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = fresh
    store.execute("XADD", "s", "1-1", "f", "v")
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    assert logged(spark, path) == delta_files(spark, path)
    read_back: list[int] = []
    reading = logged_files._Segment.actions

    def actions(segment: Any, version: int) -> list[str] | None:
        read_back.append(version)
        return reading(segment, version)

    monkeypatch.setattr(logged_files._Segment, "actions", actions)
    # Each command's commit of files adds files written here and removes kept ones (the head rewritten).
    store.execute("XADD", "s", "1-2", "f", "v")
    store.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    store.execute("XACK", "s", "g", "1-1")
    assert logged(spark, path) == delta_files(spark, path)
    assert read_back == []
    # A commit by another writer (here a MERGE, whose files Spark wrote) is read from the log as before.
    version = delta_log(spark, path).unsafeVolatileSnapshot().version()
    spark.sql(f"UPDATE delta.`{path}` SET {C.TXN} = 'other' WHERE {C.ROW_KIND} = '{C.KIND_PENDING}'")
    assert logged(spark, path) == delta_files(spark, path)
    assert read_back == [version + 1]


def test_a_table_written_anew_at_the_same_path_is_listed_from_its_own_log(spark: SparkSession, tmp_path: Path) -> None:
    template = tmp_path / "template"
    StreamStore.open(str(template), spark=spark, clock=ManualClock(T0)).execute("XADD", "s", "1-1", "f", "v")
    live = tmp_path / "live"
    path = table_path(str(live), C.STATE_TABLE_DIR)
    for stream in ("a", "b"):  # the same table (its ID copied), then other files at the same versions
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(template, live)
        StreamStore.open(str(live), spark=spark, clock=ManualClock(T0)).execute("XADD", stream, "1-1", "f", "v")
        assert logged(spark, path) == delta_files(spark, path)


def test_the_newest_version_is_told_by_the_next_commits_file_and_a_changed_commit_file_sends_to_the_listing(
    spark: SparkSession, fresh: tuple[StreamStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = fresh
    store.execute("XADD", "s", "1-1", "f", "v")
    log = delta_log(spark, path)
    version = int(updated_snapshot(spark, path).version())
    log_dir = Path(path.removeprefix("file:")) / "_delta_log"
    newest, following = log_dir / f"{version:020d}.json", log_dir / f"{version + 1:020d}.json"
    probed = still_newest(spark, path, log)
    assert probed is not None and int(probed.version()) == version

    following.write_bytes(newest.read_bytes())  # another writer's commit appears
    assert still_newest(spark, path, log) is None
    following.unlink()
    assert still_newest(spark, path, log) is not None
    original = newest.read_bytes()
    newest.write_bytes(original + b"\n")  # the version's own file is not the one its snapshot was read from
    assert still_newest(spark, path, log) is None
    newest.write_bytes(original)
    assert int(updated_snapshot(spark, path).version()) == version  # listed, and probed from then on
    assert still_newest(spark, path, log) is not None
    monkeypatch.setattr(log_tip, "LIST_EVERY_VERSIONS", 0)  # a listing is due: the checkpoint may have moved
    assert still_newest(spark, path, log) is None


def test_files_too_far_behind_are_read_from_deltas_state_again(
    spark: SparkSession, fresh: tuple[StreamStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = fresh
    store.execute("XADD", "s", "1-1", "f", "v")
    assert logged(spark, path) == delta_files(spark, path)
    monkeypatch.setattr(logged_files, "FORWARD_COMMITS_MAX", 0)
    store.execute("XADD", "s", "1-2", "f", "v")
    assert logged(spark, path) == delta_files(spark, path)


def test_through_checkpoints_the_kept_files_are_deltas_for_the_probed_snapshot_and_after_a_listing(
    spark: SparkSession, fresh: tuple[StreamStore, str]
) -> None:
    store, path = fresh
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for seq in range(1, 5):  # checkpoints are written on the way: the commits before them leave the segment
        store.execute("XADD", "s", f"1-{seq}", "f", "v")
        assert logged(spark, path) == delta_files(spark, path)
    assert Path(path, "_delta_log", "_last_checkpoint").exists()
    # The log's tip is probed (state/log_tip.py): the snapshot a commit leaves still shows its commits.
    # A listing moves it onto the newest checkpoint; the kept files still equal Delta's state there.
    log = delta_log(spark, path)
    log.update(False, getattr(log, "update$default$2")(), getattr(log, "update$default$3")())
    assert logged(spark, path) == delta_files(spark, path)
    store.execute("XADD", "s", "1-5", "f", "v")
    assert logged(spark, path) == delta_files(spark, path)


def test_a_read_over_the_kept_files_gives_deltas_rows_and_an_older_version_is_left_to_delta(
    spark: SparkSession, store: StreamStore
) -> None:
    path = table_path(store.path, C.STATE_TABLE_DIR)
    version = int(updated_snapshot(spark, path).version())
    first = first_id(store)
    low, high = StreamId(first.ms, first.seq + 600), StreamId(first.ms, first.seq + 649)
    partition = group_partition("s", "g")  # rows 500-999 still pending after the test above
    query = FileQuery((partition,), (C.KIND_PENDING,), low, high)
    condition = file_condition(query)  # its ID range too
    kept = logged_table(spark, path, version, [query])
    assert kept is not None
    delta = spark.read.format("delta").option("versionAsOf", version).load(path)

    assert kept.where(condition).count() == 50
    assert_df_equality(kept.where(condition), delta.where(condition), ignore_row_order=True)
    assert 0 < len(kept.where(condition).inputFiles()) < len(delta.inputFiles())
    assert logged_table(spark, path, version - 1, [query]) is None  # time travel: Delta's read


def test_a_prefetch_answered_on_the_driver_files_the_rows_its_spark_query_reads_and_runs_no_job(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_id(store)

    def at(n: int) -> StreamId:
        return StreamId(first.ms, first.seq + n)

    missing = StreamId(first.ms + 1, 0)
    reads = [  # each one prefetch: lookups by ID, and ranges of entries and PEL rows (owner, cutoff, reverse)
        [Need("s", entry_ids=(at(3), at(500), missing)), Need("s", ("h",), pending_ids=(at(1), at(999), missing))],
        [Need("s", entry_scan=Scan(at(95), at(205), limit=20))],
        [Need("s", entry_scan=Scan(at(10), at(990), limit=5, reverse=True))],
        [
            Need(
                "s",
                ("g",),
                pending_scan=Scan(at(10), at(900), limit=7, reverse=True, owner="c", delivered_at_or_before=T0),
            )
        ],
        [Need("s", ("h",), pending_scan=Scan(at(0), at(999), limit=3, owner="nobody"))],
    ]

    def read(needs: list[Need]) -> tuple[Any, ...]:
        snapshot = store.snapshot()
        snapshot.prefetch(*needs)
        scans = {
            key: [entry_from_row(r) if key[0] == C.KIND_ENTRY else pending_from_row(r) for r in rows]
            for key, rows in snapshot._scans.items()
        }
        return scans, snapshot._entries, snapshot._pending

    for needs in reads:
        with count_jobs(spark.sparkContext) as on_driver:
            driver = read(needs)
        with placed(prefetch_rows=0):  # the files hold more: Spark's query reads them
            by_spark = read(needs)

        assert driver == by_spark
        assert on_driver.jobs == 0
    assert [len(rows) for rows in read(reads[1])[0].values()] == [20]


def test_xpendings_summary_on_the_driver_equals_sparks_aggregation_and_runs_no_job(
    spark: SparkSession, fresh: tuple[StreamStore, str]
) -> None:
    store, _ = fresh
    for n in range(1, 8):
        store.execute("XADD", "s", f"{n}-{n % 3}", "n", str(n))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.execute("XGROUP", "CREATE", "s", "empty", "$")
    store.execute("XREADGROUP", "GROUP", "g", "b", "COUNT", "3", "STREAMS", "s", ">")
    store.execute("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    store.execute("XNACK", "s", "g", "FAIL", "IDS", "1", "5-2")  # pending, owned by no one

    for group in ("g", "empty"):
        snapshot = store.snapshot()
        snapshot.load_heads_of([Need("s", (group,))])
        with count_jobs(spark.sparkContext) as on_driver:
            driver, heads = pel_summary.summarize(snapshot, "s", group, heads=False)
        by_spark, _ = pel_summary.summarize(store.snapshot(), "s", group, heads=True)  # an aggregation in Spark

        assert driver == by_spark and heads == []
        assert on_driver.jobs == 0
    assert driver == (0, None, None, {})
    assert store.execute("XPENDING", "s", "g") == [7, "1-1", "7-1", [["a", "3"], ["b", "3"]]]

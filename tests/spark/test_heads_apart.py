"""Heads and consumers in files of their own (issue 44): what a commit copies, and the upgrade to it.

Each budget is read from the commit's own log entry (the buckets of the files it removed and added, the
rows it wrote), never timed. Before heads were
apart, each of these commits copied the 99,999 neighbours of the head it bumped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.cli import recover
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config_loader import load_config
from streamclaim_spark.core.partitions import APART_KINDS, APART_PREFIX, bucket_of, group_partition, stream_partition
from streamclaim_spark.errors import StoreLayoutError
from streamclaim_spark.fleet.claims.claiming import claim_stale
from streamclaim_spark.fleet.claims.selection import StaleSelection
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.tables import table_path, upgrade_layout
from tests.clock import ManualClock
from tests.conftest import StoreFactory
from tests.spark.layout_fixture import CLOCK_MS, REPLIES_FILE, STORE_DIR, run_script
from tests.spark.older_stores import assert_refused_until_upgraded, drop_state_columns

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
BIG = 100_000
FLEET = 20
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def big(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    """Stream ``big`` of 100,000 entries, all pending in group ``g`` (consumer ``dead``), beside a fleet
    of 20 small streams: every bucket holds rows of many kinds, as a real store's do."""
    store = StreamStore.open(str(tmp_path_factory.mktemp("heads-apart") / "store"), spark=spark, clock=lambda: T0)
    store.append("big", spark.range(BIG).selectExpr("id AS n"))
    fleet = spark.range(FLEET * 5).selectExpr(f"concat('tenant-', id % {FLEET}) AS tenant", "id AS n")
    store.append_streams(fleet, stream_column="tenant")
    store.execute("XGROUP", "CREATE", "big", "g", "0")
    store.deliver("big", "g", "dead")
    return store


def last_commit(store: StreamStore) -> tuple[list[str], list[str], int]:
    """The newest commit's buckets of the files it removed, of the files it added, and the rows it wrote."""
    state = Path(table_path(store.path, C.STATE_TABLE_DIR))
    log = state / "_delta_log" / f"{latest_version(store.spark, str(state)):020d}.json"
    removed: list[str] = []
    added: list[str] = []
    written = 0
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            removed.append(action["remove"]["partitionValues"][C.BUCKET])
        if "add" in action:
            added.append(action["add"]["partitionValues"][C.BUCKET])
            written += json.loads(action["add"]["stats"])["numRecords"]
    return removed, added, written


def small_rows_of(store: StreamStore, partition: str, kind: str) -> int:
    """The rows of the ``h`` bucket holding ``partition``'s rows of ``kind``: heads and consumers only."""
    return store.snapshot().frame().where(F.col(C.BUCKET) == bucket_of(partition, kind)).count()


def test_xgroup_create_on_a_stream_of_100000_entries_copies_no_entry(big: StreamStore) -> None:
    before = small_rows_of(big, stream_partition("big"), C.KIND_STREAM)

    assert big.execute("XGROUP", "CREATE", "big", "late", "$") == "OK"

    removed, added, written = last_commit(big)
    # The stream head's file is rewritten (the head gains the group) with what lies beside it there:
    # the fleet's heads, which bulk commits of files rewrite together with it, never an entry; the
    # group head is new.
    assert {bucket[0] for bucket in [*removed, *added]} == {APART_PREFIX}
    assert written <= before + 1 <= FLEET + 2


def test_adding_a_consumer_to_a_group_with_100000_pending_entries_copies_no_pel_row(big: StreamStore) -> None:
    before = small_rows_of(big, group_partition("big", "g"), C.KIND_GROUP)

    assert big.execute("XGROUP", "CREATECONSUMER", "big", "g", "alive") == 1

    removed, added, written = last_commit(big)
    # The group's head file is rewritten (its version moves) with what lies beside it there: consumer
    # ``dead``, never one of the PEL rows.
    assert {bucket[0] for bucket in [*removed, *added]} == {APART_PREFIX}
    assert written == before + 1 < 10


def test_create_groups_over_a_fleet_copies_no_entry(big: StreamStore) -> None:
    streams = ["big", *(f"tenant-{n}" for n in range(FLEET))]

    assert big.create_groups([(key, "fleet", "0", False) for key in streams]) == FLEET + 1

    removed, added, _ = last_commit(big)
    # Every stream head gains the group: only head files are read and written.
    assert {bucket[0] for bucket in [*removed, *added]} == {APART_PREFIX}


def test_every_head_and_consumer_lies_in_an_h_bucket_and_no_other_row_does(big: StreamStore) -> None:
    kinds = {row[C.ROW_KIND] for row in big.snapshot().frame().select(C.ROW_KIND).distinct().collect()}

    assert kinds == {*APART_KINDS, C.KIND_ENTRY, C.KIND_PENDING}
    assert rows_out_of_place(big) == 0


def rows_out_of_place(store: StreamStore) -> int:
    """Rows whose Delta partition is not their partition's bucket for their kind; a data file lies in
    one Delta partition, so with none, no file holds a head or consumer beside an entry or PEL row."""
    rows = store.snapshot().frame().select(C.PARTITION_ID, C.ROW_KIND, C.BUCKET).distinct().collect()
    return sum(row[C.BUCKET] != bucket_of(row[C.PARTITION_ID], row[C.ROW_KIND]) for row in rows)


def test_a_store_of_the_bucket_layout_is_refused_and_answers_as_before_once_upgraded(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = str(tmp_path / "old")
    shutil.copytree(STORE_DIR, store_path)
    config = load_config(REPO / "conf", {("store", "path"): (store_path, "--store")}, local=False)
    refusal = (
        f"the store at {store_path} keeps heads and consumers in the files of entries and PEL rows "
        f"(before heads apart); stop every writer and run "
        f"streamclaim_spark.state.tables.upgrade_layout(spark, {store_path!r}) once, then open it again"
    )

    with pytest.raises(StoreLayoutError) as refused:
        StreamStore.open(store_path, spark=spark)
    assert str(refused.value) == refusal
    assert recover.run_job(config, spark=spark) == recover.EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"streamclaim-recover: {refusal} (or run streamclaim-recover --upgrade-layout --store {store_path})\n"
    )

    assert recover.run_job(config, spark=spark, upgrade=True) == recover.EXIT_OK
    assert json.loads(capsys.readouterr().out) == {"store": store_path, "upgraded": True}
    assert upgrade_layout(spark, store_path) is False
    upgraded = StreamStore.open(store_path, spark=spark, clock=ManualClock(CLOCK_MS))
    # The script's replies (reads, claims, reads, acks, trims, reads again) are the old code's, exactly.
    assert run_script(upgraded) == json.loads(REPLIES_FILE.read_text())
    assert rows_out_of_place(upgraded) == 0


def test_a_store_from_before_the_deleted_entry_marker_is_refused_until_a_column_is_added_and_then_claims_purge(
    spark: SparkSession, make_store: StoreFactory
) -> None:
    clock = ManualClock(T0)
    store = make_store(clock=clock)
    pipe = store.pipeline()
    for argv in (
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "2-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "dead", "STREAMS", "s", ">"),
        ("XDEL", "s", "1-0"),
    ):
        pipe.execute_command(*argv)
    pipe.execute()
    # The same rows as a store of the code before the marker holds them: the table without its column.
    drop_state_columns(spark, store.path, C.SOME_DELETED)

    assert_refused_until_upgraded(
        spark, store.path, "stream heads without the deleted-entry marker (before kept markers)"
    )
    upgraded = StreamStore.open(store.path, spark=spark, clock=clock)
    (head,) = upgraded.snapshot().all_streams()
    assert head.some_deleted  # null: unknown, so every claim checks the entries
    clock.now += 60_000
    claim = claim_stale(upgraded.runner, StaleSelection(min_idle_ms=1), "alive")
    assert claim.counts == {("s", "g"): (1, 1)}

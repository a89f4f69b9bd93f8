"""Creating the store's side tables when another writer is creating them at the same moment."""

from __future__ import annotations

import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from streamclaim_spark.core.reader_marks import ReaderMark
from streamclaim_spark.engine.merge_commit import own_commit_version
from streamclaim_spark.fleet.maintenance.readers import streaming_readers
from streamclaim_spark.state import tables
from streamclaim_spark.state.commit_settings import USER_METADATA
from streamclaim_spark.state.companion_schema import DEAD_LETTER_SCHEMA, REDRIVE_COLUMNS
from streamclaim_spark.state.delta_io import commit_info
from streamclaim_spark.state.tables import ensure_dead_letter_table


def test_two_runs_creating_the_dead_letter_table_at_the_same_moment_both_get_one_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Two recovery runs of one driver writing their first dead letters. Before creators in a process
    # took turns, the loser of a pair saw a commit conflict, DELTA_TABLE_NOT_FOUND or
    # DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION (CI failed on the last two in sessions 8 and 9).
    stores = [str(tmp_path / f"store{i}") for i in range(8)]
    returned: list[str] = []
    errors: list[BaseException] = []

    def create(store_path: str, start: threading.Barrier) -> None:
        start.wait()
        try:
            returned.append(ensure_dead_letter_table(spark, store_path))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    for store_path in stores:
        start = threading.Barrier(2)
        racers = [threading.Thread(target=create, args=(store_path, start)) for _ in range(2)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()

    assert errors == []
    assert sorted(returned) == sorted(f"{store_path}/dead_letters" for store_path in stores for _ in range(2))
    for store_path in stores:
        table = DeltaTable.forPath(spark, f"{store_path}/dead_letters")
        assert table.toDF().schema == DEAD_LETTER_SCHEMA
        assert [row.version for row in table.history().collect()] == [0]


def test_a_dead_letter_table_another_process_has_begun_creating_is_waited_for_and_then_used(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a creator in another process leaves while it writes its first commit: a _delta_log folder
    # holding only the commit's temporary file (Delta says DELTA_TABLE_NOT_FOUND).
    location = tmp_path / "store" / "dead_letters"
    (location / "_delta_log").mkdir(parents=True)
    commit_in_flight = location / "_delta_log" / ".00000000000000000000.json.tmp"
    commit_in_flight.write_text("")
    waits: list[float] = []

    def the_other_creator_commits_meanwhile(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:  # the other creator's end state: its table, version 0
            shutil.rmtree(location / "_delta_log")
            DeltaTable.create(spark).location(str(location)).addColumns(DEAD_LETTER_SCHEMA).execute()

    monkeypatch.setattr(tables, "_wait_for_other_creator", the_other_creator_commits_meanwhile)

    assert ensure_dead_letter_table(spark, str(tmp_path / "store")) == str(location)
    assert waits == [0.2]
    assert [row.version for row in DeltaTable.forPath(spark, str(location)).history().collect()] == [0]


def test_a_dead_letter_location_holding_other_files_is_refused_at_once_and_left_alone(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = tmp_path / "store" / "dead_letters"
    location.mkdir(parents=True)
    (location / "notes.txt").write_text("not a table")
    waits: list[float] = []
    monkeypatch.setattr(tables, "_wait_for_other_creator", waits.append)

    with pytest.raises(AnalysisException, match=rf"^\[DELTA_MISSING_DELTA_TABLE\] `{location}` is not a Delta table"):
        ensure_dead_letter_table(spark, str(tmp_path / "store"))

    assert waits == []
    assert sorted(p.name for p in location.iterdir()) == ["notes.txt"]


def test_a_commit_finds_its_own_version_past_a_compaction_that_carries_its_user_metadata(
    spark: SparkSession, make_store: Any
) -> None:
    # Delta's auto compaction commits an OPTIMIZE right after a commit, in the same call, with the same
    # user metadata, and the session's last version is then the OPTIMIZE's. Here the OPTIMIZE is run by
    # hand the same way: two appends of new streams leave two small files in every bucket to compact.
    store = make_store(rows_per_file=0)
    for prefix in ("a", "b"):
        store.append_streams(spark.range(40).selectExpr(f"concat('{prefix}', id) AS stream", "id AS n"), "stream")
    append = store.last_commit_version
    assert append is not None
    # The label is taken off the thread's session once the commit is made: no later write there carries it.
    assert store.session().conf.get(USER_METADATA, None) is None
    operation = commit_info(spark, store.state_path, append)["userMetadata"]
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", operation)
    try:
        DeltaTable.forPath(spark, store.state_path).optimize().executeCompaction()
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    compaction = spark.conf.get("spark.databricks.delta.lastCommitVersionInSession")

    assert compaction == str(append + 1)
    assert commit_info(spark, store.state_path, append + 1)["operation"] == "OPTIMIZE"
    assert own_commit_version(spark, store.state_path, operation) == append


def test_a_dead_letter_table_made_before_the_redrive_gains_its_columns_once_and_keeps_its_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    # A table of the schema before the redrive (no redrive_run_id, redrive_taken_at, redriven_at), one copy in it.
    before = StructType([f for f in DEAD_LETTER_SCHEMA.fields if f.name not in REDRIVE_COLUMNS])
    location = tmp_path / "store" / "dead_letters"
    DeltaTable.create(spark).location(str(location)).addColumns(before).execute()
    row = ("run-1", datetime(2026, 1, 1), "s", "g", "1-0", "alice", 11, 0, [(b"f", b"v")], "max-deliveries exceeded")
    spark.createDataFrame([row], before).write.format("delta").mode("append").save(str(location))

    assert tables.ensure_redrive_columns(spark, str(tmp_path / "store")) == str(location)
    tables.ensure_redrive_columns(spark, str(tmp_path / "store"))  # already there: no second change

    table = DeltaTable.forPath(spark, str(location))
    assert table.toDF().schema == DEAD_LETTER_SCHEMA
    assert [tuple(r) for r in table.toDF().collect()] == [(*row, None, None, None)]
    assert [r.operation for r in table.history().orderBy("version").collect()] == [
        "CREATE TABLE",
        "WRITE",
        "ADD COLUMNS",
    ]


def test_a_streaming_query_restarts_from_its_batches_not_from_a_compaction_carrying_a_batch_label(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Three batch commits of one query (versions 0-2), then an OPTIMIZE with the last batch's label, as
    # Delta's auto compaction commits it; the query restarts from the older of its two newest batches.
    path = str(tmp_path / "state")
    mark = ReaderMark("billing", "worker-1").operation()
    for batch in range(3):
        spark.range(batch, batch + 1).write.format("delta").mode("append").option(
            "userMetadata", f"{mark} txn{batch}"
        ).save(path)
    spark.conf.set(USER_METADATA, f"{mark} txn2")
    try:
        DeltaTable.forPath(spark, path).optimize().executeCompaction()
    finally:
        spark.conf.unset(USER_METADATA)
    assert commit_info(spark, path, 3)["operation"] == "OPTIMIZE"

    readers = streaming_readers(spark, path)

    assert [(reader.mark, reader.version) for reader in readers] == [(ReaderMark("billing", "worker-1"), 1)]

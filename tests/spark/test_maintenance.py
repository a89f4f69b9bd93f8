"""Maintenance on a store that is being written (docs/DESIGN.md, "History through time travel").

One store lives through what a store running for months sees: commands that leave replaced files, a
streaming query that stopped for good and one that runs, a maintenance with nothing to do, a retention
that would strand the stopped query (refused), and one that removes the files past it while a writer
commits, across which the running query restarts. The retention's floor is lowered for the test (a
minute for real stores) so that files age in seconds, and so is the count of small files that makes a
bucket worth compacting.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from streamclaim_spark import MaintenanceRefusedError, StreamStore
from streamclaim_spark.cli.maintain import EXIT_CONFIG, EXIT_OK, run_job
from streamclaim_spark.core import retention
from streamclaim_spark.core.config import AppConfig, RecoveryOptions, SparkConfig, StoreConfig
from streamclaim_spark.core.model import Need
from streamclaim_spark.core.reader_marks import ReaderMark
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.fleet.maintenance import upkeep
from streamclaim_spark.state.delta_io import latest_version, table_properties
from streamclaim_spark.streaming import register
from tests.spark.test_streaming import Batches, group_stream, run_available_now

pytestmark = pytest.mark.spark

EMPTY_PEL = [0, None, None, None]


def replies(store: StreamStore) -> list[Any]:
    return [
        store.execute("XRANGE", "orders", "-", "+"),
        store.execute("XPENDING", "orders", "billing"),
        store.execute("XINFO", "GROUPS", "orders")[0][:8],
    ]


def config(store: StreamStore, retain_ms: int) -> AppConfig:
    return AppConfig(
        store=StoreConfig(path=store.path, history_retention_ms=retain_ms),
        spark=SparkConfig(),
        recover_stale=RecoveryOptions(),
    )


def batch_of_a_query_now_gone(store: StreamStore, stream: str, group: str, consumer: str) -> None:
    """The commit a query's micro-batch leaves (its mark, a guarded group head), as the source makes it."""

    def decide(ctx: Context) -> None:
        ctx.snapshot.prefetch(Need(stream, (group,)))
        head = ctx.snapshot.group(stream, group)
        assert head is not None
        put_group(ctx, head, head)

    store.transact(ReaderMark(group, consumer).operation(), decide)


# Long: one store's life in order, each step checked where it happens; the steps share the files the
# earlier ones left and the time that passed, which is what maintenance is about.
def test_maintenance_removes_only_history_past_the_retention_while_others_write_and_never_strands_a_query(
    spark: SparkSession,
    store: StreamStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(retention, "MIN_RETENTION_MS", 1_000)
    monkeypatch.setattr(upkeep, "MIN_SMALL_FILES", 2)  # 50 for real stores: this one's buckets hold 2 or 3
    register(spark)
    pipe = store.pipeline()
    pipe.execute_command("XGROUP", "CREATE", "events", "billing", "$", "MKSTREAM")
    pipe.execute_command("XGROUP", "CREATE", "orders", "billing", "$", "MKSTREAM")
    pipe.execute_command("XADD", "orders", "1-0", "n", "1").execute()
    batch_of_a_query_now_gone(store, "events", "billing", "gone")
    first_replaced = time.time()  # that commit replaced the group head's file
    state = store.state_path
    gone_version = latest_version(spark, state)
    store.execute("XADD", "orders", "2-0", "n", "2")  # a second small file of entries in their bucket
    store.execute("XREADGROUP", "GROUP", "billing", "alice", "STREAMS", "orders", ">")
    store.execute("XACK", "orders", "billing", "1-0")
    before = replies(store)

    # Delta's 7 days: compaction folds the small files the commands left; nothing is old enough to go.
    maintaining = time.time()
    first = store.maintain()
    maintained_in = time.time() - maintaining
    table = first.tables[0]
    assert first.retention_ms == retention.DELTA_FILE_RETENTION_MS and table.table == "state"
    assert table.compaction.files_removed > table.compaction.files_added >= 1
    assert table.vacuumed.files == 0
    # A store that needs nothing gets no commit.
    version = latest_version(spark, state)
    assert store.maintain().commits == 0 and latest_version(spark, state) == version

    # A retention the stopped query's restart version is older than is refused, and changes nothing.
    with pytest.raises(MaintenanceRefusedError) as refused:
        store.maintain(1_000)
    assert str(refused.value).startswith(
        "a history retention of 1s would leave the streaming query reading group 'billing' as consumer 'gone' "
        f"(restarts from version {gone_version}, committed "
    )
    assert str(refused.value).endswith(
        "give a retention of at least 1m (--retain / store.history_retention), or pass --ignore-readers if the "
        "query is stopped for good"
    )
    assert latest_version(spark, state) == version
    assert "delta.deletedFileRetentionDuration" not in table_properties(spark, state)
    # Under the floor, the job refuses before anything, naming the setting.
    assert run_job(config(store, 999), spark) == EXIT_CONFIG
    assert "--retain / store.history_retention = 999 ms is shorter than 1 s" in capsys.readouterr().err

    # A query reads; the job, ignoring the query that is gone, removes what aged past the retention while
    # another thread appends; the query then restarts from its checkpoint across the vacuum and reads only
    # the new. It restarts from the version of the XADD below, so that version must outlive the live run,
    # the job and the XADD after it (Delta refuses to time travel past the retention, counted at the
    # restart): the retention is chosen first, sized by the first maintenance's run (the job does that and
    # more) with a floor, so a slow machine keeps more, and the XADD comes once the gone query's files
    # have aged past it. (Sized after the live run, with the XADD before the wait, the retention fell
    # short on two fresh clones whose job took longer than the commands between the XADD and it.)
    retain_ms = max(30_000, int(4000 * maintained_in) + 15_000)
    time.sleep(max(0.0, first_replaced + retain_ms / 1000 + 0.5 - time.time()))
    store.execute("XADD", "events", "1-0", "e", "1")
    live = Batches()
    run_available_now(group_stream(store, "live", stream="events"), live, tmp_path / "live")
    summary = tmp_path / "summary.json"
    codes: list[int] = []
    job = threading.Thread(
        target=lambda: codes.append(
            run_job(config(store, retain_ms), spark, ignore_readers=True, summary_file=str(summary))
        )
    )
    job.start()
    store.execute("XADD", "orders", "3-0", "n", "3")
    job.join()
    assert codes == [EXIT_OK]
    store.execute("XADD", "events", "2-0", "e", "2")
    run_available_now(group_stream(store, "live", stream="events"), live, tmp_path / "live")
    assert [rows for _, rows in sorted(live.rows.items())] == [[("events", f"{n}-0", 1)] for n in (1, 2)]
    assert store.execute("XPENDING", "events", "billing") == EMPTY_PEL

    report = json.loads(summary.read_text())
    assert report["retention_ms"] == retain_ms and [r["consumer"] for r in report["ignored_readers"]] == ["gone"]
    assert sorted(r["consumer"] for r in report["readers"]) == ["gone", "live"]
    data = report["tables"]["state"]
    assert data["retention_set"] is True and data["removed"]["data"]["files"] > 0 and data["commits"] >= 1
    assert table_properties(spark, state)["delta.logRetentionDuration"] == f"interval {retain_ms} milliseconds"
    xrange, pending, info = replies(store)
    assert xrange == [*before[0], ["3-0", ["n", "3"]]] and pending == before[1] and info[:6] == before[2][:6]
    # Time travel reaches back as far as the retention, no further (Delta's own check).
    assert spark.read.format("delta").option("versionAsOf", latest_version(spark, state) - 1).load(state).count() > 0
    with pytest.raises(AnalysisException, match="DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION"):
        spark.read.format("delta").option("versionAsOf", 1).load(state).count()

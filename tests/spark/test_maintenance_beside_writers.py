"""Maintenance beside a transaction still open (docs/DESIGN.md, "What maintenance may remove").

A command is held at its commit, its files written, while ``streamclaim-maintain --retain 1m`` runs:
the files are aged past the minute by their modification time (what VACUUM judges a file by) instead of
the test waiting for it. Nothing the held command wrote may go, and the store reads whole afterwards. A
transaction open past ``MAX_TRANSACTION_MS`` refuses its commit and re-runs; orphans old enough go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.cli.maintain import EXIT_OK, run_job
from streamclaim_spark.core.config import AppConfig, RecoveryOptions, SparkConfig, StoreConfig
from streamclaim_spark.core.retention import MAX_TRANSACTION_MS, ORPHAN_RETENTION_MS
from streamclaim_spark.fleet.maintenance.upkeep import Vacuum
from streamclaim_spark.state.delta_io import delta_log, updated_snapshot
from streamclaim_spark.testing.commit_gate import CommitGate, commit_gate
from tests.background import age, in_thread

pytestmark = pytest.mark.spark

MINUTE_MS = 60_000


def data_files(table: str) -> list[Path]:
    return [path for path in Path(table).rglob("*.parquet") if "_delta_log" not in path.parts]


def run_maintenance(store: StreamStore, spark: SparkSession, retain_ms: int) -> int:
    config = AppConfig(
        store=StoreConfig(path=store.path, history_retention_ms=retain_ms),
        spark=SparkConfig(),
        recover_stale=RecoveryOptions(),
    )
    return run_job(config, spark, ignore_readers=True)


def filled(store: StreamStore) -> None:
    store.execute("XGROUP", "CREATE", "orders", "billing", "$", "MKSTREAM")
    for n in range(1, 5):
        store.execute("XADD", "orders", f"{n}-0", "n", str(n))
    store.execute("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "2", "STREAMS", "orders", ">")


def test_a_command_held_at_its_commit_past_a_one_minute_retention_loses_nothing_to_maintenance(
    spark: SparkSession, store: StreamStore
) -> None:
    filled(store)
    assert run_maintenance(store, spark, MINUTE_MS) == EXIT_OK  # the tables keep a minute of history from now on
    state = store.state_path
    before = set(data_files(state))
    with commit_gate(CommitGate(1, release_when_all_arrive=False), after_files_written=True) as gate:
        thread, reply = in_thread(
            lambda: store.execute("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "2", "STREAMS", "orders", ">")
        )
        gate.wait_held()
        written = set(data_files(state)) - before
        assert written  # the held command's files are on disk, named by no commit yet
        age(data_files(state), 2 * MINUTE_MS)  # every file, the held ones too, older than the retention
        assert run_maintenance(store, spark, MINUTE_MS) == EXIT_OK
        assert all(path.exists() for path in written)
        gate.release()
        thread.join()
    assert reply == [[["orders", [["3-0", ["n", "3"]], ["4-0", ["n", "4"]]]]]]
    assert store.execute("XRANGE", "orders", "-", "+") == [[f"{n}-0", ["n", str(n)]] for n in range(1, 5)]
    pending = store.execute("XPENDING", "orders", "billing", "-", "+", "10")
    assert [(row[0], row[1], row[3]) for row in pending] == [
        ("1-0", "alice", 1),
        ("2-0", "alice", 1),
        ("3-0", "bob", 1),
        ("4-0", "bob", 1),
    ]
    assert store.execute("XPENDING", "orders", "billing")[0] == 4
    # Every file the newest version names is on disk: a full read of the table succeeds.
    assert spark.read.format("delta").load(state).count() > 0


def test_a_transaction_open_longer_than_allowed_refuses_its_commit_and_re_runs(
    spark: SparkSession, store: StreamStore
) -> None:
    filled(store)

    def acknowledge() -> tuple[Any, int]:
        return store.execute("XACK", "orders", "billing", "1-0", "2-0"), store.runner.last_attempts

    with commit_gate(CommitGate(1, release_when_all_arrive=False), after_files_written=True) as gate:
        thread, out = in_thread(acknowledge)
        [held] = gate.wait_held()
        held.started_ms -= MAX_TRANSACTION_MS + 1  # as if it had stayed open past the bound
        gate.release()
        thread.join()
    assert out == [(2, 2)]  # acknowledged, on the second attempt
    assert store.execute("XPENDING", "orders", "billing") == [0, None, None, None]


def test_maintenance_removes_an_orphan_only_once_it_is_older_than_a_day(
    spark: SparkSession, store: StreamStore
) -> None:
    filled(store)
    state = store.state_path
    bucket = data_files(state)[0].parent
    young, old = bucket / "part-orphan-young.parquet", bucket / "part-orphan-old.parquet"
    for orphan in (young, old):  # what a transaction that died after writing leaves
        orphan.write_bytes(b"not referenced by any commit")
    age([young], ORPHAN_RETENTION_MS - 10 * MINUTE_MS)
    age([old], ORPHAN_RETENTION_MS + MINUTE_MS)
    assert run_maintenance(store, spark, MINUTE_MS) == EXIT_OK
    assert young.exists() and not old.exists()


def test_a_log_cut_before_lite_vacuum_ran_resets_its_mark_once_and_vacuums_by_the_log_after(
    spark: SparkSession, store: StreamStore
) -> None:
    filled(store)
    state = store.state_path
    log_folder = Path(state) / "_delta_log"
    assert store.maintain(MINUTE_MS).tables[0].swept == Vacuum()  # LITE from the log's first commit: no reset
    # The log cut as Delta's own cleanup cuts it: a checkpoint, and the commits before it deleted.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    checkpoint = int(updated_snapshot(spark, state).version())
    delta_log(spark, state).checkpoint(updated_snapshot(spark, state), jvm.scala.Option.empty())
    for version in range(checkpoint):
        (log_folder / f"{version:020d}.json").unlink()
    (log_folder / "_last_vacuum_info").unlink(missing_ok=True)  # as a store older than LITE vacuums leaves it
    age(list(log_folder.iterdir()), 2 * MINUTE_MS)  # its commits older than the retention: LITE looks back

    reset = store.maintain()
    assert reset.tables[0].to_json()["lite_mark_reset"] is True
    # From the mark on, LITE reads the log again: the next run vacuums without a reset.
    after = store.maintain()
    assert after.tables[0].to_json()["lite_mark_reset"] is False
    assert store.execute("XPENDING", "orders", "billing")[0] == 2
    assert spark.read.format("delta").load(state).count() > 0

"""Kept pending counts checked against a recount, and repaired (``streamclaim-maintain --verify [--repair]``).

A count corrupted by hand (a Delta UPDATE that keeps ``counted_version`` equal to ``version``, so
readers still trust it) is reported exactly, by the maintenance job and by the recovery job's dry run,
and repaired in one commit after which the check finds nothing and XPENDING equals a recount. Writers
racing on the same groups, each pair held at its commit until both are inside their transactions
(testing/commit_gate.py), leave kept counts that equal a recount, and each race shows its loser re-ran.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.cli.maintain import EXIT_MISMATCH, EXIT_OK, main, verify_job
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import AppConfig, RecoveryOptions, SparkConfig, StoreConfig
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.fleet.claims import BatchClaim
from streamclaim_spark.fleet.claims.selection import StaleSelection
from streamclaim_spark.fleet.maintenance import CountReport
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.state.count_check import CountMismatch
from streamclaim_spark.state.delta_txn import DeltaTransaction
from streamclaim_spark.testing.commit_gate import CommitGate, commit_gate
from tests.clock import ManualClock
from tests.fixtures import TemplateStores
from tests.spark.test_concurrency import Worker

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
GROUPS = (("orders", "billing"), ("orders", "shipping"))
# How long a writer held at the gate waits for the other: the commands of a race reach their commits
# within seconds of each other; a writer that waits this long waited for a race that never came.
GATE_SECONDS = 60.0
GroupKey = tuple[str, str]
Counts = tuple[int, dict[str, int]]


def entry(n: int) -> str:
    return f"{T0}-{n}"


def _build(store: StreamStore) -> None:
    """orders: 12 entries; billing: alice owns 0-3, bob 4-5, 6 XNACKed (no owner), 7-11 undelivered;
    shipping: carol owns 0-2. Every step a counted commit, so both groups keep exact counts."""
    store.execute("XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM")
    store.execute("XGROUP", "CREATE", "orders", "shipping", "0")
    store.append("orders", store.spark.range(12).select(F.col("id").cast("string").alias("n")))
    store.deliver("orders", "billing", "alice", 4)
    store.deliver("orders", "billing", "bob", 3)
    store.execute("XNACK", "orders", "billing", "FAIL", "IDS", "1", entry(6))
    store.deliver("orders", "shipping", "carol", 3)


@pytest.fixture
def store(templates: TemplateStores) -> StreamStore:
    clock = ManualClock(T0)
    return templates.copy(templates.template("count verify", _build, clock=clock), clock=ManualClock(T0 + 60_000))


def recount(store: StreamStore) -> dict[GroupKey, Counts]:
    """Per group, its PEL's size and its rows per owner (XNACKed ones in the size only), from the rows."""
    rows = store.snapshot().frame().where(F.col(C.ROW_KIND) == C.KIND_PENDING)
    counted: dict[GroupKey, Counts] = {group: (0, {}) for group in GROUPS}
    for row in rows.groupBy(C.STREAM, C.GROUP, C.OWNER).count().collect():
        total, owners = counted[(row[C.STREAM], row[C.GROUP])]
        if row[C.OWNER] is not None:
            owners[row[C.OWNER]] = row["count"]
        counted[(row[C.STREAM], row[C.GROUP])] = (total + row["count"], owners)
    return counted


def kept(store: StreamStore) -> dict[GroupKey, Counts]:
    """Per group claiming exact counts, its head's count and its consumers' non-zero counts."""
    snapshot = store.snapshot()
    found: dict[GroupKey, Counts] = {}
    for key, name in GROUPS:
        head = snapshot.group(key, name)
        if head is not None and head.counts_kept:
            owners = {c.name: int(c.pending_count or 0) for c in snapshot.consumers(key, name) if c.pending_count}
            found[(key, name)] = (int(head.pending_count or 0), owners)
    return found


def corrupt(spark: SparkSession, store: StreamStore, key: str, group: str, consumer: str | None, count: int) -> None:
    """Rewrites one kept count by hand (a consumer's, or with ``consumer`` None the group head's), leaving
    ``counted_version`` as it is: the head still claims its counts exact."""
    kind = C.KIND_GROUP if consumer is None else C.KIND_CONSUMER
    where = (F.col(C.PARTITION_ID) == group_partition(key, group)) & (F.col(C.ROW_KIND) == kind)
    if consumer is not None:
        where &= F.col(C.CONSUMER) == consumer
    DeltaTable.forPath(spark, store.state_path).update(where, {C.PENDING_COUNT: F.lit(count)})


def job_config(store: StreamStore) -> AppConfig:
    return AppConfig(store=StoreConfig(path=store.path), spark=SparkConfig(), recover_stale=RecoveryOptions())


def summary_of(path: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(path.read_text())
    return summary


def test_counts_corrupted_by_hand_are_reported_exactly_then_repaired_in_one_commit_that_xpending_agrees_with(
    spark: SparkSession,
    store: StreamStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        kept(store)
        == recount(store)
        == {
            ("orders", "billing"): (7, {"alice": 4, "bob": 2}),
            ("orders", "shipping"): (3, {"carol": 3}),
        }
    )
    corrupt(spark, store, "orders", "billing", "alice", 7)
    corrupt(spark, store, "orders", "shipping", None, 9)
    # Readers trust the corrupted counts: XPENDING's summary answers from them.
    assert store.execute("XPENDING", "orders", "billing") == [7, entry(0), entry(6), [["alice", "7"], ["bob", "2"]]]

    summary_file = tmp_path / "verify.json"
    with caplog.at_level(logging.WARNING, logger="streamclaim_spark.maintenance"):
        assert verify_job(job_config(store), spark, summary_file=str(summary_file)) == EXIT_MISMATCH
    assert [record.getMessage() for record in caplog.records if record.name == "streamclaim_spark.maintenance"] == [
        "kept count differs from a recount: orders/billing: consumer 'alice': kept 7, counted 4",
        "kept count differs from a recount: orders/shipping: the group's pending entries: kept 9, counted 3",
    ]
    assert capsys.readouterr().err == "streamclaim-maintain: 2 kept count(s) differ from a recount (not repaired)\n"
    verified = summary_of(summary_file)
    assert verified["mismatches"] == [
        {"stream": "orders", "group_name": "billing", "consumer": "alice", "kept": 7, "counted": 4},
        {"stream": "orders", "group_name": "shipping", "consumer": None, "kept": 9, "counted": 3},
    ]
    assert (verified["groups_checked"], verified["groups_uncounted"], verified["repaired"]) == (2, 0, False)

    # The recovery job's dry run reports the mismatches of the groups it selects, and writes nothing.
    version = store.snapshot().version
    assert version is not None
    dry = recover_stale(store, RecoveryOptions(min_idle_ms=0, groups=("billing",), dry_run=True))
    assert dry.count_mismatches == (CountMismatch("orders", "billing", "alice", 7, 4),)
    assert dry.to_json()["count_mismatches"] == [verified["mismatches"][0]]
    assert store.snapshot().version == version

    assert verify_job(job_config(store), spark, repair=True, summary_file=str(summary_file)) == EXIT_MISMATCH
    repaired = summary_of(summary_file)
    assert repaired["mismatches"] == verified["mismatches"]
    assert (repaired["repaired"], repaired["repaired_version"], repaired["repair_attempts"]) == (True, version + 1, 1)
    assert store.snapshot().version == version + 1  # one commit for both groups
    history = DeltaTable.forPath(spark, store.state_path).history(1).collect()[0]
    assert history.userMetadata.startswith("REPAIR COUNTS ")

    # The console script's way in (the test's session is the active one, which the job then uses).
    assert main(["--store", store.path, "--verify", "--summary-file", str(summary_file)]) == EXIT_OK
    assert summary_of(summary_file)["mismatches"] == []
    # Repaired, not left behind: both groups claim exact counts again, and they are the recount's.
    assert kept(store) == recount(store)
    assert store.execute("XPENDING", "orders", "billing") == [7, entry(0), entry(6), [["alice", "4"], ["bob", "2"]]]
    assert store.execute("XPENDING", "orders", "shipping") == [3, entry(0), entry(2), [["carol", "3"]]]


def test_entries_of_an_owner_whose_consumer_row_is_gone_are_reported_and_the_repair_leaves_the_counts_to_readers(
    spark: SparkSession, store: StreamStore
) -> None:
    billing = (F.col(C.PARTITION_ID) == group_partition("orders", "billing")) & (F.col(C.CONSUMER) == "bob")
    DeltaTable.forPath(spark, store.state_path).delete(billing & (F.col(C.ROW_KIND) == C.KIND_CONSUMER))

    assert store.verify_counts().mismatches == (CountMismatch("orders", "billing", "bob", None, 2),)
    report = store.verify_counts(repair=True)
    assert report.repaired_version == store.snapshot().version
    head = store.snapshot().group("orders", "billing")
    assert head is not None and not head.counts_kept  # no row can keep bob's count: readers recount
    assert store.verify_counts().mismatches == ()
    assert store.execute("XPENDING", "orders", "billing") == [7, entry(0), entry(6), [["alice", "4"], ["bob", "2"]]]


def on_state_table(store: StreamStore) -> Callable[[DeltaTransaction], bool]:
    """The gate's filter: commits of this store's state table (not of its companions)."""
    return lambda txn: txn.path == store.state_path


def race(store: StreamStore, *writers: Callable[[], object]) -> list[tuple[object, int]]:
    """Runs the writers in threads, each held at its commit until every other one reached its own (so all
    are inside their transactions at once); returns each one's result and attempts."""
    outcomes: list[Any] = [None] * len(writers)

    def run(position: int, write: Callable[[], object]) -> None:
        try:
            result = write()
            # A batched claim and a repair count their attempts themselves (a claim in place commits
            # through runs of its own).
            attempts = result.attempts if isinstance(result, BatchClaim | CountReport) else store.last_attempts
            outcomes[position] = (result, attempts)
        except BaseException as error:  # re-raised below, in the test's thread
            outcomes[position] = error

    gate = CommitGate(len(writers), holds=on_state_table(store), timeout=GATE_SECONDS)
    with commit_gate(gate):
        threads = [threading.Thread(target=run, args=item) for item in enumerate(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


def assert_one_re_ran(outcomes: list[tuple[object, int]]) -> None:
    """Both committed: the first on its first attempt, the other after losing the race to it."""
    assert sorted(attempts for _, attempts in outcomes) == [1, 2]


def test_commands_and_bulk_paths_racing_on_the_same_groups_leave_kept_counts_equal_to_a_recount(
    spark: SparkSession, store: StreamStore
) -> None:
    ids = spark.createDataFrame([(entry(4),)], "id string")
    rounds: list[tuple[Callable[[], object], Callable[[], object]]] = [
        (
            lambda: store.execute("XREADGROUP", "GROUP", "billing", "carol", "COUNT", "2", "STREAMS", "orders", ">"),
            lambda: store.execute("XACK", "orders", "billing", entry(0)),
        ),
        (
            lambda: store.execute("XCLAIM", "orders", "billing", "dave", "0", entry(1)),
            lambda: store.acknowledge("orders", "billing", ids),
        ),
        (
            lambda: store.execute("XAUTOCLAIM", "orders", "billing", "erin", "0", "0", "COUNT", "2"),
            lambda: store.deliver("orders", "billing", "frank", 2),
        ),
        (
            lambda: store.claim_stale(StaleSelection(min_idle_ms=0, groups=("shipping",)), "grace"),
            lambda: store.execute("XACK", "orders", "shipping", entry(0), entry(1)),
        ),
    ]
    for first, second in rounds:
        assert_one_re_ran(race(store, first, second))

    report = store.verify_counts()
    assert (report.checked, report.uncounted, report.mismatches) == (2, 0, ())
    assert kept(store) == recount(store)
    total, owners = recount(store)[("orders", "billing")]
    assert total == 7 - 2 + 2 + 2  # two acknowledged, two read by carol, two delivered to frank
    assert sum(owners.values()) == total - 1  # the XNACKed entry: XAUTOCLAIM's COUNT 2 took two before it


def test_a_repair_racing_an_acknowledgement_of_the_same_group_loses_or_wins_cleanly_and_leaves_exact_counts(
    spark: SparkSession, store: StreamStore
) -> None:
    corrupt(spark, store, "orders", "billing", "alice", 7)
    outcomes = race(
        store,
        lambda: store.verify_counts(repair=True),
        lambda: store.execute("XACK", "orders", "billing", entry(0), entry(4)),
    )
    assert_one_re_ran(outcomes)
    (report, _), (acknowledged, _) = outcomes
    assert isinstance(report, CountReport) and report.repaired_version is not None
    assert report.mismatches[0] == CountMismatch(
        "orders", "billing", "alice", 7 - (report.attempts - 1), 4 - (report.attempts - 1)
    )
    assert acknowledged == 2
    assert store.verify_counts().mismatches == ()
    assert kept(store) == recount(store)
    assert recount(store)[("orders", "billing")] == (5, {"alice": 3, "bob": 1})


@pytest.mark.slow
def test_a_second_driver_committing_while_this_one_holds_its_commit_makes_it_re_run_and_the_counts_stay_exact(
    spark: SparkSession, store: StreamStore, tmp_path: Path
) -> None:
    args = ["--path", store.path, "--clock", str(T0 + 120_000), "--consumer", "child", "--count", "3"]
    child = Worker([*args, "--key", "orders", "--group", "billing", "--min-idle", "0", "--wait-go"], tmp_path / "c.log")
    try:
        child.expect("ready")
        outcome: list[Any] = []

        def read() -> None:
            try:
                reply = store.execute("XREADGROUP", "GROUP", "billing", "zoe", "COUNT", "3", "STREAMS", "orders", ">")
                outcome.append((reply, store.last_attempts))
            except BaseException as error:  # asserted below
                outcome.append(error)

        with commit_gate(CommitGate(1, holds=on_state_table(store), release_when_all_arrive=False)) as gate:
            thread = threading.Thread(target=read)
            thread.start()
            gate.wait_held()  # this driver's transaction is open, its files written
            child.go()
            claimed = child.result()  # the other driver committed meanwhile
            gate.release()
            thread.join()
        assert child.process.wait(timeout=120) == 0, child.tail()
    finally:
        child.close()
    [(reply, attempts)] = outcome
    assert attempts == 2  # lost its race to the other driver's commit, re-ran
    assert claimed["attempts"] == 1 and len(claimed["reply"][1]) == 3
    assert [entry_id for entry_id, _ in reply[0][1]] == [entry(7), entry(8), entry(9)]
    report = store.verify_counts()
    assert (report.checked, report.mismatches) == (2, ())
    assert kept(store) == recount(store)

"""The recovery run over a fleet of 60 groups: a constant number of commits, checked entry by entry.

One template store is built per module with the bulk APIs (one commit per step for every group) and a
hand-moved clock; each test runs on its own copy of the template's folder.

The template: streams s00..s19 of 8 entries (n = 0..7, IDs ``T0-n``), groups a, b and c on each.
At T0 every group delivers entries 0-1 to ``flaky`` and 2-5 to ``dead``; groups a and b then claim
their flaky entries back twice (delivery count 3: poison with max_deliveries 2). Entry 3 of s00..s04 and
entry 0 of s05 are deleted from their streams (XDEL). At T0 + 55 min groups a and c of s00..s09 deliver
entry 6 to ``live-x`` and entry 7 to ``live-y`` (fresh at the run, and live consumers).

Runs happen at T_RUN = T0 + 60 min with min_idle 10 min. The expected outcome of every pending entry
is computed here from the template's PEL, group by group, as the per-group rules say (docs/RECOVERY.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.cli.recover import EXIT_CONFIG, run_job
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import AppConfig, RecoveryOptions, SparkConfig, StoreConfig
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.policies import RecoveryPolicy, policy_for
from streamclaim_spark.engine.transaction import PendingCommit
from streamclaim_spark.fleet.recovery import (
    GroupReport,
    RecoveryReport,
    RecoverySelectionError,
    in_place_round,
    recover_stale,
    rounds,
)
from streamclaim_spark.fleet.recovery import run as recovery_run
from streamclaim_spark.state import snapshot as snapshot_module
from streamclaim_spark.state.companion_schema import DEAD_LETTER_SCHEMA
from streamclaim_spark.state.tables import table_path
from streamclaim_spark.testing.commit_gate import CommitGate, commit_gate
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock
from tests.fixtures import TEST_SPARK_CONF, TemplateStores
from tests.spark.pel import current_version, rewritten_buckets
from tests.spark.test_recovery import PENDING_SCHEMA, at, dead_letters, pending

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MIN = 60_000
T0 = 1_700_000_000_000
T_RUN = T0 + 60 * MIN
STREAMS = [f"s{i:02d}" for i in range(20)]
GROUPS = ("a", "b", "c")
DELETED = {(key, 3) for key in STREAMS[:5]} | {("s05", 0)}
LIVE = {(key, group) for key in STREAMS[:10] for group in ("a", "c")}
OPTIONS = RecoveryOptions(min_idle_ms=10 * MIN, live_window_ms=10 * MIN, max_deliveries=2)
REPO = Path(__file__).resolve().parents[2]


def _build_fleet(store: StreamStore) -> None:
    """The module's template store, with bulk commits (module docstring)."""
    clock = store.clock
    assert isinstance(clock, ManualClock)
    rows = store.spark.range(0, 160, 1, 1).selectExpr(
        "format_string('s%02d', CAST(id DIV 8 AS INT)) AS s", "id % 8 AS n"
    )
    assert store.append_streams(rows, stream_column="s").count == 160
    assert store.create_groups([(key, group, "0") for key in STREAMS for group in GROUPS]) == 60
    every = [(key, group) for key in STREAMS for group in GROUPS]
    assert sum(d.count for d in store.deliver_many([(k, g, "flaky") for k, g in every], 2)) == 120
    assert sum(d.count for d in store.deliver_many([(k, g, "dead") for k, g in every], 4)) == 240
    again = StaleSelection(0, groups=("a", "b"), owners=("flaky",))
    for _ in range(2):
        assert store.claim_stale(again, "flaky").total_claimed == 80
    for key, n in sorted(DELETED):
        assert store.execute("XDEL", key, f"{T0}-{n}") == 1
    clock.now = T0 + 55 * MIN
    for consumer in ("live-x", "live-y"):
        assert sum(d.count for d in store.deliver_many([(k, g, consumer) for k, g in sorted(LIVE)], 1)) == 20


@pytest.fixture
def fleet(templates: TemplateStores, tmp_path: Path) -> StreamStore:
    """A private copy of the template store, its clock at T_RUN."""
    template = templates.template("fleet recovery", _build_fleet, clock=ManualClock(T0))
    return templates.copy(template, tmp_path / "store", clock=ManualClock(T_RUN))


class Expected:
    """What a run must do to each pending entry of the template, decided group by group in Python (each
    group by its policy, policy_for)."""

    def __init__(self, store: StreamStore, run: RecoveryOptions, run_id: str) -> None:
        # The live spread's contract: xxhash64(stream, group, id) over the live consumers in name order.
        bucket = F.pmod(F.xxhash64(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ), F.lit(2)).alias("bucket")
        rows = pending(store, bucket).collect()
        assert len(rows) == 60 * 6 + 2 * len(LIVE)
        self.pending: list[tuple[Any, ...]] = []
        self.dead_letters: list[tuple[Any, ...]] = []
        counts: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            pair = (row[C.STREAM], row[C.GROUP])
            options = policy_for(run, *pair)[1]
            n = int(row["id"].split("-")[1])
            group = counts.setdefault(pair, {"scanned": 0, "stale": 0, "claimed": 0, "purged": 0, "dead_lettered": 0})
            group["scanned"] += 1
            kept = (*pair, row["id"], row[C.OWNER], row[C.DELIVERY_TIME_MS], row[C.DELIVERY_COUNT])
            if row[C.DELIVERY_TIME_MS] > T_RUN - options.min_idle_ms:
                self.pending.append(kept)
                continue
            group["stale"] += 1
            deleted = (pair[0], n) in DELETED
            if options.dead_letter and row[C.DELIVERY_COUNT] > options.max_deliveries:
                group["dead_lettered"] += 1
                fields = None if deleted else [(b"n", str(n).encode())]
                count = row[C.DELIVERY_COUNT]
                reason = f"max-deliveries exceeded ({count} > {options.max_deliveries})"
                self.dead_letters.append((run_id, at(T_RUN), *kept[:-2], count, T0, fields, reason, None, None, None))
            elif deleted:
                group["purged"] += 1
            else:
                group["claimed"] += 1
                live = options.assign == "live" and pair in LIVE
                owner = ("live-x", "live-y")[row["bucket"]] if live else options.consumer
                self.pending.append((*pair, row["id"], owner, T_RUN, row[C.DELIVERY_COUNT] + 1))
        self.reports = tuple(_report(run, pair, counts[pair]) for pair in sorted(counts))


def _report(run: RecoveryOptions, pair: tuple[str, str], counts: dict[str, Any]) -> GroupReport:
    """The report a group of the template gets, by its policy, when its entries are recovered as counted."""
    policy, options = policy_for(run, *pair)
    live = options.assign == "live" and pair in LIVE
    owners = (("live-x", "live-y") if live else (options.consumer,)) if counts["claimed"] else ()
    return GroupReport(*pair, **counts, owners=owners, policy=policy)


def assert_recovered(spark: SparkSession, store: StreamStore, expected: Expected, runs: list[str]) -> None:
    """The PEL is exactly as expected and every poison entry has one dead letter per run that acknowledged it."""
    assert_df_equality(
        pending(store),
        spark.createDataFrame(expected.pending, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    copies = [(run, *row[1:]) for run in runs for row in expected.dead_letters]
    assert_df_equality(
        dead_letters(store),
        spark.createDataFrame(copies, DEAD_LETTER_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )


# Spark jobs of one recovery round over the 60 groups (selection, tally, dead-letter copy, claim MERGE,
# run record; with "consumer", whose 14 groups that only claim go in place here, also the recovery
# consumer lookup and their UPDATE), as measured at this commit: issue 29 asks that the wins stay won.
# With the three policies below 60 were measured (a's live spread needs its owners' query, b's in-place
# claim its UPDATE and consumer lookup; not broken down job by job): more Spark jobs, the same commits.
# 51 and 60 until the claim round took the heads the selection had read at its version (2 jobs fewer).
RECOVERY_ROUND_JOB_BUDGET = {"consumer": 49, "policies": 58}
# Three groups per stream, three policies: a's entries spread over live consumers, b's dead-lettered only
# past 3 deliveries (so its flaky entries are claimed), c's left alone for 70 minutes (nothing is stale).
POLICIES = (
    RecoveryPolicy(groups=("a",), assign="live", name="policy 1"),
    RecoveryPolicy(groups=("b",), max_deliveries=3, name="policy 2"),
    RecoveryPolicy(groups=("c",), min_idle_ms=70 * MIN, dead_letter=False, name="policy 3"),
)


@pytest.fixture
def in_place_from_one_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims in place however few entries a round claims (in_place_round.MIN_CLAIMS is sized for fleets)."""
    monkeypatch.setattr(in_place_round, "MIN_CLAIMS", 1)


@pytest.mark.usefixtures("in_place_from_one_claim")
@pytest.mark.parametrize("rules", ["consumer", "policies"])
def test_one_run_recovers_every_group_in_one_claim_commit_as_per_group_runs_would(
    spark: SparkSession, fleet: StreamStore, rules: str
) -> None:
    options = OPTIONS if rules == "consumer" else replace(OPTIONS, policies=POLICIES)
    expected = Expected(fleet, options, "run-1")
    before = current_version(fleet)

    with count_jobs(spark.sparkContext) as counted:
        report = recover_stale(fleet, options, run_id="run-1")

    assert counted.jobs <= RECOVERY_ROUND_JOB_BUDGET[rules], counted.jobs
    assert (report.status, report.recorded) == ("succeeded", True)
    assert report.groups == expected.reports
    # With the policies: a (20 groups) 120 stale, 40 dead-lettered, 5 purged; b 120 stale, none
    # dead-lettered, 6 purged (s05's deleted e0 is a flaky entry, no longer poison); c nothing stale.
    stale, claimed, purged, dead_lettered = (360, 264, 16, 80) if rules == "consumer" else (240, 189, 11, 40)
    assert report.totals == {
        "groups": 60,
        "scanned": 400,
        "stale": stale,
        "claimed": claimed,
        "purged": purged,
        "dead_lettered": dead_lettered,
        "dead_letters_withdrawn": 0,
        "conflicts_retried": 0,
        "skipped": 0,
    }
    assert_recovered(spark, fleet, expected, ["run-1"])
    # The cost budget: one claim MERGE on the state table (and, for the groups that only claim to the
    # recovery consumer — c of s06..s19, or with the policies b of s06..s19 — their UPDATE after it), one
    # dead-letter append (after the table's creation), one recovery_runs append — whatever the number of
    # groups, and whatever their policies.
    assert current_version(fleet) == before + 2
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(fleet.path, C.DEAD_LETTER_TABLE_DIR)}`")
    assert sorted(row["operation"] for row in history.collect()) == ["CREATE TABLE", "WRITE"]


def _operations_since(spark: SparkSession, store: StreamStore, version: int) -> list[str]:
    """The operations of the state table's commits after ``version``, oldest first (DESCRIBE HISTORY)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(store.path, C.STATE_TABLE_DIR)}`")
    return [row["operation"] for row in history.where(F.col("version") > version).orderBy("version").collect()]


def test_a_job_killed_between_the_dead_letter_copy_and_the_claim_loses_nothing_and_a_rerun_finishes(
    spark: SparkSession, fleet: StreamStore
) -> None:
    before = current_version(fleet)
    expected = Expected(fleet, OPTIONS, "run-again")
    script = f"""
import os, signal
from streamclaim_spark import StreamStore
from streamclaim_spark.fleet.recovery import run as recovery
from streamclaim_spark.testing.spark_jobs import count_jobs
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.policies import RecoveryPolicy, policy_for
from streamclaim_spark.state.session import build_session

def killed(*_args, **_kwargs):
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the driver and its JVM die, as on a lost machine

spark = build_session(master="local[1]", conf={TEST_SPARK_CONF!r})
store = StreamStore.open({fleet.path!r}, spark=spark, clock=lambda: {T_RUN})
recovery.claim_rounds = killed
recovery.recover_stale(store, RecoveryOptions(**{vars(OPTIONS)!r}), run_id="run-killed")
"""
    killed = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, start_new_session=True, check=False
    )

    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    # Copied, not acknowledged: every poison entry is still pending, nothing was claimed, no run row.
    assert current_version(fleet) == before
    assert dead_letters(fleet).where(F.col("run_id") == "run-killed").count() == 80
    assert not os.path.exists(table_path(fleet.path, C.RECOVERY_RUNS_TABLE_DIR))

    report = recover_stale(fleet, OPTIONS, run_id="run-again")

    assert report.groups == expected.reports
    # At the default in_place_round.MIN_CLAIMS (100,000; 264 claims here) the round is one MERGE, its groups
    # that only claim (c of s10..s19) included: no UPDATE in place, as with MIN_CLAIMS = 1 (the tests above).
    assert report.totals["claimed"] < in_place_round.MIN_CLAIMS
    assert _operations_since(spark, fleet, before) == ["MERGE"]
    # Nothing lost, nothing owned twice; the killed run's copies stay as duplicates (docs/RECOVERY.md).
    assert_recovered(spark, fleet, expected, ["run-killed", "run-again"])
    assert pending(fleet).groupBy(C.STREAM, C.GROUP, "id").count().where("count > 1").count() == 0


@pytest.mark.usefixtures("in_place_from_one_claim")
def test_two_runs_racing_on_one_store_claim_each_stale_entry_exactly_once(
    spark: SparkSession, fleet: StreamStore
) -> None:
    expected = Expected(fleet, OPTIONS, "run-?")
    reports: dict[str, RecoveryReport] = {}

    def run(run_id: str) -> None:
        reports[run_id] = recover_stale(fleet, OPTIONS, run_id=run_id)

    def claim_round(commit: PendingCommit) -> bool:
        return commit.path == fleet.state_path and commit.operation.startswith("RECOVER ")

    racers = [threading.Thread(target=run, args=(run_id,)) for run_id in ("run-a", "run-b")]
    # Each run's first claim round waits at its commit for the other's: both decided on one snapshot.
    with commit_gate(CommitGate(2, holds=claim_round)):
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()

    assert sorted(reports) == ["run-a", "run-b"]
    assert {report.status for report in reports.values()} == {"succeeded"}
    totals = [report.totals for report in reports.values()]
    assert sum(t["conflicts_retried"] for t in totals) > 0  # the loser's groups went again
    assert sum(t["claimed"] for t in totals) == 264
    assert sum(t["purged"] for t in totals) == 16
    assert sum(t["dead_lettered"] for t in totals) == 80
    # The claimed entries have one more delivery, not two; each poison entry has exactly one dead letter
    # left (the losing run withdrew the copies it could not acknowledge).
    assert_df_equality(
        pending(fleet),
        spark.createDataFrame(expected.pending, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert_df_equality(
        dead_letters(fleet).drop("run_id"),
        spark.createDataFrame(expected.dead_letters, DEAD_LETTER_SCHEMA).drop("run_id"),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    withdrawn = sum(t["dead_letters_withdrawn"] for t in totals)
    copied = dead_letters(fleet).count() + withdrawn
    assert copied in (80, 160)


def test_a_selection_that_matches_no_group_is_refused_by_name_and_writes_nothing(
    spark: SparkSession, fleet: StreamStore, capsys: pytest.CaptureFixture[str]
) -> None:
    before = current_version(fleet)
    typo = replace(OPTIONS, streams=("orderz-*",), groups=("a",))
    message = (
        "streams=['orderz-*'] groups=['a']: no consumer group matches (the store has 60 group(s) on 20 "
        "stream(s)); fix the patterns (--streams/--groups, jobs.recover_stale.streams/groups)"
    )

    with pytest.raises(RecoverySelectionError) as refused:
        recover_stale(fleet, typo)
    config = AppConfig(store=StoreConfig(path=fleet.path), spark=SparkConfig(), recover_stale=typo)
    exit_code = run_job(config, spark=spark)

    assert str(refused.value) == message
    assert exit_code == EXIT_CONFIG
    assert capsys.readouterr().err == f"streamclaim-recover: selection error: {message}\n"
    assert current_version(fleet) == before
    assert not os.path.exists(table_path(fleet.path, C.DEAD_LETTER_TABLE_DIR))
    assert not os.path.exists(table_path(fleet.path, C.RECOVERY_RUNS_TABLE_DIR))


def test_a_group_changed_during_every_claim_commit_is_skipped_and_reported_while_the_others_recover(
    spark: SparkSession, fleet: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = replace(OPTIONS, streams=("s0[0-2]",))
    busy = ("s01", "b")
    of_busy = (F.col(C.STREAM) == busy[0]) & (F.col(C.GROUP) == busy[1])
    untouched = sorted(pending(fleet).where(of_busy).collect())
    original = rounds.decide_round
    joined = iter(range(100))

    def interfered(ctx: Any, pairs: list[tuple[str, str]], *args: Any) -> Any:
        if busy in pairs:  # a consumer joins s01/b after the round read it: its head moves
            assert fleet.execute("XGROUP", "CREATECONSUMER", *busy, f"late-{next(joined)}") == 1
        return original(ctx, pairs, *args)

    monkeypatch.setattr(rounds, "decide_round", interfered)
    # Three claim commits instead of six: the same path (set aside, then alone until the last), half the time.
    monkeypatch.setattr(rounds, "MAX_CLAIM_ROUNDS", 3)
    monkeypatch.setattr(recovery_run, "MAX_CLAIM_ROUNDS", 3)

    report = recover_stale(fleet, options, run_id="run-busy")

    assert report.status == "partial"
    assert report.error == (
        "1 group(s) skipped: changed by others during each of 3 claim commits; run again to recover them: s01/b"
    )
    (skipped,) = [group for group in report.groups if group.skipped]
    assert (skipped.stream, skipped.group, skipped.claimed, skipped.dead_lettered) == ("s01", "b", 0, 0)
    # Lost in the first commit (set aside while the others commit in the second), then alone in the third.
    assert (skipped.conflicts_retried, skipped.dead_letters_withdrawn) == (2, 2)
    # The 8 other groups: entries 2, 4, 5 each (3 is deleted in these streams), plus 0 and 1 in group c.
    assert sum(group.claimed for group in report.groups) == 8 * 3 + 3 * 2
    assert sorted(pending(fleet).where(of_busy).collect()) == untouched
    assert dead_letters(fleet).where(of_busy).count() == 0
    runs = fleet.spark.read.format("delta").load(table_path(fleet.path, C.RECOVERY_RUNS_TABLE_DIR))
    assert runs.select("status").collect() == [("partial",)]


@pytest.mark.usefixtures("in_place_from_one_claim")
def test_a_claim_landing_between_the_selection_and_the_claim_round_is_read_by_the_round_not_lost_to(
    fleet: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The round takes the heads the selection read only at the selection's version: here an XCLAIM
    # moves s11/c's head after the selection, so the round reads the heads again (with the selection's,
    # its commit's guard would lose to that head and the group go again) and leaves the claimed entry alone.
    options = replace(OPTIONS, streams=("s1[0-2]",), groups=("c",))
    original = recovery_run.select_groups

    def then_a_claim_lands(*args: Any) -> Any:
        selected = original(*args)
        assert len(fleet.execute("XCLAIM", "s11", "c", "late", "0", f"{T0}-2")) == 1
        return selected

    monkeypatch.setattr(recovery_run, "select_groups", then_a_claim_lands)
    before = current_version(fleet)

    report = recover_stale(fleet, options, run_id="run-late")

    assert (report.status, report.totals["conflicts_retried"], report.totals["claimed"]) == ("succeeded", 0, 17)
    assert current_version(fleet) == before + 2  # the XCLAIM, the round's one commit of files
    (late,) = pending(fleet).where((F.col(C.STREAM) == "s11") & (F.col(C.OWNER) == "late")).collect()
    assert (late[C.GROUP], late[C.DELIVERY_COUNT]) == ("c", 2)


def test_a_fleet_s_pending_rows_are_read_by_bucket_alone_only_when_no_other_group_shares_their_buckets(
    fleet: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of groups in production; here past a limit of 2, with the 60 groups' heads read once.
    monkeypatch.setattr(snapshot_module, "NAMED_PARTITIONS_MAX", 2)
    snapshot = fleet.snapshot()
    snapshot.all_streams()
    every = [(key, group) for key in STREAMS for group in GROUPS]
    some = [("s01", "a"), ("s02", "b"), ("s03", "c")]  # their buckets hold other groups' PEL rows

    for pairs, named, rows in ((every, False, 400), (some, True, 8 + 6 + 8)):
        condition = snapshot.rows_of_kind([group_partition(*pair) for pair in pairs], C.KIND_PENDING)
        assert (C.PARTITION_ID in str(condition)) is named
        wanted = fleet.spark.createDataFrame(pairs, f"{C.STREAM} string, {C.GROUP} string")
        table = snapshot.frame().select(C.ROW_KIND, C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, C.OWNER, C.BUCKET)
        expected = table.where(F.col(C.ROW_KIND) == C.KIND_PENDING).join(wanted, [C.STREAM, C.GROUP], "left_semi")
        got = table.where(condition).select(*expected.columns)
        assert expected.count() == rows
        assert_df_equality(got, expected, ignore_row_order=True)


# Spark jobs of an in-place run over 10 groups that only claim, the recovery consumer created with them:
# 16 as one commit of files, 14 since its round takes the heads its selection read.
IN_PLACE_RUN_JOB_BUDGET = 14


@pytest.mark.usefixtures("in_place_from_one_claim")
def test_a_round_that_only_claims_to_the_recovery_consumer_is_one_commit_of_files_that_ends_as_the_merge_does(
    spark: SparkSession, fleet: StreamStore, templates: TemplateStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Group c of s10..s19: six stale entries each, delivered once, none poison, none deleted.
    options = replace(OPTIONS, streams=("s1*",), groups=("c",))
    merged = templates.copy("fleet recovery", tmp_path / "merged", clock=ManualClock(T_RUN))
    before = current_version(fleet)

    with count_jobs(spark.sparkContext) as counted:
        in_place = recover_stale(fleet, options, run_id="in-place")
    monkeypatch.setattr(rounds, "claims_only", lambda *_args: [])
    by_merge = recover_stale(merged, options, run_id="merge")

    assert counted.jobs <= IN_PLACE_RUN_JOB_BUDGET, counted.jobs
    assert in_place.groups == by_merge.groups
    assert (in_place.totals["claimed"], in_place.totals["purged"], in_place.totals["dead_lettered"]) == (60, 0, 0)
    assert_df_equality(pending(fleet), pending(merged), ignore_row_order=True, ignore_nullable=True)
    consumers = [C.STREAM, C.GROUP, C.CONSUMER, C.SEEN_TIME_MS, C.ACTIVE_TIME_MS]
    left, right = (store.snapshot().frame().where(F.col(C.ROW_KIND) == C.KIND_CONSUMER) for store in (fleet, merged))
    assert_df_equality(left.select(consumers), right.select(consumers), ignore_row_order=True)
    state = table_path(fleet.path, C.STATE_TABLE_DIR)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{state}`").where(F.col("version") > before).orderBy("version")
    # One commit of files: the 10 groups' PEL files rewritten with the claims, their heads and new
    # recovery consumers in the head files; no entry file (issue 44), no Delta UPDATE.
    commits = history.collect()
    assert [row["operation"] for row in commits] == ["WRITE"]
    assert {bucket[0] for bucket in rewritten_buckets(fleet, commits[0]["version"])} == {"g", "h"}

    fleet.clock.now = T_RUN + 20 * MIN  # type: ignore[attr-defined]
    again = recover_stale(fleet, options, run_id="again")

    assert again.totals["claimed"] == 60
    assert current_version(fleet) == before + 2  # one commit again, the consumer already there
    rows = pending(fleet).where(F.col(C.GROUP) == "c").where(F.col(C.STREAM).startswith("s1")).collect()
    assert {(row[C.OWNER], row[C.DELIVERY_TIME_MS], row[C.DELIVERY_COUNT]) for row in rows} == {
        ("recovery", T_RUN + 20 * MIN, 3)
    }

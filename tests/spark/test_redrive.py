"""The redrive (fleet.redrive) on a real store: dead letters back into the group they died in, exactly once.

One template store per module, built in one pipeline (one commit) on a hand-moved clock, then a recovery
run that dead-letters four entries; each test runs on its own copy. At T0:

    orders e0 e1  delivered to alice, then XCLAIM RETRYCOUNT 11: poison (11 > max_deliveries 10)
    orders e2     delivered to alice, then XNACK FATAL (given up: count 2^63 - 1)
    orders e3..e5 delivered to bob and acknowledged             (group billing)
    orders e0..e5 delivered to auditor and acknowledged          (group audit: sees every entry too)
    payments p0   delivered to alice, then XCLAIM RETRYCOUNT 11: poison; p1 acknowledged

At T_RECOVER (T0 + 60 min) the recovery run "recover-1" dead-letters e0, e1, e2 and p0, and every PEL is
empty. Redrives run at T_REDRIVE (one minute later).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark import RedriveFailedError, RedriveSelectionError, StreamStore
from streamclaim_spark.cli import redrive as redrive_cli
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions, RedriveOptions
from streamclaim_spark.core.model import NACK_SLOTS_PER_MS, NACK_ZONE_BASE
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.fleet.redrive import heartbeat as heartbeat_module
from streamclaim_spark.fleet.redrive import letters as letters_module
from streamclaim_spark.fleet.redrive import put_back as put_back_module
from streamclaim_spark.fleet.redrive import run as redrive_run
from streamclaim_spark.fleet.redrive.heartbeat import GONE_AFTER_MS, HEARTBEAT_DIR
from streamclaim_spark.fleet.redrive.letters import ADOPT_AFTER_MS
from streamclaim_spark.fleet.redrive.report import RedriveReport
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.tables import table_path
from tests.background import Pause, age, in_thread
from tests.clock import ManualClock
from tests.fixtures import TEST_SPARK_CONF, TemplateStores
from tests.spark.test_recovery import PENDING_SCHEMA, at, dead_letters, pending

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MIN = 60_000
T0 = 1_700_000_000_000
T_RECOVER = T0 + 60 * MIN
T_REDRIVE = T_RECOVER + MIN
ORDERS = [f"{T0}-{i}" for i in range(6)]
PAYMENTS = [f"{T0 + 1}-{i}" for i in range(2)]
RECOVERY = RecoveryOptions(min_idle_ms=10 * MIN, max_deliveries=10)
NACK_SLOT = NACK_ZONE_BASE + T_REDRIVE * NACK_SLOTS_PER_MS
REPO = Path(__file__).resolve().parents[2]


def _build(store: StreamStore) -> None:
    """The module's template (module docstring): one pipeline (one commit), then the recovery run."""
    clock = store.clock
    assert isinstance(clock, ManualClock)
    pipe = store.pipeline()
    for i, entry_id in enumerate(ORDERS):
        pipe.execute_command("XADD", "orders", entry_id, "n", str(i))
    for i, entry_id in enumerate(PAYMENTS):
        pipe.execute_command("XADD", "payments", entry_id, "n", str(i))
    for key, group in (("orders", "billing"), ("orders", "audit"), ("payments", "billing")):
        pipe.execute_command("XGROUP", "CREATE", key, group, "0")
    for argv in (
        ("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "3", "STREAMS", "orders", ">"),
        ("XREADGROUP", "GROUP", "billing", "bob", "STREAMS", "orders", ">"),
        ("XACK", "orders", "billing", *ORDERS[3:]),
        ("XCLAIM", "orders", "billing", "alice", "0", *ORDERS[:2], "RETRYCOUNT", "11", "JUSTID"),
        ("XNACK", "orders", "billing", "FATAL", "IDS", "1", ORDERS[2]),
        ("XREADGROUP", "GROUP", "audit", "auditor", "STREAMS", "orders", ">"),
        ("XACK", "orders", "audit", *ORDERS),
        ("XREADGROUP", "GROUP", "billing", "alice", "STREAMS", "payments", ">"),
        ("XCLAIM", "payments", "billing", "alice", "0", PAYMENTS[0], "RETRYCOUNT", "11", "JUSTID"),
        ("XACK", "payments", "billing", PAYMENTS[1]),
    ):
        pipe.execute_command(*argv)

    def read(key: str, ids: list[str], first: int = 0) -> list[object]:
        return [[key, [[entry_id, ["n", str(first + i)]] for i, entry_id in enumerate(ids)]]]

    replies = pipe.execute()
    assert replies[-10:] == [
        *(read("orders", ORDERS[:3]), read("orders", ORDERS[3:], 3), 3, ORDERS[:2], 1),
        *(read("orders", ORDERS), 6, read("payments", PAYMENTS), [PAYMENTS[0]], 1),
    ]
    clock.now = T_RECOVER
    assert recover_stale(store, RECOVERY, run_id="recover-1").totals["dead_lettered"] == 4


@pytest.fixture
def store(templates: TemplateStores, tmp_path: Path) -> StreamStore:
    """A private copy of the template store, its clock at T_REDRIVE."""
    template = templates.template("redrive", _build, clock=ManualClock(T0))
    return templates.copy(template, tmp_path / "store", clock=ManualClock(T_REDRIVE))


def utc(ms: int) -> datetime:
    """A timestamp as collect() gives it on the tests' UTC session (naive)."""
    return at(ms).replace(tzinfo=None)


def letter_marks(store: StreamStore) -> list[tuple[object, ...]]:
    """Each dead letter's entry and redrive columns, in name order."""
    rows = dead_letters(store).select(C.STREAM, "id", "run_id", "redrive_run_id", "redrive_taken_at", "redriven_at")
    return sorted(tuple(row) for row in rows.collect())


def redrive_runs(store: StreamStore) -> DataFrame:
    return store.spark.read.format("delta").load(table_path(store.path, C.REDRIVE_RUNS_TABLE_DIR))


def versions(store: StreamStore) -> tuple[int, int]:
    """The state table's and the dead-letter table's versions."""
    letters = table_path(store.path, C.DEAD_LETTER_TABLE_DIR)
    return latest_version(store.spark, store.state_path), latest_version(store.spark, letters)


def test_a_redrive_puts_dead_letters_back_into_their_group_only_and_its_consumers_finish_them(
    spark: SparkSession, store: StreamStore
) -> None:
    # The bug is fixed; meanwhile e1's stream entry was deleted, so it comes back as a new entry.
    assert store.execute("XDEL", "orders", ORDERS[1]) == 1

    options = RedriveOptions(streams=("orders",), to_stream="orders-redriven")
    report = store.redrive(options, run_id="redrive-1")

    assert report.status == "succeeded" and report.recorded
    assert report.groups == {("orders", "billing"): Counter(redriven=2, re_added=1)}
    assert report.totals == {
        **{"redriven": 2, "re_added": 1, "entry_gone": 0, "group_gone": 0, "already_pending": 0},
        **{"capped": 0, "remaining": 0, "adopted": 0},
    }
    # Back in billing's NACK zone, owner-less, oldest letter first (then by ID); e0 keeps its count, e2's
    # XNACK FATAL marker becomes 0. No other PEL changed: payments was not selected, audit never lost one.
    assert_df_equality(
        pending(store),
        spark.createDataFrame(
            [
                ("orders", "billing", ORDERS[0], None, NACK_SLOT, 11),
                ("orders", "billing", ORDERS[2], None, NACK_SLOT + 1, 0),
            ],
            PENDING_SCHEMA,
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # Only billing sees them again, and only as given back: nothing is new to either group.
    assert store.execute("XREADGROUP", "GROUP", "audit", "auditor", "STREAMS", "orders", ">") is None
    assert store.execute("XREADGROUP", "GROUP", "billing", "bob", "STREAMS", "orders", ">") is None
    claimed = store.execute("XREADGROUP", "GROUP", "billing", "bob", "CLAIM", "0", "STREAMS", "orders", ">")
    assert claimed == [["orders", [[ORDERS[0], ["n", "0"], T_REDRIVE, 11], [ORDERS[2], ["n", "2"], T_REDRIVE, 0]]]]
    assert store.execute("XACK", "orders", "billing", ORDERS[0], ORDERS[2]) == 2
    assert store.execute("XPENDING", "orders", "billing") == [0, None, None, None]
    origin = ["redriven_from_stream", "orders", "redriven_from_group", "billing", "redriven_from_id", ORDERS[1]]
    assert store.execute("XRANGE", "orders-redriven", "-", "+") == [[f"{T_REDRIVE}-0", ["n", "1", *origin]]]
    # The letters of the entries that went back are marked; p0's stays dead and free.
    marked = ("redrive-1", utc(T_REDRIVE), utc(T_REDRIVE))
    assert letter_marks(store) == [
        *(("orders", ORDERS[i], "recover-1", *marked) for i in range(3)),
        ("payments", PAYMENTS[0], "recover-1", None, None, None),
    ]
    runs = redrive_runs(store).select("run_id", "status", "redriven", "re_added", "capped", "remaining").collect()
    assert [tuple(row) for row in runs] == [("redrive-1", "succeeded", 2, 1, 0, 0)]

    # Run again: every selected letter is redriven, so nothing is put back and the state is not written.
    state_before = versions(store)[0]
    again = store.redrive(options, run_id="redrive-2")

    assert again.groups == {} and again.totals["redriven"] == 0
    assert versions(store)[0] == state_before


def test_a_dry_run_counts_and_writes_nothing_and_limit_where_and_the_cap_choose_the_entries(
    spark: SparkSession, store: StreamStore
) -> None:
    before = versions(store)
    dry = store.redrive(RedriveOptions(where="reason = 'XNACK FATAL'", dry_run=True), run_id="dry")

    assert dry.groups == {("orders", "billing"): Counter(redriven=1)} and not dry.recorded
    assert versions(store) == before
    assert not os.path.exists(table_path(store.path, C.REDRIVE_RUNS_TABLE_DIR))

    # limit: the oldest letter first (all three died at once: then by ID), the others left for later.
    limited = store.redrive(RedriveOptions(streams=("orders",), limit=1), run_id="first")
    assert (limited.totals["redriven"], limited.remaining) == (1, 2)
    assert pending(store).select("id").collect()[0]["id"] == ORDERS[0]

    # e0 fails again: claimed with 11 deliveries, dead-lettered by the next recovery run. With a cap of one
    # redrive it now stays dead, and the report says so.
    assert store.execute("XCLAIM", "orders", "billing", "alice", "0", ORDERS[0], "RETRYCOUNT", "11", "JUSTID")
    store.clock.now = T_REDRIVE + 20 * MIN  # type: ignore[attr-defined]
    assert recover_stale(store, RECOVERY, run_id="recover-2").totals["dead_lettered"] == 1
    capped = store.redrive(RedriveOptions(where=f"id = '{ORDERS[0]}'", max_redrives=1), run_id="capped")

    assert (capped.groups, capped.capped) == ({}, 1)
    assert pending(store).count() == 0
    second_letter = [row for row in letter_marks(store) if row[1:3] == (ORDERS[0], "recover-2")]
    assert second_letter == [("orders", ORDERS[0], "recover-2", None, None, None)]


def test_a_predicate_that_does_not_parse_and_patterns_that_match_nothing_are_refused_before_any_write(
    store: StreamStore, capsys: pytest.CaptureFixture[str]
) -> None:
    before = versions(store)

    with pytest.raises(RedriveSelectionError, match=r"^where='reason =' is not a predicate over the dead_letters"):
        store.redrive(RedriveOptions(where="reason ="))
    with pytest.raises(RedriveSelectionError, match=r"where='colour = 1' .*UNRESOLVED_COLUMN"):
        store.redrive(RedriveOptions(where="colour = 1"))
    with pytest.raises(
        RedriveSelectionError,
        match=r"^streams=\['nope-\*'\] groups=\['\*'\]: no consumer group and no dead letter matches "
        r"\(the store and its dead letters name 3 group\(s\)\); fix the patterns",
    ):
        store.redrive(RedriveOptions(streams=("nope-*",)))
    # The console script says the same and exits 2.
    code = redrive_cli.main(["--conf-dir", str(REPO / "conf"), "--store", store.path, "--where", "reason ="])

    assert code == redrive_cli.EXIT_CONFIG
    assert "streamclaim-redrive: selection error: where='reason ='" in capsys.readouterr().err
    assert versions(store) == before
    assert not os.path.exists(table_path(store.path, C.REDRIVE_RUNS_TABLE_DIR))


def test_a_run_that_failed_after_taking_its_letters_is_finished_by_the_next_run_at_once(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the put-back failed")

    monkeypatch.setattr(redrive_run, "put_back", broken)
    with pytest.raises(RedriveFailedError, match="the put-back failed") as failed:
        store.redrive(RedriveOptions(streams=("orders",)), run_id="broken")
    monkeypatch.undo()

    assert failed.value.report.status == "failed" and failed.value.report.recorded
    assert pending(store).count() == 0
    report = store.redrive(RedriveOptions(streams=("orders",)), run_id="again")

    assert (report.adopted, report.adopted_runs, report.totals["redriven"]) == (3, ("broken",), 3)
    ids = [row["id"] for row in pending(store).orderBy(C.DELIVERY_TIME_MS).collect()]
    assert ids == ORDERS[:3]
    assert {row[3] for row in letter_marks(store) if row[0] == "orders"} == {"again"}


def test_a_driver_killed_between_the_put_back_and_the_mark_is_finished_by_a_rerun_that_puts_back_nothing_twice(
    spark: SparkSession, store: StreamStore
) -> None:
    script = f"""
import os, signal
from streamclaim_spark import StreamStore
from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.fleet.redrive import run
from streamclaim_spark.state.session import build_session

def killed(*_args, **_kwargs):
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the driver and its JVM die, as on a lost machine

spark = build_session(master="local[1]", conf={TEST_SPARK_CONF!r})
store = StreamStore.open({store.path!r}, spark=spark, clock=lambda: {T_REDRIVE})
run.mark = killed
store.redrive(RedriveOptions(streams=("orders",)), run_id="killed")
"""
    killed = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, start_new_session=True, check=False
    )

    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    # Put back, not marked: the three entries are pending again, their letters taken by "killed".
    assert pending(store).count() == 3
    assert {row[3:6] for row in letter_marks(store) if row[0] == "orders"} == {("killed", utc(T_REDRIVE), None)}

    # A run while the killed run's heartbeat is fresh leaves the letters alone (the taker may be running).
    early = store.redrive(RedriveOptions(streams=("orders",)), run_id="early")
    assert (early.adopted, early.groups) == (0, {})
    age([heartbeat_file(store, "killed")], GONE_AFTER_MS + 1_000)  # no renewal for over a minute: gone
    store.clock.now = T_REDRIVE + ADOPT_AFTER_MS  # type: ignore[attr-defined]
    report = store.redrive(RedriveOptions(streams=("orders",)), run_id="again")

    # The killed run's put-back is in the state table's history: the re-run only marks its letters.
    assert (report.adopted, report.adopted_runs, report.groups) == (3, ("killed",), {})
    assert pending(store).groupBy(C.STREAM, C.GROUP, "id").count().where("count > 1").count() == 0
    assert pending(store).count() == 3
    done = ("killed", utc(T_REDRIVE), utc(T_REDRIVE + ADOPT_AFTER_MS))
    assert {row[3:6] for row in letter_marks(store) if row[0] == "orders"} == {done}
    assert not heartbeat_file(store, "killed").exists()  # the adopter removed what the killed run left


def heartbeat_file(store: StreamStore, run_id: str) -> Path:
    return Path(store.path) / HEARTBEAT_DIR / run_id


def adopted_while_paused(
    store: StreamStore, options: RedriveOptions, pause: Pause, monkeypatch: pytest.MonkeyPatch
) -> tuple[RedriveReport, object]:
    """Runs redrive "slow" until ``pause`` stops it, takes it for gone (no renewal, its heartbeat aged past
    GONE_AFTER_MS), runs "adopter" to its end, then lets "slow" go on; returns the adopter's report and
    what "slow" returned or raised."""
    monkeypatch.setattr(heartbeat_module, "RENEW_SECONDS", 3_600.0)  # the paused process renews no more
    thread, out = in_thread(lambda: store.redrive(options, run_id="slow"), name=pause.thread_name)
    assert pause.paused.wait(300)
    age([heartbeat_file(store, "slow")], GONE_AFTER_MS + 1_000)
    adopter = store.redrive(options, run_id="adopter")
    pause.resume()
    thread.join()
    [slow] = out
    return adopter, slow


def each_entry_back_once(store: StreamStore, redriven_by: str) -> None:
    """e0 and e2 pending once each, e1 (deleted) re-added once, and each letter redriven by one run."""
    ids = sorted(row["id"] for row in pending(store).where(f"{C.STREAM} = 'orders'").collect())
    assert ids == [ORDERS[0], ORDERS[2]]
    re_added = store.execute("XRANGE", "orders-redriven", "-", "+")
    assert [entry[1][-2:] for entry in re_added] == [["redriven_from_id", ORDERS[1]]]
    marks = [row for row in letter_marks(store) if row[0] == "orders"]
    assert {(row[3], row[5] is not None) for row in marks} == {(redriven_by, True)}  # one redrive each


def test_a_run_taken_for_gone_while_paused_inside_its_put_back_loses_it_to_the_adopter_and_commits_nothing(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.execute("XDEL", "orders", ORDERS[1]) == 1  # e1 comes back as a new entry of orders-redriven
    options = RedriveOptions(streams=("orders",), to_stream="orders-redriven")
    # Paused after its snapshot and its check that it holds its letters, before its commit.
    pause = Pause(put_back_module._plan, "redrive-slow")
    attempts = Pause(put_back_module._classify, pause.thread_name, stops=False)  # once an attempt
    monkeypatch.setattr(put_back_module, "_plan", pause)
    monkeypatch.setattr(put_back_module, "_classify", attempts)

    adopter, lost = adopted_while_paused(store, options, pause, monkeypatch)

    assert (adopter.adopted_runs, adopter.adopted) == (("slow",), 3)
    assert (adopter.totals["redriven"], adopter.totals["re_added"]) == (2, 1)
    assert isinstance(lost, RedriveFailedError) and lost.report.status == "adopted"
    assert attempts.calls == 2  # its first attempt lost its commit; the re-run found the letters gone
    each_entry_back_once(store, "adopter")


def test_a_run_taken_for_gone_while_paused_between_its_put_back_and_its_mark_is_marked_in_its_name_once(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.execute("XDEL", "orders", ORDERS[1]) == 1
    options = RedriveOptions(streams=("orders",), to_stream="orders-redriven")
    pause = Pause(letters_module.mark, "redrive-slow")
    monkeypatch.setattr(redrive_run, "mark", pause)

    adopter, finished = adopted_while_paused(store, options, pause, monkeypatch)

    # The slow run's put-back had landed: the adopter only marks its letters, by the rows it wrote.
    assert (adopter.adopted_runs, adopter.adopted, adopter.groups) == (("slow",), 3, {})
    assert isinstance(finished, RedriveReport) and finished.status == "succeeded"
    assert (finished.totals["redriven"], finished.totals["re_added"]) == (2, 1)
    each_entry_back_once(store, "slow")

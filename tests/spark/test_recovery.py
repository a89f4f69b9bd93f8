"""The recovery run (recovery.recover_stale) on a real store: claims, dead letters, dry runs, crashes.

One template store is built per module with bulk paths and a hand-moved clock; each test runs on its own
copy of the template's folder (a Delta table is just files), so tests never see each other's commits.

The template, at T0 unless noted (stream ``orders``, group ``billing``; stream ``payments``, group ``billing``):

    orders e0 e1 e2  delivered to alice          (count 1)   e2's stream entry is then deleted (XDEL)
    orders e3        delivered to bob            (count 1)
    orders e4 e5     delivered to bob, then XCLAIM RETRYCOUNT 11: poison (count 11 > max_deliveries 10)
    orders e6 / e7   delivered to carol / erin at T0 + 55 min   (so carol and erin are live at T_RUN)
    payments p0 p1   delivered to alice          (count 1)

Runs happen at T_RUN = T0 + 60 min with min_idle 10 min: e6 and e7 are not stale yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.model import NACK_SLOTS_PER_MS, NACK_ZONE_BASE
from streamclaim_spark.fleet.recovery import GroupReport, RecoveryFailedError, recover_stale, rounds
from streamclaim_spark.fleet.recovery import run as recovery
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.tables import DEAD_LETTER_SCHEMA, RECOVERY_GROUP_SCHEMA, RECOVERY_RUNS_SCHEMA, table_path
from tests.clock import ManualClock
from tests.fixtures import TemplateStores

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MIN = 60_000
T0 = 1_700_000_000_000
T_RUN = T0 + 60 * MIN
ORDERS = [f"{T0}-{i}" for i in range(8)]
PAYMENTS = [f"{T0 + 1}-{i}" for i in range(2)]
OPTIONS = RecoveryOptions(min_idle_ms=10 * MIN, live_window_ms=10 * MIN, max_deliveries=10)
PENDING_SCHEMA = "stream string, group_name string, id string, owner string, delivery_time_ms long, delivery_count long"


def _build_recovery(store: StreamStore) -> None:
    """The module's template store (11 commits; module docstring)."""
    spark = store.spark
    clock = store.clock
    assert isinstance(clock, ManualClock)
    assert str(store.append("orders", spark.range(8).select(F.col("id").alias("n"))).first_id) == ORDERS[0]
    clock.now = T0 + 1
    assert str(store.append("payments", spark.range(2).select(F.col("id").alias("n"))).first_id) == PAYMENTS[0]
    clock.now = T0
    for key in ("orders", "payments"):
        assert store.execute("XGROUP", "CREATE", key, "billing", "0") == "OK"
    assert store.deliver("orders", "billing", "alice", 3).count == 3
    assert store.deliver("orders", "billing", "bob", 3).count == 3
    assert store.deliver("payments", "billing", "alice").count == 2
    poison = ["XCLAIM", "orders", "billing", "bob", "0", ORDERS[4], ORDERS[5], "RETRYCOUNT", "11", "JUSTID"]
    assert store.execute(*poison) == ORDERS[4:6]
    assert store.execute("XDEL", "orders", ORDERS[2]) == 1
    clock.now = T0 + 55 * MIN
    assert store.deliver("orders", "billing", "carol", 1).count == 1
    assert store.deliver("orders", "billing", "erin", 1).count == 1


@pytest.fixture
def store(templates: TemplateStores, tmp_path: Path) -> StreamStore:
    """A private copy of the template store, its clock at T_RUN."""
    template = templates.template("recovery", _build_recovery, clock=ManualClock(T0))
    return templates.copy(template, tmp_path / "store", clock=ManualClock(T_RUN))


def pending(store: StreamStore, *extra: Column) -> DataFrame:
    """Every pending row of the store as (stream, group_name, id, owner, delivery_time_ms, delivery_count, *extra)."""
    return (
        store.snapshot()
        .frame()
        .where(F.col(C.ROW_KIND) == C.KIND_PENDING)
        .select(
            C.STREAM,
            C.GROUP,
            id_text(C.ID_MS, C.ID_SEQ).alias("id"),
            C.OWNER,
            C.DELIVERY_TIME_MS,
            C.DELIVERY_COUNT,
            *extra,
        )
    )


def dead_letters(store: StreamStore) -> DataFrame:
    return store.spark.read.format("delta").load(table_path(store.path, C.DEAD_LETTER_TABLE_DIR))


def recovery_runs(store: StreamStore) -> DataFrame:
    return store.spark.read.format("delta").load(table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR))


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def dead_letter(run_id: str, entry: int) -> tuple[object, ...]:
    """The dead_letters row of poison entry ``orders`` e<entry> copied by ``run_id`` at T_RUN."""
    return (run_id, at(T_RUN), "orders", "billing", ORDERS[entry], "bob", 11, T0, [(b"n", str(entry).encode())])


# Pending rows no run touches: not stale at T_RUN.
FRESH = [
    ("orders", "billing", ORDERS[6], "carol", T0 + 55 * MIN, 1),
    ("orders", "billing", ORDERS[7], "erin", T0 + 55 * MIN, 1),
]


def test_a_run_dead_letters_poison_entries_and_claims_the_rest_to_the_recovery_consumer(
    spark: SparkSession, store: StreamStore
) -> None:
    report = recover_stale(store, OPTIONS, run_id="run-1")

    assert report.status == "succeeded" and report.recorded
    assert report.groups == (
        GroupReport(
            "orders", "billing", scanned=8, stale=6, claimed=3, purged=1, dead_lettered=2, owners=("recovery",)
        ),
        GroupReport("payments", "billing", scanned=2, stale=2, claimed=2, owners=("recovery",)),
    )
    claimed = [("orders", "billing", ORDERS[i], "recovery", T_RUN, 2) for i in (0, 1, 3)] + [
        ("payments", "billing", PAYMENTS[i], "recovery", T_RUN, 2) for i in (0, 1)
    ]
    # e2 was purged (its stream entry is gone); e4 and e5 left the PEL as dead letters.
    assert_df_equality(
        pending(store),
        spark.createDataFrame(claimed + FRESH, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert_df_equality(
        dead_letters(store),
        spark.createDataFrame([dead_letter("run-1", 4), dead_letter("run-1", 5)], DEAD_LETTER_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    runs = recovery_runs(store)
    assert_df_equality(
        runs.drop("groups"),
        spark.createDataFrame(
            [("run-1", at(T_RUN), at(T_RUN), "succeeded", None, 10 * MIN, "consumer", 10, 10, 5, 2, 0, "multi-writer")],
            runs.drop("groups").schema,
        ),
    )
    groups = runs.select(F.explode("groups").alias("g")).select("g.*")
    assert_df_equality(
        groups,
        spark.createDataFrame(
            [
                ("orders", "billing", 8, 6, 3, 1, 2, 0, 0, ["recovery"]),
                ("payments", "billing", 2, 2, 2, 0, 0, 0, 0, ["recovery"]),
            ],
            RECOVERY_GROUP_SCHEMA,
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_live_assignment_spreads_claims_over_recently_active_consumers_only(store: StreamStore) -> None:
    live = RecoveryOptions(min_idle_ms=10 * MIN, live_window_ms=10 * MIN, assign="live")

    report = recover_stale(store, live, run_id="run-live")

    orders, payments = report.groups
    # carol and erin delivered at T0 + 55 min are live; alice and bob (last active at T0) are not.
    assert (orders.claimed, orders.owners) == (3, ("carol", "erin"))
    # No consumer of payments/billing was active in the window: its entries go to the recovery consumer.
    assert (payments.claimed, payments.owners) == (2, ("recovery",))
    rows = pending(store).where(F.col(C.DELIVERY_TIME_MS) == T_RUN).select(C.STREAM, C.OWNER).collect()
    owners = {(row[C.STREAM], row[C.OWNER]) for row in rows}
    assert {owner for stream, owner in owners if stream == "orders"} <= {"carol", "erin"}
    assert {owner for stream, owner in owners if stream == "payments"} == {"recovery"}
    assert len(rows) == 5


def test_nack_assignment_gives_stale_entries_back_to_their_group_behind_those_already_nacked(
    spark: SparkSession, store: StreamStore
) -> None:
    assert store.execute("XNACK", "payments", "billing", "FAIL", "IDS", "1", PAYMENTS[1]) == 1
    nack = RecoveryOptions(min_idle_ms=10 * MIN, max_deliveries=10, assign="nack")

    report = recover_stale(store, nack, run_id="run-nack")

    assert report.groups == (
        GroupReport("orders", "billing", scanned=8, stale=6, claimed=3, purged=1, dead_lettered=2),
        GroupReport("payments", "billing", scanned=2, stale=2, claimed=1),
    )
    # Owner-less, count kept, in the NACK zone oldest delivery first; p1 (NACKed before) stays first.
    slot = NACK_ZONE_BASE + T_RUN * NACK_SLOTS_PER_MS
    given_back = [("orders", "billing", ORDERS[i], None, slot + n, 1) for n, i in enumerate((0, 1, 3))] + [
        ("payments", "billing", PAYMENTS[1], None, slot, 1),
        ("payments", "billing", PAYMENTS[0], None, slot + 1, 1),
    ]
    assert_df_equality(
        pending(store),
        spark.createDataFrame(given_back + FRESH, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert recovery_runs(store).select("assign").first()[0] == "nack"  # type: ignore[index]
    # The group's own consumers take them first, first given back first served.
    claim = ["XREADGROUP", "GROUP", "billing", "c", "CLAIM", "99999999", "STREAMS", "payments", ">"]
    assert store.execute(*claim) == [
        ["payments", [[PAYMENTS[1], ["n", "1"], T_RUN, 1], [PAYMENTS[0], ["n", "0"], T_RUN, 1]]]
    ]


def test_a_dry_run_reports_what_a_run_would_do_and_writes_nothing(store: StreamStore) -> None:
    version = latest_version(store.session(), store.state_path)

    report = recover_stale(store, replace(OPTIONS, dry_run=True))

    assert [(g.stream, g.claimed, g.purged, g.dead_lettered) for g in report.groups] == [
        ("orders", 3, 1, 2),
        ("payments", 2, 0, 0),
    ]
    assert not report.recorded
    assert report.to_json()["dry_run"] is True
    assert latest_version(store.session(), store.state_path) == version
    assert not Path(table_path(store.path, C.DEAD_LETTER_TABLE_DIR)).exists()
    assert not Path(table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR)).exists()


def test_a_run_log_made_before_writer_mode_existed_gains_the_column_on_the_next_run(
    spark: SparkSession, store: StreamStore
) -> None:
    old_schema = StructType([f for f in RECOVERY_RUNS_SCHEMA.fields if f.name != "writer_mode"])
    old_row: tuple[object, ...] = ("run-0", at(T0), at(T0), "succeeded", None, 10 * MIN, "consumer", 10, 0, 0, 0, 0, [])
    path = table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR)
    spark.createDataFrame([old_row], old_schema).write.format("delta").save(path)

    recover_stale(store, OPTIONS, run_id="run-1")

    runs = spark.read.format("delta").load(path)
    assert runs.columns == RECOVERY_RUNS_SCHEMA.names
    assert sorted(runs.select("run_id", "writer_mode").collect()) == [("run-0", None), ("run-1", "multi-writer")]


def test_a_crash_between_copy_and_ack_duplicates_dead_letters_but_loses_no_entry(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders_only = replace(OPTIONS, streams=("orders",))

    def crash(*_: object) -> list[DataFrame]:
        raise RuntimeError("driver lost")

    with monkeypatch.context() as patch:
        patch.setattr(recovery, "claim_rounds", crash)
        with pytest.raises(RecoveryFailedError) as failure:
            recover_stale(store, orders_only, run_id="run-crashed")

    assert failure.value.report.status == "failed" and failure.value.report.recorded
    # Copied, not acknowledged: the entries are still pending with their last owner.
    poison = pending(store).where(F.col("id").isin(ORDERS[4], ORDERS[5])).select("id", C.OWNER, C.DELIVERY_COUNT)
    assert sorted(poison.collect()) == [(ORDERS[4], "bob", 11), (ORDERS[5], "bob", 11)]
    assert recovery_runs(store).select("run_id", "status").collect() == [("run-crashed", "failed")]

    recover_stale(store, orders_only, run_id="run-again")

    assert pending(store).where(F.col("id").isin(ORDERS[4], ORDERS[5])).count() == 0
    assert_df_equality(
        dead_letters(store),
        spark.createDataFrame(
            [dead_letter(run, entry) for run in ("run-crashed", "run-again") for entry in (4, 5)], DEAD_LETTER_SCHEMA
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_an_entry_claimed_between_copy_and_ack_stays_pending_and_its_copy_is_withdrawn(
    spark: SparkSession, store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    original: Callable[..., list[DataFrame]] = rounds.claim_rounds

    def reclaimed_first(*args: object) -> list[DataFrame]:
        # bob picks e4 up again after the copy: it is in use, so it must not be acknowledged.
        assert store.execute("XCLAIM", "orders", "billing", "bob", "0", ORDERS[4], "JUSTID") == [ORDERS[4]]
        return original(*args)

    monkeypatch.setattr(recovery, "claim_rounds", reclaimed_first)

    report = recover_stale(store, replace(OPTIONS, streams=("orders",)), run_id="run-1")

    (orders,) = report.groups
    assert (orders.dead_lettered, orders.dead_letters_withdrawn) == (1, 1)
    assert pending(store).where(F.col("id") == ORDERS[4]).select(C.OWNER, C.DELIVERY_TIME_MS).collect() == [
        ("bob", T_RUN)
    ]
    assert_df_equality(
        dead_letters(store),
        spark.createDataFrame([dead_letter("run-1", 5)], DEAD_LETTER_SCHEMA),
        ignore_nullable=True,
    )

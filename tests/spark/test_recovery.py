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
from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.integers import LLONG_MAX
from streamclaim_spark.core.model import NACK_SLOTS_PER_MS, NACK_ZONE_BASE
from streamclaim_spark.core.policies import RecoveryPolicy
from streamclaim_spark.fleet.recovery import GroupReport, RecoveryFailedError, recover_stale, rounds
from streamclaim_spark.fleet.recovery import run as recovery
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.companion_schema import DEAD_LETTER_SCHEMA, RECOVERY_GROUP_SCHEMA, RECOVERY_RUNS_SCHEMA
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.tables import table_path
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
    fields = [(b"n", str(entry).encode())]
    return (
        run_id,
        at(T_RUN),
        "orders",
        "billing",
        ORDERS[entry],
        "bob",
        11,
        T0,
        fields,
        "max-deliveries exceeded (11 > 10)",
        None,  # not redriven: no redrive_run_id, redrive_taken_at, redriven_at
        None,
        None,
    )


# Pending rows no run touches: not stale at T_RUN.
FRESH = [
    ("orders", "billing", ORDERS[6], "carol", T0 + 55 * MIN, 1),
    ("orders", "billing", ORDERS[7], "erin", T0 + 55 * MIN, 1),
]


def test_a_run_dead_letters_poison_entries_and_claims_the_rest_to_the_recovery_consumer(
    spark: SparkSession, store: StreamStore
) -> None:
    # p1's consumer gives up on it, saying why: XNACK FATAL sets its delivery count to 2^63 - 1.
    assert store.give_up("payments", "billing", [PAYMENTS[1]], "card expired") == 1

    report = recover_stale(store, OPTIONS, run_id="run-1")

    assert report.status == "succeeded" and report.recorded
    assert report.groups == (
        GroupReport(
            "orders", "billing", scanned=8, stale=6, claimed=3, purged=1, dead_lettered=2, owners=("recovery",)
        ),
        GroupReport("payments", "billing", scanned=2, stale=2, claimed=1, dead_lettered=1, owners=("recovery",)),
    )
    assert report.to_json()["dead_letter_reasons"] == {"XNACK FATAL": 1, "max-deliveries exceeded": 2}
    claimed = [("orders", "billing", ORDERS[i], "recovery", T_RUN, 2) for i in (0, 1, 3)] + [
        ("payments", "billing", PAYMENTS[0], "recovery", T_RUN, 2)
    ]
    # e2 was purged (its stream entry is gone); e4, e5 and p1 left the PEL as dead letters.
    assert_df_equality(
        pending(store),
        spark.createDataFrame(claimed + FRESH, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    nacked_at = NACK_ZONE_BASE + T_RUN * NACK_SLOTS_PER_MS
    fatal = ("run-1", at(T_RUN), "payments", "billing", PAYMENTS[1], None, LLONG_MAX, nacked_at, [(b"n", b"1")])
    assert_df_equality(
        dead_letters(store),
        spark.createDataFrame(
            [
                dead_letter("run-1", 4),
                dead_letter("run-1", 5),
                (*fatal, "XNACK FATAL: card expired", None, None, None),
            ],
            DEAD_LETTER_SCHEMA,
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    runs = recovery_runs(store)
    assert_df_equality(
        runs.drop("groups"),
        spark.createDataFrame(
            [
                (
                    "run-1",
                    at(T_RUN),
                    at(T_RUN),
                    "succeeded",
                    None,
                    10 * MIN,
                    "consumer",
                    10,
                    10,
                    4,
                    3,
                    0,
                    "multi-writer",
                    None,
                )
            ],
            runs.drop("groups").schema,
        ),
    )
    groups = runs.select(F.explode("groups").alias("g")).select("g.*")
    assert_df_equality(
        groups,
        spark.createDataFrame(
            [
                ("orders", "billing", 8, 6, 3, 1, 2, 0, 0, ["recovery"]),
                ("payments", "billing", 2, 2, 1, 0, 1, 0, 0, ["recovery"]),
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


def test_one_run_recovers_three_groups_by_three_policies_in_one_claim_commit(
    spark: SparkSession, store: StreamStore
) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    clock.now = T0 + 52 * MIN  # a third group: orders/shipping, every live entry delivered to dan
    assert store.execute("XGROUP", "CREATE", "orders", "shipping", "0") == "OK"
    assert store.deliver("orders", "shipping", "dan").count == 7
    clock.now = T_RUN
    policies = (
        RecoveryPolicy(streams=("payments",), assign="nack", name="give payments back"),
        RecoveryPolicy(groups=("shipping",), min_idle_ms=5 * MIN, name="impatient shipping"),
        RecoveryPolicy(streams=("orders",), max_deliveries=20, name="patient orders"),
    )
    version = latest_version(store.session(), store.state_path)

    report = recover_stale(store, replace(OPTIONS, policies=policies), run_id="run-p")

    # orders/billing: e4 e5 (11 deliveries) are claimed, not dead-lettered (policy 3); orders/shipping:
    # idle 8 minutes, stale after 5 (policy 2, the run's 10 would leave them); payments/billing: given back.
    assert report.groups == (
        GroupReport("orders", "billing", scanned=8, stale=6, claimed=5, purged=1, owners=("recovery",), policy=3),
        GroupReport("orders", "shipping", scanned=7, stale=7, claimed=7, owners=("recovery",), policy=2),
        GroupReport("payments", "billing", scanned=2, stale=2, claimed=2, policy=1),
    )
    slot = NACK_ZONE_BASE + T_RUN * NACK_SLOTS_PER_MS
    billing = [("orders", "billing", ORDERS[i], "recovery", T_RUN, 2 if i < 4 else 12) for i in (0, 1, 3, 4, 5)]
    shipping = [("orders", "shipping", ORDERS[i], "recovery", T_RUN, 2) for i in (0, 1, 3, 4, 5, 6, 7)]
    given_back = [("payments", "billing", PAYMENTS[i], None, slot + i, 1) for i in (0, 1)]
    assert_df_equality(
        pending(store),
        spark.createDataFrame(billing + shipping + given_back + FRESH, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # The commits of a run with one policy: one claim commit on the state table (nothing to dead-letter).
    assert latest_version(store.session(), store.state_path) == version + 1
    assert not Path(table_path(store.path, C.DEAD_LETTER_TABLE_DIR)).exists()
    summary = report.to_json()
    assert [p["name"] for p in summary["options"]["policies"]] == [p.name for p in policies]
    assert [g["policy"] for g in summary["groups"]] == [3, 2, 1]


def test_a_dry_run_reports_what_a_run_would_do_and_writes_nothing(store: StreamStore) -> None:
    version = latest_version(store.session(), store.state_path)

    report = recover_stale(store, replace(OPTIONS, dry_run=True))

    assert [(g.stream, g.claimed, g.purged, g.dead_lettered) for g in report.groups] == [
        ("orders", 3, 1, 2),
        ("payments", 2, 0, 0),
    ]
    assert not report.recorded
    assert report.to_json()["dry_run"] is True
    assert report.to_json()["count_mismatches"] == []  # the selected groups' kept counts agree with a recount
    assert latest_version(store.session(), store.state_path) == version
    assert not Path(table_path(store.path, C.DEAD_LETTER_TABLE_DIR)).exists()
    assert not Path(table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR)).exists()


def test_a_run_log_made_before_writer_mode_and_backoff_existed_gains_the_columns_on_the_next_run(
    spark: SparkSession, store: StreamStore
) -> None:
    old_schema = StructType([f for f in RECOVERY_RUNS_SCHEMA.fields if f.name not in ("writer_mode", "backoff")])
    old_row: tuple[object, ...] = ("run-0", at(T0), at(T0), "succeeded", None, 10 * MIN, "consumer", 10, 0, 0, 0, 0, [])
    path = table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR)
    spark.createDataFrame([old_row], old_schema).write.format("delta").save(path)

    recover_stale(store, OPTIONS, run_id="run-1")

    runs = spark.read.format("delta").load(path)
    assert runs.columns == RECOVERY_RUNS_SCHEMA.names
    assert sorted(runs.select("run_id", "writer_mode", "backoff").collect()) == [
        ("run-0", None, None),
        ("run-1", "multi-writer", None),
    ]


def test_with_a_backoff_an_entry_delivered_more_often_waits_longer_before_it_is_claimed_again(
    spark: SparkSession, store: StreamStore
) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    options = replace(OPTIONS, backoff=parse_backoff("1m,90m"))

    first = recover_stale(store, options, run_id="run-1")
    clock.now = T_RUN + 20 * MIN
    second = recover_stale(store, options, run_id="run-2")
    clock.now = T0 + 150 * MIN
    third = recover_stale(store, options, run_id="run-3")

    # At T_RUN an entry delivered once waits min_idle (10 min, above its 1-minute step): e0 e1 e3 p0 p1 are
    # claimed; e4 e5 (11 deliveries, idle 60 min) wait 90 minutes, so they are not dead-lettered yet.
    # Twenty minutes later the claimed entries (2 deliveries) wait their 90 minutes; e6 e7 (1) are claimed.
    # At T0 + 150 min e4 e5 are dead-lettered and the first run's claims (idle 90 min) are claimed again.
    assert [first.groups, second.groups, third.groups] == [
        (
            GroupReport("orders", "billing", scanned=8, stale=4, claimed=3, purged=1, owners=("recovery",)),
            GroupReport("payments", "billing", scanned=2, stale=2, claimed=2, owners=("recovery",)),
        ),
        (
            GroupReport("orders", "billing", scanned=7, stale=2, claimed=2, owners=("recovery",)),
            GroupReport("payments", "billing", scanned=2),
        ),
        (
            GroupReport("orders", "billing", scanned=7, stale=5, claimed=3, dead_lettered=2, owners=("recovery",)),
            GroupReport("payments", "billing", scanned=2, stale=2, claimed=2, owners=("recovery",)),
        ),
    ]
    again = [("orders", "billing", ORDERS[i], "recovery", T0 + 150 * MIN, 3) for i in (0, 1, 3)] + [
        ("payments", "billing", PAYMENTS[i], "recovery", T0 + 150 * MIN, 3) for i in (0, 1)
    ]
    waiting = [("orders", "billing", ORDERS[i], "recovery", T_RUN + 20 * MIN, 2) for i in (6, 7)]
    assert_df_equality(
        pending(store),
        spark.createDataFrame(again + waiting, PENDING_SCHEMA),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert third.to_json()["options"]["backoff"] == "1m,90m"
    assert sorted(recovery_runs(store).select("run_id", "backoff").collect()) == [
        ("run-1", "1m,90m"),
        ("run-2", "1m,90m"),
        ("run-3", "1m,90m"),
    ]


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

"""The SQL views (sql.register) and every query in docs/SQL.md, run on a store with known contents.

The views compute ``idle_ms`` and ``inactive_ms`` from the query's own time, so the store is built with a
clock anchored to the wall clock: R is the wall time when the fixture starts, D1 = R - 2 days and
D2 = D1 + 1 day. Stream ``orders`` has six entries e0..e5 (field ``n`` = i), appended at D1.

    D1        groups billing and shipping created at 0; billing delivers e0..e5 to alice;
              XCLAIM RETRYCOUNT makes e0 count 11 and e1 count 10
    D1 + 1h   recovery run "day-1": dead-letters e0; claims e1..e5 to "recovery" (e1: 11, others: 2)
    D2 + 1h   recovery run "day-2": dead-letters e1; claims e2..e5 to "recovery" (count 3)
    R - 2h    XCLAIM RETRYCOUNT 7 on e5 by "recovery"; shipping delivers e0..e2 to dan
    R - 5m    shipping delivers e3..e5 to dan

Time-dependent results are checked against the wall time measured before and after the query.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_column_equality
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore, sql
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.ids import to_stored
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.metrics import group_metrics
from streamclaim_spark.state.columns import id_text, stored_id_columns
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.fixtures import generated_code

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SQL_MD = Path(__file__).resolve().parents[2] / "docs" / "SQL.md"
MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
_QUERY = re.compile(r"<!-- query: (\w+) -->\s*```sql\n(.*?)```", re.DOTALL)


class Times:
    """The instants the fixture used, all Unix ms."""

    def __init__(self, now: int) -> None:
        self.r = now
        self.d1 = now - 2 * DAY
        self.d2 = self.d1 + DAY


@pytest.fixture(scope="module")
def times() -> Times:
    return Times(wall_clock_ms())


@pytest.fixture(scope="module")
def ids(times: Times) -> list[str]:
    return [f"{times.d1}-{i}" for i in range(6)]


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, times: Times, ids: list[str]) -> StreamStore:
    """Builds the store described in the module docstring (18 commits) and registers its views."""
    clock = ManualClock(times.d1)
    store = StreamStore.open(str(tmp_path_factory.mktemp("sql") / "store"), spark=spark, clock=clock)
    assert str(store.append("orders", spark.range(6).select(F.col("id").alias("n"))).first_id) == ids[0]
    for group in ("billing", "shipping"):
        assert store.execute("XGROUP", "CREATE", "orders", group, "0") == "OK"
    assert store.deliver("orders", "billing", "alice").count == 6
    for entry, count in ((0, "11"), (1, "10")):
        claim = ["XCLAIM", "orders", "billing", "alice", "0", ids[entry], "RETRYCOUNT", count, "JUSTID"]
        assert store.execute(*claim) == [ids[entry]]
    options = RecoveryOptions(min_idle_ms=10 * MIN, max_deliveries=10)
    for run_id, at in (("day-1", times.d1 + HOUR), ("day-2", times.d2 + HOUR)):
        clock.now = at
        assert recover_stale(store, options, run_id=run_id).totals["dead_lettered"] == 1
    clock.now = times.r - 2 * HOUR
    poison = ["XCLAIM", "orders", "billing", "recovery", "0", ids[5], "RETRYCOUNT", "7", "JUSTID"]
    assert store.execute(*poison) == [ids[5]]
    assert store.deliver("orders", "shipping", "dan", 3).count == 3
    clock.now = times.r - 5 * MIN
    assert store.deliver("orders", "shipping", "dan").count == 3
    sql.register(spark, store.path)
    return store


def doc_queries() -> dict[str, str]:
    """The named queries of docs/SQL.md (``<!-- query: name -->`` before a sql block)."""
    return {name: body.strip() for name, body in _QUERY.findall(SQL_MD.read_text())}


def timed(spark: SparkSession, query: str) -> tuple[list[Row], int, int]:
    """The query's rows and the wall-clock window its ``current_timestamp()`` fell in."""
    before = wall_clock_ms()
    rows = spark.sql(query).collect()
    return rows, before, wall_clock_ms()


def within(value: float, low: float, high: float) -> bool:
    return low <= value <= high


def day(ms: int) -> Any:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).date()


def test_register_puts_every_view_in_the_streamclaim_database(spark: SparkSession, store: StreamStore) -> None:
    with generated_code(spark):
        tables = spark.catalog.listTables("streamclaim")

    assert {table.name for table in tables} == set(sql.VIEWS)
    assert {table.tableType for table in tables} == {"VIEW"}


def test_the_entries_view_shows_ids_as_text_and_unsigned_parts(
    spark: SparkSession, store: StreamStore, times: Times, ids: list[str]
) -> None:
    rows = spark.sql("SELECT id, id_ms, id_seq FROM streamclaim.entries ORDER BY id_ms, id_seq").collect()

    assert [row.id for row in rows] == ids
    assert [(int(row.id_ms), int(row.id_seq)) for row in rows] == [(times.d1, i) for i in range(6)]


def test_the_sql_id_rendering_matches_id_text_at_the_extremes(spark: SparkSession) -> None:
    parts = [0, 1, 1_700_000_000_000, 2**63 - 1, 2**63, 2**64 - 1]
    stored = [(to_stored(ms), to_stored(seq)) for ms in parts for seq in (0, 2**64 - 1)]
    frame = spark.createDataFrame(stored, "ms long, seq long").select(
        F.expr(sql.id_sql("ms", "seq")).alias("from_sql"), id_text("ms", "seq").alias("from_column")
    )

    assert_column_equality(frame, "from_sql", "from_column")
    assert frame.where(F.col("from_sql") == f"{2**64 - 1}-0").count() == 1


# Texts around every edge of Redis' canonical ID text: signs, spaces, leading zeros, missing or extra
# parts, other digits, 18 to 21 digits, and the largest part and one past it.
_ID_TEXTS = [
    "0-0", "1-2", "1700000000000-5", "00-0", "0-00", "01-1", "1-01", "+1-2", "1-+2", " 1-2", "1-2 ", "1 -2",
    "1", "1-", "-1", "-", "", "1-2-3", "--1", "1--2", "1.0-2", "1e3-2", "0x1-2", "١-2", "1-٢",
    f"{10**17}-{10**17 - 1}", f"{10**18 - 1}-0", f"{10**18}-0", f"0-{10**19}", f"{2**63}-{2**63 - 1}",
    f"{2**64 - 1}-{2**64 - 1}", f"{2**64}-0", f"0-{2**64}", f"{10**20}-0", f"0{2**64 - 1}-0",
]  # fmt: skip


def _stored_or_nones(text: str | None) -> tuple[int | None, int | None]:
    """What ``stored_id_columns`` must give: the stored parts of canonical text up to 2**64 - 1, else Nones."""
    match = re.fullmatch(r"(0|[1-9][0-9]*)-(0|[1-9][0-9]*)", text or "")
    if match is None or max(int(match[1]), int(match[2])) > 2**64 - 1:
        return None, None
    return to_stored(int(match[1])), to_stored(int(match[2]))


def test_stored_id_columns_parse_exactly_the_canonical_ids_up_to_the_largest(spark: SparkSession) -> None:
    texts = [*_ID_TEXTS, None]
    ms, seq = stored_id_columns(F.col("text"))
    rows = spark.createDataFrame([(text,) for text in texts], "text string").select("text", ms, seq).collect()

    assert {row[0]: (row[1], row[2]) for row in rows} == {text: _stored_or_nones(text) for text in texts}
    assert sum(row[1] is not None for row in rows) == 9


def test_pending_idle_ms_is_measured_at_query_time(spark: SparkSession, store: StreamStore, times: Times) -> None:
    rows, before, after = timed(spark, "SELECT delivery_time_ms, idle_ms FROM streamclaim.pending")

    assert len(rows) == 10
    assert all(within(row.idle_ms + row.delivery_time_ms, before, after) for row in rows)


def test_delivery_counts_per_consumer(spark: SparkSession, store: StreamStore) -> None:
    rows = spark.sql(doc_queries()["delivery_counts_per_consumer"]).collect()

    assert [tuple(row) for row in rows] == [
        ("orders", "billing", "recovery", 4, 3 + 3 + 3 + 7, 7),
        ("orders", "shipping", "dan", 6, 6, 1),
    ]


def test_entries_delivered_more_than_n_times(spark: SparkSession, store: StreamStore, ids: list[str]) -> None:
    rows = spark.sql(doc_queries()["entries_delivered_more_than_n_times"]).collect()

    assert [(r.stream, r.group_name, r.id, r.owner, r.delivery_count, r.payload) for r in rows] == [
        ("orders", "billing", ids[5], "recovery", 7, ["n=5"]),
    ]


def test_stale_age_percentiles_per_group(spark: SparkSession, store: StreamStore, times: Times) -> None:
    rows, before, after = timed(spark, doc_queries()["stale_age_percentiles_per_group"])

    billing, shipping = rows
    # billing: idle since D2 + 1h (e2, e3, e4) and R - 2h (e5); shipping: R - 2h (x3) and R - 5m (x3).
    assert (billing.stream, billing.group_name, billing.pending) == ("orders", "billing", 4)
    older = times.d2 + HOUR
    checks: list[tuple[float, int]] = [
        (billing.p50_idle_ms, older),
        (billing.p90_idle_ms, older),
        (billing.max_idle_ms, older),
        # p99 of [2h-ago, older, older, older] interpolates between the 3rd and 4th values: both "older".
        (billing.p99_idle_ms, older),
        # p50 of three at R - 5m and three at R - 2h lies halfway between them.
        (shipping.p50_idle_ms, (times.r - 5 * MIN + times.r - 2 * HOUR) // 2),
        (shipping.p90_idle_ms, times.r - 2 * HOUR),
        (shipping.max_idle_ms, times.r - 2 * HOUR),
    ]
    assert (shipping.group_name, shipping.pending) == ("shipping", 6)
    for idle, delivered in checks:
        assert within(idle + delivered, before - 1, after + 1), (idle, delivered)


def test_consumers_with_pending_and_no_recent_activity(spark: SparkSession, store: StreamStore, times: Times) -> None:
    rows, before, after = timed(spark, doc_queries()["consumers_with_pending_and_no_recent_activity"])

    # "recovery" last claimed at R - 2h; dan read at R - 5m (recent); alice holds nothing any more.
    (row,) = rows
    assert (row.stream, row.group_name, row.consumer, row.pending) == ("orders", "billing", "recovery", 4)
    assert round(row.last_active_at.timestamp() * 1000) == times.r - 2 * HOUR
    assert within(row.inactive_ms + times.r - 2 * HOUR, before, after)


def test_dead_letters_per_day(spark: SparkSession, store: StreamStore, times: Times) -> None:
    rows = spark.sql(doc_queries()["dead_letters_per_day"]).collect()

    assert [tuple(row) for row in rows] == [
        (day(times.d1 + HOUR), "orders", "billing", 1, 1),
        (day(times.d2 + HOUR), "orders", "billing", 1, 1),
    ]


def test_recovery_runs_per_group(spark: SparkSession, store: StreamStore) -> None:
    rows = spark.sql(doc_queries()["recovery_runs_per_group"]).collect()

    assert [(r.run_id, r.status, r.group_name, r.scanned, r.stale, r.claimed, r.dead_lettered) for r in rows] == [
        ("day-1", "succeeded", "billing", 6, 6, 5, 1),
        ("day-1", "succeeded", "shipping", 0, 0, 0, 0),
        ("day-2", "succeeded", "billing", 5, 5, 4, 1),
        ("day-2", "succeeded", "shipping", 0, 0, 0, 0),
    ]


def test_groups_needing_attention(spark: SparkSession, store: StreamStore, times: Times) -> None:
    rows, before, after = timed(spark, doc_queries()["groups_needing_attention"])

    # billing: e2..e4 idle since D2 + 1h, e5 (7 deliveries) since R - 2h, held by "recovery"; alice holds
    # nothing; e1 dead-lettered at D2 + 1h (within a day), e0 at D1 + 1h (not). shipping: dan holds all six,
    # three idle 2 hours and three 5 minutes (stale at the default 5 minutes). Both groups read every entry.
    billing, shipping = rows
    assert tuple(billing)[:4] + tuple(billing)[5:] == ("orders", "billing", 4, 4, 7, 0, 2, 1)
    assert tuple(shipping)[:4] + tuple(shipping)[5:] == ("orders", "shipping", 6, 6, 1, 0, 1, 0)
    assert within(billing.oldest_idle_ms + times.d2 + HOUR, before, after)
    assert within(shipping.oldest_idle_ms + times.r - 2 * HOUR, before, after)
    # Another threshold: what is idle an hour.
    hourly = sql.metrics_sql(store.path, sql.view_queries(store.path)["groups"], HOUR)
    assert sorted((r.group_name, r.stale, r.stale_after_ms) for r in spark.sql(hourly).collect()) == [
        ("billing", 4, HOUR),
        ("shipping", 3, HOUR),
    ]


# Each group's lag in test_the_lag_of_the_groups_view_and_of_the_metrics_is_what_xinfo_groups_replies, as
# Redis 7 counts it: None
# where a group's position lies before a tombstone and its entries-read is unknown, or past the last entry.
LAGS = {
    ("s1", "all"): 0,
    ("s1", "none"): 5,
    ("s1", "two"): 3,
    ("s1", "future"): None,
    ("s1", "told"): 2,  # ENTRIESREAD 3 at the last entry: Redis trusts it
    ("s2", "before"): None,
    ("s2", "after"): 0,
    ("s2", "set"): None,
    ("s3", "g"): 0,
    ("s4", "g"): 0,  # every entry deleted: nothing left to deliver
}


def test_the_lag_of_the_groups_view_and_of_the_metrics_is_what_xinfo_groups_replies(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = StreamStore.open(str(tmp_path / "lag"), spark=spark, clock=ManualClock(1_000))
    pipe = store.pipeline()
    for key in ("s1", "s2"):
        for i in range(1, 6):
            pipe.execute_command("XADD", key, f"{i}-1", "n", str(i))
    for key, group, start in (("s1", "all", "0"), ("s1", "none", "0"), ("s1", "two", "0"), ("s1", "future", "9-9")):
        pipe.execute_command("XGROUP", "CREATE", key, group, start)
    pipe.execute_command("XGROUP", "CREATE", "s1", "told", "$", "ENTRIESREAD", "3")
    pipe.execute_command("XREADGROUP", "GROUP", "all", "c", "STREAMS", "s1", ">")
    pipe.execute_command("XREADGROUP", "GROUP", "two", "c", "COUNT", "2", "STREAMS", "s1", ">")
    # s2: a tombstone (3-1) after one group's position and before another's; a position set by SETID.
    for group in ("before", "after", "set"):
        pipe.execute_command("XGROUP", "CREATE", "s2", group, "0")
    pipe.execute_command("XREADGROUP", "GROUP", "after", "c", "STREAMS", "s2", ">")
    pipe.execute_command("XDEL", "s2", "3-1")
    pipe.execute_command("XGROUP", "SETID", "s2", "set", "1-1")
    # s3: empty since MKSTREAM; s4: every entry deleted.
    pipe.execute_command("XGROUP", "CREATE", "s3", "g", "$", "MKSTREAM")
    pipe.execute_command("XADD", "s4", "1-1", "n", "1").execute_command("XADD", "s4", "2-1", "n", "2")
    pipe.execute_command("XGROUP", "CREATE", "s4", "g", "0").execute_command("XDEL", "s4", "1-1", "2-1")
    pipe.execute()

    replies = [store.execute("XINFO", "GROUPS", key) for key in ("s1", "s2", "s3", "s4")]
    lags = {
        (key, info["name"]): info["lag"]
        for key, groups in zip(("s1", "s2", "s3", "s4"), replies, strict=True)
        for info in (dict(zip(group[::2], group[1::2], strict=True)) for group in groups)
    }
    rows = spark.sql(sql.view_queries(store.path)["groups"]).collect()
    metrics = group_metrics(spark, store.path, 0)

    assert {(row.stream, row.group_name): row.lag for row in rows} == lags == LAGS
    # The metrics read a store that never dead-lettered (no dead_letters table) and create nothing.
    assert {(m.stream, m.group): (m.lag, m.dead_letters_last_day) for m in metrics} == {
        pair: (lag, 0) for pair, lag in LAGS.items()
    }
    assert not (tmp_path / "lag" / "dead_letters").exists()


CHECKED: dict[str, Callable[..., None]] = {
    "delivery_counts_per_consumer": test_delivery_counts_per_consumer,
    "entries_delivered_more_than_n_times": test_entries_delivered_more_than_n_times,
    "stale_age_percentiles_per_group": test_stale_age_percentiles_per_group,
    "consumers_with_pending_and_no_recent_activity": test_consumers_with_pending_and_no_recent_activity,
    "dead_letters_per_day": test_dead_letters_per_day,
    "recovery_runs_per_group": test_recovery_runs_per_group,
    "groups_needing_attention": test_groups_needing_attention,
}


def test_every_query_in_sql_md_has_a_test_that_checks_its_result() -> None:
    assert set(doc_queries()) == set(CHECKED)

"""Batched claims beyond Redis: claim_stale over patterns and predicates, and claim_batch replies."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from chispa import assert_df_equality
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from streamclaim_spark import ClaimRequest, StaleSelection, StreamStore
from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.fleet.claims import in_place
from streamclaim_spark.testing.commit_gate import CommitGate, commit_gate
from tests.clock import ManualClock
from tests.fixtures import TemplateStores

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
HOUR = 3_600_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0 + HOUR)


def _build_recovering(store: StreamStore) -> None:
    """Streams orders-1, orders-2 and audit of 10 entries each (n = 0..9) at T0, all delivered at T0 to
    consumer 'dead' of group g: three bulk commits."""
    keys = ("orders-1", "orders-2", "audit")
    frame = store.spark.range(0, 30, 1, 1).selectExpr(
        "element_at(array('orders-1', 'orders-2', 'audit'), CAST(id DIV 10 + 1 AS INT)) AS key", "id % 10 AS n"
    )
    store.append_streams(frame, stream_column="key")
    store.create_groups([(key, "g", "0") for key in keys])
    store.deliver_many([(key, "g", "dead") for key in keys])


@pytest.fixture
def recovering_store(templates: TemplateStores, clock: ManualClock) -> StreamStore:
    """A copy of the template: each stream's consumer 'dead' holds all 10 entries, idle an hour."""
    template = templates.template("batch_claim recovering", _build_recovering, clock=ManualClock(T0))
    return templates.copy(template, clock=clock)


def test_claim_stale_claims_only_the_streams_the_pattern_names(
    recovering_store: StreamStore, clock: ManualClock
) -> None:
    result = recovering_store.claim_stale(StaleSelection(min_idle_ms=60_000, streams=("orders-*",)), "rescuer")

    assert result.counts == {("orders-1", "g"): (10, 0), ("orders-2", "g"): (10, 0)}
    assert recovering_store.execute("XPENDING", "orders-1", "g") == [10, f"{T0}-0", f"{T0}-9", [["rescuer", "10"]]]
    assert recovering_store.execute("XPENDING", "audit", "g")[3] == [["dead", "10"]]
    rows = result.claimed.select("stream", "owner", "delivery_count", "delivery_time_ms").distinct().collect()
    assert sorted(tuple(row) for row in rows) == [
        ("orders-1", "rescuer", 2, clock.now),
        ("orders-2", "rescuer", 2, clock.now),
    ]


def test_claim_stale_skips_entries_not_idle_long_enough(recovering_store: StreamStore) -> None:
    result = recovering_store.claim_stale(StaleSelection(min_idle_ms=2 * HOUR), "rescuer")

    assert result.counts == {}
    assert result.version is None
    assert recovering_store.execute("XPENDING", "audit", "g")[3] == [["dead", "10"]]


def test_claim_stale_spreads_entries_over_several_consumers(recovering_store: StreamStore) -> None:
    result = recovering_store.claim_stale(StaleSelection(min_idle_ms=0, streams=("audit",)), ["a", "b", "c"])

    owners = {row["owner"] for row in result.claimed.select("owner").collect()}
    assert result.total_claimed == 10
    assert owners <= {"a", "b", "c"}
    assert len(owners) >= 2
    summary = recovering_store.execute("XPENDING", "audit", "g")
    assert sum(int(count) for _, count in summary[3]) == 10


def test_claim_stale_filters_by_delivery_count_and_purges_deleted_entries(
    recovering_store: StreamStore, spark: SparkSession
) -> None:
    store = recovering_store
    store.execute("XCLAIM", "audit", "g", "dead", "0", f"{T0}-1", f"{T0}-2", "RETRYCOUNT", "7")
    store.execute("XDEL", "audit", f"{T0}-2")

    result = store.claim_stale(StaleSelection(min_idle_ms=0, streams=("audit",), min_deliveries=5), "poison-desk")

    assert result.counts == {("audit", "g"): (1, 1)}
    expected = spark.createDataFrame(
        [("audit", "g", f"{T0}-1", "poison-desk", 8)],
        "stream string, group_name string, id string, owner string, delivery_count long",
    )
    actual = result.claimed.select("stream", "group_name", "id", "owner", "delivery_count")
    assert_df_equality(actual, expected, ignore_nullable=True)
    assert store.execute("XPENDING", "audit", "g")[0] == 9


def test_claim_stale_with_a_backoff_waits_the_step_of_each_entry_delivery_count(
    recovering_store: StreamStore, clock: ManualClock
) -> None:
    store = recovering_store
    selection = {
        key: StaleSelection(0, streams=(key,), backoff=parse_backoff("30m,2h")) for key in ("audit", "orders-1")
    }
    failing = [f"{T0}-1", f"{T0}-2"]
    for key in selection:  # e1 and e2 failed often: delivered 7 times, last an hour ago
        store.execute("XCLAIM", key, "g", "dead", "0", *failing, "IDLE", str(HOUR), "RETRYCOUNT", "7", "JUSTID")
    store.execute("XDEL", "orders-1", f"{T0}-3")  # a purge: orders-1 is claimed by a MERGE, audit in place

    counts = [store.claim_stale(selection[key], "rescuer").counts for key in selection]

    # Delivered once and idle an hour: past the 30-minute step. Delivered 7 times: the 2-hour step.
    assert counts == [{("audit", "g"): (8, 0)}, {("orders-1", "g"): (7, 1)}]
    for key in selection:
        assert store.execute("XPENDING", key, "g", "-", "+", "10", "dead") == [
            [entry, "dead", HOUR, 7] for entry in failing
        ]
    # An hour later only they are stale: the 8 claimed now have 2 deliveries, idle an hour of their 2.
    clock.now += HOUR
    assert store.claim_stale(selection["audit"], "rescuer").counts == {("audit", "g"): (2, 0)}


def test_claim_stale_dry_run_reports_without_committing(recovering_store: StreamStore) -> None:
    store = recovering_store
    result = store.claim_stale(StaleSelection(min_idle_ms=60_000), "rescuer", dry_run=True)

    assert result.total_claimed == 30
    assert result.version is None
    assert result.claimed.count() == 30
    assert store.execute("XPENDING", "orders-2", "g")[3] == [["dead", "10"]]


def test_claim_batch_commits_many_requests_at_once_with_redis_replies(recovering_store: StreamStore) -> None:
    store = recovering_store
    result = store.claim_batch(
        [
            ClaimRequest("orders-1", "g", "x", 60_000, count=3, just_id=True),
            ClaimRequest("orders-2", "g", "y", 60_000, ids=(f"{T0}-4", f"{T0}-4", "99-0")),
        ]
    )

    assert result.replies == [
        [f"{T0}-3", [f"{T0}-0", f"{T0}-1", f"{T0}-2"], []],
        [[f"{T0}-4", ["n", "4"]]],
    ]
    assert result.counts == {("orders-1", "g"): (3, 0), ("orders-2", "g"): (1, 0)}
    assert store.execute("XPENDING", "orders-2", "g", "-", "+", "10", "y") == [[f"{T0}-4", "y", 0, 2]]


def test_claim_batch_refuses_two_requests_on_the_same_group(recovering_store: StreamStore) -> None:
    with pytest.raises(ValueError, match=r"same \(stream, group\)"):
        recovering_store.claim_batch(
            [ClaimRequest("audit", "g", "x", 0, ids=("1-0",)), ClaimRequest("audit", "g", "y", 0, ids=("2-0",))]
        )


def _operations_since(spark: SparkSession, store: StreamStore, version: int) -> list[str]:
    history = DeltaTable.forPath(spark, store.runner.state_path).history()
    return [row["operation"] for row in history.where(f"version > {version}").orderBy("version").collect()]


def test_claim_stale_rewrites_the_stale_rows_in_one_commit_of_files_that_creates_a_new_owner_too(
    recovering_store: StreamStore, spark: SparkSession, clock: ManualClock
) -> None:
    store = recovering_store
    before = store.runner.snapshot().version
    assert before is not None
    first = store.claim_stale(StaleSelection(min_idle_ms=60_000, streams=("orders-*",)), "rescuer")
    clock.now += HOUR
    second = store.claim_stale(StaleSelection(min_idle_ms=60_000, streams=("orders-1",)), "rescuer")

    # Each claim is one commit of files (the PEL files rewritten, the heads and the new owner beside
    # them): no source, no join, no commit of its own for the new owner (on Spark Connect: an UPDATE).
    assert _operations_since(spark, store, before) == ["WRITE", "WRITE"]
    assert (first.total_claimed, second.total_claimed, second.attempts) == (20, 10, 1)
    assert store.execute("XPENDING", "orders-1", "g", "-", "+", "1") == [[f"{T0}-0", "rescuer", 0, 3]]
    assert store.execute("XINFO", "CONSUMERS", "orders-2", "g") == [
        ["name", "dead", "pending", 0, "idle", 2 * HOUR, "inactive", 2 * HOUR],
        ["name", "rescuer", "pending", 10, "idle", HOUR, "inactive", HOUR],
    ]
    # The group head moved with the claim, so a command that read before it re-runs (DESIGN.md).
    assert store.execute("XINFO", "GROUPS", "orders-1")[0][:6] == ["name", "g", "consumers", 2, "pending", 10]


def test_claim_stale_counts_again_when_the_group_changes_between_its_count_and_its_update(
    recovering_store: StreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = recovering_store
    store.execute("XGROUP", "CREATECONSUMER", "audit", "g", "rescuer")
    decide = in_place.decide_in_place
    intruded: list[object] = []

    def decide_then_intrude(*args: object, **kwargs: object) -> object:
        decision = decide(*args, **kwargs)  # type: ignore[arg-type]
        if not intruded:
            # Another client claims one entry after the count and before the rewrite: a real commit.
            intruded.append(store.execute("XCLAIM", "audit", "g", "intruder", "0", f"{T0}-3", "JUSTID"))
        return decision

    monkeypatch.setattr(in_place, "decide_in_place", decide_then_intrude)
    result = store.claim_stale(StaleSelection(min_idle_ms=60_000, streams=("audit",)), "rescuer")

    assert intruded == [[f"{T0}-3"]]
    assert (result.attempts, result.counts) == (2, {("audit", "g"): (9, 0)})
    assert sorted(store.execute("XPENDING", "audit", "g")[3]) == [["intruder", "1"], ["rescuer", "9"]]


def test_two_threads_claiming_the_same_stale_group_claim_each_entry_exactly_once(
    recovering_store: StreamStore,
) -> None:
    store = recovering_store
    for name in ("left", "right"):
        store.execute("XGROUP", "CREATECONSUMER", "audit", "g", name)
    selection = StaleSelection(min_idle_ms=60_000, streams=("audit",))
    # Each claim waits at its commit until the other has decided too: both claim on one snapshot.
    gate = CommitGate(2, holds=lambda commit: commit.path == store.state_path)
    with commit_gate(gate), ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda name: store.claim_stale(selection, name), ("left", "right")))

    # The clock does not move: once one claim commits, no entry is stale for the other, which re-ran.
    assert sorted((result.total_claimed, result.attempts) for result in results) == [(0, 2), (10, 1)]
    winner = "left" if results[0].total_claimed else "right"
    assert store.execute("XPENDING", "audit", "g")[3] == [[winner, "10"]]
    counts = {row[3] for row in store.execute("XPENDING", "audit", "g", "-", "+", "10")}
    assert counts == {2}

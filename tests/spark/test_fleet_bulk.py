"""Bulk APIs for fleets: many streams appended to, and many groups created, each in one commit."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import ReplyError, StaleSelection, StreamStore
from streamclaim_spark.core import plan as plan_rules
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Need
from streamclaim_spark.engine.context import Context
from streamclaim_spark.errors import BUSYGROUP, XGROUP_KEY_REQUIRED
from streamclaim_spark.fleet.bulk import NewGroup, driver_delivery
from streamclaim_spark.state.delta_io import commit_info
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock
from tests.fixtures import TemplateStores
from tests.spark.pel import current_version

pytestmark = pytest.mark.spark

deliver = importlib.import_module("streamclaim_spark.fleet.bulk.deliver")  # the package exports a function of that name

T0 = 1_700_000_000_000


@pytest.fixture
def fleet(templates: TemplateStores) -> StreamStore:
    """A copy of: streams t0..t29 of 3 entries each (n = 0, 1, 2), appended in one commit at T0."""
    return templates.copy(templates.template("fleet of 30", _build_fleet, clock=lambda: T0), clock=lambda: T0)


def _build_fleet(store: StreamStore) -> None:
    frame = store.spark.range(0, 90, 1, 3).selectExpr(
        "concat('t', CAST(id % 30 AS STRING)) AS tenant", "id DIV 30 AS n"
    )
    store.append_streams(frame, stream_column="tenant")


def test_append_streams_numbers_each_streams_rows_in_frame_order_in_one_commit(
    spark: SparkSession, make_store: Callable[..., StreamStore]
) -> None:
    store = make_store(clock=lambda: T0)
    store.execute("XADD", "t0", f"{T0 + 5}-0", "n", "first")  # t0's next IDs follow its last one
    before = current_version(store)
    # Three input partitions, rows interleaved across three streams.
    frame = spark.range(0, 90, 1, 3).selectExpr("concat('t', CAST(id % 3 AS STRING)) AS tenant", "id AS n")

    result = store.append_streams(frame, stream_column="tenant")

    assert current_version(store) == before + 1
    assert result.count == 90
    assert result.version == before + 1
    assert result.streams["t1"][0] == 30
    assert (str(result.streams["t0"][1]), str(result.streams["t0"][2])) == (f"{T0 + 5}-1", f"{T0 + 5}-30")
    assert store.execute("XRANGE", "t1", "-", "+") == [[f"{T0}-{i}", ["n", str(3 * i + 1)]] for i in range(30)]
    assert store.execute("XRANGE", "t0", "-", "+", "COUNT", "3") == [
        [f"{T0 + 5}-0", ["n", "first"]],
        [f"{T0 + 5}-1", ["n", "0"]],
        [f"{T0 + 5}-2", ["n", "3"]],
    ]
    assert [store.execute("XLEN", key) for key in ("t0", "t1", "t2")] == [31, 30, 30]


def test_append_streams_refuses_a_frame_without_the_column_or_with_nameless_rows_and_commits_nothing(
    spark: SparkSession, fleet: StreamStore
) -> None:
    before = current_version(fleet)
    frame = spark.range(4).selectExpr("IF(id = 2, NULL, 't0') AS tenant", "id AS n")

    with pytest.raises(ValueError, match=r"stream_column='stream' is not a column of frame"):
        fleet.append_streams(frame, stream_column="stream")
    with pytest.raises(ValueError, match=r"stream_column='tenant': 1 row\(s\) have no stream"):
        fleet.append_streams(frame, stream_column="tenant")

    assert current_version(fleet) == before
    assert fleet.execute("XLEN", "t0") == 3


@pytest.mark.parametrize("heads_in_bulk", [False, True], ids=["as-a-command", "as-a-bulk-plan"])
def test_create_groups_creates_every_group_in_one_commit_as_xgroup_create_would(
    fleet: StreamStore, monkeypatch: pytest.MonkeyPatch, heads_in_bulk: bool
) -> None:
    if heads_in_bulk:  # 62 groups of 48 streams: 110 partitions, heads in bulk below this threshold
        monkeypatch.setattr(plan_rules, "HEADS_IN_BULK_FROM", 100)
    before = current_version(fleet)
    groups: list[NewGroup | tuple[str, ...]] = [NewGroup(f"t{n}", "billing", "$") for n in range(28)]
    groups += [(f"t{n}", "audit", "0") for n in range(0, 28, 2)]
    groups += [NewGroup(f"new{n}", "billing", "$", mkstream=True) for n in range(20)]

    created = fleet.create_groups(groups)

    assert created == 62
    assert current_version(fleet) == before + 1
    # A commit of files either way: the head files rewritten on the driver, heads in bulk whatever
    # their files hold, a command's few as long as the driver may rewrite what they reach.
    info = commit_info(fleet.session(), fleet.state_path, before + 1)
    assert info["operation"] == "WRITE"
    # t28 holds the same entries as t4; its groups are made one XGROUP CREATE at a time.
    fleet.execute("XGROUP", "CREATE", "t28", "billing", "$")
    fleet.execute("XGROUP", "CREATE", "t28", "audit", "0")
    assert fleet.execute("XINFO", "GROUPS", "t4") == fleet.execute("XINFO", "GROUPS", "t28")
    assert [g[1] for g in fleet.execute("XINFO", "GROUPS", "t4")] == ["audit", "billing"]
    assert fleet.execute("XINFO", "GROUPS", "t5")[0][7] == f"{T0}-2"  # billing at $: the last entry
    assert fleet.execute("XLEN", "new7") == 0
    assert fleet.execute("XINFO", "GROUPS", "new7")[0][1] == "billing"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (NewGroup("t3", "billing"), BUSYGROUP + " (groups[2]: 't3', 'billing')"),
        (NewGroup("missing", "billing"), XGROUP_KEY_REQUIRED + " (groups[2]: 'missing', 'billing')"),
        (
            NewGroup("t3", "other", "12-x"),
            "ERR Invalid stream ID specified as stream command argument (groups[2]: 't3', 'other')",
        ),
    ],
    ids=["existing-group", "missing-stream", "invalid-id"],
)
def test_create_groups_with_one_bad_group_names_it_and_creates_none(
    fleet: StreamStore, bad: NewGroup, error: str
) -> None:
    fleet.execute("XGROUP", "CREATE", "t3", "billing", "0")
    before = current_version(fleet)

    with pytest.raises(ReplyError) as raised:
        fleet.create_groups([NewGroup("t1", "new"), NewGroup("t2", "new"), bad])

    assert str(raised.value) == error
    assert current_version(fleet) == before
    assert fleet.execute("XINFO", "GROUPS", "t1") == []


def test_deliver_many_delivers_to_every_group_in_one_commit_as_xreadgroup_would(fleet: StreamStore) -> None:
    fleet.create_groups([(f"t{n}", "billing", "0") for n in range(10)] + [("t28", "billing", "0")])
    before = current_version(fleet)

    results = fleet.deliver_many([(f"t{n}", "billing", f"w{n}") for n in range(10)], count=2)

    assert current_version(fleet) == before + 1
    assert [(r.count, str(r.first_id), str(r.last_id), r.version) for r in results] == [
        (2, f"{T0}-0", f"{T0}-1", before + 1)
    ] * 10
    # t28 holds the same entries as t3: deliver there with the command, then compare what Redis shows.
    fleet.execute("XREADGROUP", "GROUP", "billing", "w3", "COUNT", "2", "STREAMS", "t28", ">")
    for command in (("XINFO", "GROUPS"), ("XINFO", "CONSUMERS"), ("XPENDING",)):
        args = ("billing",) if command != ("XINFO", "GROUPS") else ()
        assert fleet.execute(*command, "t3", *args) == fleet.execute(*command, "t28", *args)
    assert fleet.execute("XPENDING", "t3", "billing", "-", "+", "10") == [
        [f"{T0}-0", "w3", 0, 1],
        [f"{T0}-1", "w3", 0, 1],
    ]

    rest = fleet.deliver_many([("t3", "billing", "w3"), ("t4", "billing", "other")])

    assert [r.count for r in rest] == [1, 1]
    assert fleet.execute("XPENDING", "t4", "billing") == [3, f"{T0}-0", f"{T0}-2", [["other", "1"], ["w4", "2"]]]


def test_a_delivery_decided_on_the_driver_takes_the_entries_sparks_join_takes(fleet: StreamStore) -> None:
    fleet.execute("XADD", "t1", f"{T0 + 7}-0", "n", "3")  # IDs over two milliseconds
    fleet.execute("XADD", "t1", f"{T0 + 7}-5", "n", "4")
    fleet.create_groups([(f"t{n}", "billing", "0") for n in range(3)])
    fleet.execute("XGROUP", "SETID", "t2", "billing", f"{T0}-0")  # a cursor past the first entry
    targets = [("t0", "billing", "a"), ("t1", "billing", "b"), ("t2", "billing", "c")]
    until = {"t1": StreamId(T0 + 7, 0)}  # t1's last entry stays new
    caps = [(None, None), (2, None), (None, 4), (2, 5)]

    def decide(ctx: Context) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
        ctx.snapshot.prefetch(*(Need(key, (group,), consumer) for key, group, consumer in targets))
        records, lowest = deliver._cursors(ctx, targets, until)
        assert lowest is not None
        both = []
        for count, total in caps:
            local = driver_delivery.delivered_on_driver(ctx.snapshot, records, lowest, count, total)
            assert local is not None
            columns = [driver_delivery.TARGET, "stream", "id_ms", "id_seq"]
            spark_rows = deliver._delivered(ctx, records, lowest, count, total).select(*columns).collect()
            both.append(
                (
                    list(zip(*(local.column(c).to_pylist() for c in columns), strict=True)),
                    sorted(map(tuple, spark_rows)),
                )
            )
        return both

    decided = fleet.transact("TEST", decide)

    for (on_driver, by_spark), (count, total) in zip(decided, caps, strict=True):
        assert on_driver == by_spark, (count, total)
    ids = [[(target, StreamId.from_stored(ms, seq)) for target, _, ms, seq in rows] for rows, _ in decided]
    every = [(0, StreamId(T0, n)) for n in range(3)] + [(1, StreamId(T0, n)) for n in range(3)]
    every += [(1, StreamId(T0 + 7, 0)), (2, StreamId(T0, 1)), (2, StreamId(T0, 2))]
    assert ids[0] == every
    assert ids[1] == [every[n] for n in (0, 1, 3, 4, 7, 8)]  # two per target
    assert ids[2] == [every[n] for n in (0, 1, 3, 4)]  # the four oldest IDs, whichever target
    assert ids[3] == [every[n] for n in (0, 1, 3, 4, 7)]
    # Delivered: the PEL rows made on the driver and written there with the heads, in one commit.
    results = fleet.deliver_many(targets, count=2)
    assert [(r.count, str(r.first_id), str(r.last_id)) for r in results] == [
        (2, f"{T0}-0", f"{T0}-1"),
        (2, f"{T0}-0", f"{T0}-1"),
        (2, f"{T0}-1", f"{T0}-2"),
    ]
    assert fleet.execute("XPENDING", "t2", "billing", "-", "+", "10") == [
        [f"{T0}-1", "c", 0, 1],
        [f"{T0}-2", "c", 0, 1],
    ]
    assert fleet.execute("XPENDING", "t1", "billing") == [2, f"{T0}-0", f"{T0}-1", [["b", "2"]]]


def test_deliver_many_to_a_missing_group_raises_nogroup_and_delivers_nothing(fleet: StreamStore) -> None:
    fleet.create_groups([("t1", "billing", "0")])
    before = current_version(fleet)

    with pytest.raises(ReplyError) as raised:
        fleet.deliver_many([("t1", "billing", "w"), ("t2", "billing", "w")])

    assert str(raised.value) == ("NOGROUP No such key 't2' or consumer group 'billing' in XREADGROUP with GROUP option")
    assert current_version(fleet) == before


# Spark jobs of each bulk path over a fleet of 100 groups, as measured when set (CHANGELOG.md, "Fleet
# building"); create_groups and deliver_many ran 8-10 and 19-21 at 10,000 groups too: no path may run a
# job per stream or group. deliver_many went from 21 to 23 when heads were put apart (issue 44): its
# commit now writes into twice the buckets (the PEL rows' and the heads' and consumers'), and Delta's
# auto compaction check after it reads more of them.
# deliver_many: 23 -> 25 when deliveries became appends (issue 45): the probe for PEL rows after the
# cursors, and the head rows and the PEL rows written apart.
# deliver_many: 25 -> 18 when a commit of files stopped asking Delta for an auto compaction check that
# could find nothing (state/small_files.py). Delta checks each bucket once per process before it has
# compacted it: the commit of files records the buckets as checked, or the check (4 jobs) would move to
# the claim's MERGE, the next commit into them (claim_stale 21 -> 25, measured before that was added).
# claim_stale: 21 -> 19 when its count stopped joining the stale rows with entry IDs in streams whose
# head says no entry was deleted (the kept marker); create_groups 10 -> 8 with a checkpoint every 100
# commits instead of 10 (no checkpoint, and no snapshot rebuilt from one, in this test's commits).
FLEET_JOB_BUDGETS = {"create_groups": 8, "deliver_many": 18, "claim_stale": 19}


def test_fleet_bulk_paths_run_a_fixed_number_of_spark_jobs_whatever_the_number_of_groups(
    spark: SparkSession, templates: TemplateStores
) -> None:
    # 100 streams: past schema.NAMED_PARTITIONS_MAX (64), so prefetches read heads and consumers by semi-join.
    clock = ManualClock(T0)
    store = templates.copy(templates.template("fleet of 100", _build_fleet_of_100, clock=clock), clock=clock)
    names = [f"f{n:03d}" for n in range(100)]
    jobs: dict[str, int] = {}

    with count_jobs(spark.sparkContext) as counted:
        created = store.create_groups([(name, "workers", "0") for name in names])
    jobs["create_groups"] = counted.jobs
    with count_jobs(spark.sparkContext) as counted:
        delivered = store.deliver_many([(name, "workers", "dead") for name in names], count=2)
    jobs["deliver_many"] = counted.jobs
    clock.now += 60_000
    with count_jobs(spark.sparkContext) as counted:
        claimed = store.claim_stale(StaleSelection(min_idle_ms=1_000, groups=("workers",)), "rescuer")
    jobs["claim_stale"] = counted.jobs

    assert (created, sum(d.count for d in delivered), claimed.total_claimed) == (100, 200, 200)
    assert store.execute("XPENDING", "f099", "workers") == [2, f"{T0}-0", f"{T0}-1", [["rescuer", "2"]]]
    assert {path: jobs[path] for path in jobs if jobs[path] > FLEET_JOB_BUDGETS[path]} == {}, jobs


def _build_fleet_of_100(store: StreamStore) -> None:
    frame = store.spark.range(0, 300, 1, 2).selectExpr("format_string('f%03d', id % 100) AS stream", "id DIV 100 AS n")
    store.append_streams(frame, stream_column="stream")

"""Spark jobs per command: a deterministic cost budget (docs/BENCHMARKS.md, "Spark jobs per command").

The workload is ``bench.jobs``: each command runs right after another client's commit (so it pays for
reading a new table version) and never on a checkpoint version. The budgets are the counts measured
when they were set: a change that adds a job fails here and must say why in the table it updates.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from bench.jobs import BATCH_OF_100, COMMANDS, build, jobs_of, jobs_of_batch
from streamclaim_spark import StreamStore
from streamclaim_spark.state import file_stats
from streamclaim_spark.state.jvm_classes import java_class, static_method
from streamclaim_spark.testing.py4j_calls import count_py4j_calls

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000

# Heads apart (issue 44) moved four budgets up by one or two jobs (small files of inserted rows, Delta's
# auto compaction check); reads over the kept files (state/logged_table.py) took most down by one to
# four; a command's commit as files (engine/written_rows.py) took every command's MERGE away: two to
# six jobs fewer each. XTRIM ACKED, whose deletion is still a MERGE of a frame, went up by four (its one
# walk query's jobs, over the same number of files). Heads read from their own files by every command's
# prefetch took the head query's job from seven; IDs and ranges read on the driver from the kept files
# (state/prefetch_rows.py) took the query's job from nine more. The rows a commit makes on the driver,
# written there by pyarrow (state/driver_writes.py), took the write's job from every command that commits
# as files: XADD, XACK, XREADGROUP, XACKDEL, XDELEX and XGROUP SETID run none; XPENDING's summary of a
# small PEL, and XINFO's counts of its consumers and groups, are counted on the driver
# (state/pel_summary.py): none either. XCLAIM's and XAUTOCLAIM's lookups by ID and PEL range are read
# on the driver too (a consumer already known had made their prefetch Spark's), and so is the group's PEL
# that XREADGROUP CLAIM and XNACK read (state/pel_by_time.py): none. XADD and
# XREADGROUP keep one job of room (docs/BENCHMARKS.md, "Spark jobs per command").
BUDGETS = {
    "XADD": 1,
    "XRANGE of 5": 0,
    "XPENDING summary": 0,
    "XINFO CONSUMERS": 0,
    "XINFO GROUPS": 0,
    "XCLAIM of 1 ID": 0,
    "XACK of 1 ID": 0,
    "XAUTOCLAIM COUNT 100": 0,
    "XREADGROUP of 5": 1,
    "XACKDEL of 1 ID": 0,
    "XACKDEL DELREF of 1 ID": 0,
    "XDELEX of 1 ID": 0,
    "XREADGROUP CLAIM of 5": 0,
    "XNACK of 1 ID": 0,
    "XGROUP SETID": 0,
    "XTRIM ACKED": 23,
    "XADD DELREF MAXLEN (20 trimmed)": 18,
    "XADD MAXLEN ~ (no whole chunk over)": 0,
}


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    return build(spark, str(tmp_path_factory.mktemp("budgets") / "store"))


def test_every_measured_command_has_a_budget() -> None:
    assert {name for name, _ in COMMANDS} == set(BUDGETS)


@pytest.fixture
def narrowing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the ordered reads decided about narrowing (file_stats): "unnarrowed" or "narrowed" per
    decision, and "statistics read" per read of the log's file statistics (a Spark job of its own)."""
    seen: list[str] = []
    decide, read_ranges = file_stats.narrowed_scan, file_stats.file_ranges

    def narrowed_scan(*args: Any) -> Any:
        bounded = decide(*args)
        seen.append("unnarrowed" if bounded is None else "narrowed")
        return bounded

    def file_ranges(*args: Any) -> Any:
        seen.append("statistics read")
        return read_ranges(*args)

    monkeypatch.setattr(file_stats, "narrowed_scan", narrowed_scan)
    monkeypatch.setattr(file_stats, "file_ranges", file_ranges)
    return seen


@pytest.mark.parametrize(("name", "argv"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_a_command_runs_within_its_spark_job_budget(
    spark: SparkSession, store: StreamStore, name: str, argv: tuple[str, ...], narrowing: list[str]
) -> None:
    jobs, reply = jobs_of(spark, store, *argv)

    assert reply, f"{name} did nothing: the budget would measure a no-op"  # every reply here is non-empty
    if name.startswith("XAUTOCLAIM"):
        assert len(reply[1]) == 100  # type: ignore[index]
    assert jobs <= BUDGETS[name], f"{name} ran {jobs} Spark jobs; its budget is {BUDGETS[name]}"
    # The budgets are those of the default path: a store far below file_stats.NARROW_FROM_BYTES (32 MB)
    # reads whole, without reading the log's statistics (tests/spark/test_bulk_and_layout.py lowers the
    # threshold to run the narrowed path).
    assert set(narrowing) <= {"unnarrowed"}, narrowing
    if name in ("XRANGE of 5", "XAUTOCLAIM COUNT 100"):  # ordered reads with a limit, of a few small files:
        assert narrowing == [], narrowing  # read on the driver (state/prefetch_rows.py), nothing to narrow


# A pipeline's batch reads its streams and groups on the driver from the kept files (engine/batch/reads.py,
# ``_probe``): 0 jobs measured (2 when its loads were Spark queries), one of room for a compaction.
BATCH_BUDGET = 1


def test_a_batch_of_a_hundred_commands_runs_at_most_one_spark_job_and_commits_once(
    spark: SparkSession, store: StreamStore
) -> None:
    jobs, commits, replies = jobs_of_batch(spark, store, BATCH_OF_100)

    assert [type(reply).__name__ for reply in replies[:5]] == ["str", "list", "int", "list", "list"]
    assert replies[2] == 1 and len(replies[3]) == 1, "XACK and XCLAIM did nothing: the budget would measure no-ops"
    assert commits == 1
    assert jobs <= BATCH_BUDGET, f"the batch ran {jobs} Spark jobs"


# py4j round trips of a command's steady state, on a version this process wrote last (no new table
# version to read: the live path's case): 157, 160, 168, 175 and 178 when set, with ~5% of room; each costs
# ~0.2 ms.
# A commit of files recording its reads by their buckets alone (state/delta_txn.py, ``files_in``) took
# ~240 calls from every write command; JVM classes and static methods looked up once
# (state/jvm_classes.py) and the table's properties read as one JSON string ~250 more; a read's bucket
# filters kept per table and buckets (state/pruning_filters.py, ``bucket_filters``) ~20-30 more; a
# prefetch's Column conditions built only when Spark runs its query (state/prefetch_conditions.py) ~240
# from XREADGROUP and XACK, ~480 from XCLAIM and ~490 from XAUTOCLAIM; kept files read on the driver by
# what their log entries say (state/driver_files.py) and a table's last listing reused while the log holds
# the same snapshot (state/logged_table.py, ``_kept``) 5 from XADD, 40-60 from the others; the newest
# version told by a probe of the next commit's file (state/log_tip.py) costs 6 more than a listing's 3,
# and stays flat as the log grows.
PY4J_BUDGETS = {"XADD": 165, "XREADGROUP COUNT 10": 168, "XACK": 176, "XCLAIM": 184, "XAUTOCLAIM COUNT 10": 187}


def test_a_write_command_of_the_live_path_keeps_within_its_py4j_budget(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    clock = [T0]
    store = StreamStore.open(str(tmp_path_factory.mktemp("py4j") / "store"), spark=spark, clock=lambda: clock[0])
    store.append("s", spark.range(10_000).selectExpr("CAST(id AS STRING) AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "dead")
    dead_ids = [entry[0] for entry in store.execute("XPENDING", "s", "g", "-", "+", "5")]
    calls: dict[str, list[int]] = {name: [] for name in PY4J_BUDGETS}
    for round_number in range(5):
        with count_py4j_calls() as counted:
            store.execute("XADD", "s", "*", "n", str(round_number))
        calls["XADD"].append(counted.calls)
        with count_py4j_calls() as counted:
            read = store.execute("XREADGROUP", "GROUP", "g", "live", "COUNT", "10", "STREAMS", "s", ">")
        calls["XREADGROUP COUNT 10"].append(counted.calls)
        assert read, "XREADGROUP read nothing: the budget would measure a no-op"
        with count_py4j_calls() as counted:
            assert store.execute("XACK", "s", "g", *[entry[0] for entry in read[0][1]]) == 1
        calls["XACK"].append(counted.calls)
        with count_py4j_calls() as counted:
            assert len(store.execute("XCLAIM", "s", "g", "claimer", "0", dead_ids[round_number])) == 1
        calls["XCLAIM"].append(counted.calls)
        with count_py4j_calls() as counted:
            assert len(store.execute("XAUTOCLAIM", "s", "g", "auto", "0", "0", "COUNT", "10")[1]) == 10
        calls["XAUTOCLAIM COUNT 10"].append(counted.calls)
    # The cheapest round of each: a round that writes a checkpoint or compacts small files pays more.
    cheapest = {name: min(counts) for name, counts in calls.items()}
    assert all(cheapest[name] <= budget for name, budget in PY4J_BUDGETS.items()), str(cheapest)


def test_a_jvm_class_looked_up_by_name_costs_no_round_trip_and_its_static_method_one_a_call(
    spark: SparkSession,
) -> None:
    jvm = spark.sparkContext._jvm
    static_method(jvm, "java.lang.Integer", "parseInt")  # kept from here on

    with count_py4j_calls() as looked_up:
        array_list = java_class(jvm, "java.util.ArrayList")
    with count_py4j_calls() as called:
        parsed = [static_method(jvm, "java.lang.Integer", "parseInt")(text) for text in ("7", "42")]
        empty = array_list()

    assert (looked_up.calls, called.calls) == (0, 3)
    assert parsed == [7, 42] and empty.size() == 0
    assert static_method(jvm, "java.lang.Integer", "parseInt") is static_method(jvm, "java.lang.Integer", "parseInt")

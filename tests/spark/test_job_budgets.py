"""Spark jobs per command: a deterministic cost budget (docs/BENCHMARKS.md, "Spark jobs per command").

Every measured command runs right after another commit, so it pays for reading a new table version
(Delta's snapshot state), as a command on a busy store does; no measured commit lands on a checkpoint
version. The budgets are the counts measured when they were set: a change that adds a job fails here
and has to say why in the table it updates.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.spark_jobs import count_jobs
from tests.spark.pel import current_version

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
CLOCK = T0 + 3_600_000  # an hour later: every delivered entry is stale
# Delta writes a checkpoint after every 10th commit (a job of its own): no measured commit lands there.
CHECKPOINT_INTERVAL = 10


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    """Stream s of 500 entries T0-0..T0-499, all delivered to consumer dead of group g; stream other."""
    now = [T0]
    store = StreamStore.open(str(tmp_path_factory.mktemp("budgets") / "store"), spark=spark, clock=lambda: now[0])
    store.append("s", spark.range(500).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "dead")
    now[0] = CLOCK
    return store


def jobs_of(spark: SparkSession, store: StreamStore, *argv: str) -> tuple[int, object]:
    """The Spark jobs ``argv`` runs on a table version it has not read yet, and its reply."""
    while (current_version(store) + 2) % CHECKPOINT_INTERVAL in (0, 1):
        store.execute("XADD", "other", "*", "n", "1")
    store.execute("XADD", "other", "*", "n", "1")  # a new version, as another client's write makes
    with count_jobs(spark.sparkContext) as counted:
        reply = store.execute(*argv)
    return counted.jobs, reply


def entry(n: int) -> str:
    return f"{T0}-{n}"


@pytest.mark.parametrize(
    ("argv", "budget"),
    [
        (("XADD", "s", "*", "f", "v"), 6),
        (("XRANGE", "s", "-", "+", "COUNT", "5"), 3),
        (("XPENDING", "s", "g"), 3),
        (("XCLAIM", "s", "g", "alive", "60000", entry(7)), 7),
        (("XACK", "s", "g", entry(8)), 7),
        (("XAUTOCLAIM", "s", "g", "alive", "60000", entry(100), "COUNT", "100"), 9),
        (("XREADGROUP", "GROUP", "g2", "c", "COUNT", "5", "STREAMS", "s", ">"), 9),
    ],
    ids=["xadd", "xrange-5", "xpending-summary", "xclaim-1", "xack-1", "xautoclaim-100", "xreadgroup-5"],
)
def test_a_command_runs_within_its_spark_job_budget(
    spark: SparkSession, store: StreamStore, argv: Sequence[str], budget: int
) -> None:
    if argv[0] == "XREADGROUP":
        store.execute("XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "0")

    jobs, reply = jobs_of(spark, store, *argv)

    assert reply, f"{argv[0]} did nothing: the budget would measure a no-op"  # every reply here is non-empty
    if argv[0] == "XAUTOCLAIM":
        assert len(reply[1]) == 100  # type: ignore[index]
    assert jobs <= budget, f"{' '.join(argv)} ran {jobs} Spark jobs; its budget is {budget}"

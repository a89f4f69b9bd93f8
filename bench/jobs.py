"""Spark jobs per command: docs/BENCHMARKS.md's counts, and the workload the budget test measures.

Every command is measured right after another client's commit, so it pays for reading a new table
version (Delta's "Compute snapshot" job), and never on a version where Delta writes a checkpoint.
Run: ``.venv/bin/python -m bench.jobs``. Latencies are ``bench.side_by_side``'s business.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from streamclaim_spark.state.tables import STATE_TABLE_PROPERTIES
from streamclaim_spark.testing.spark_jobs import count_jobs

T0 = 1_700_000_000_000
CLOCK = T0 + 3_600_000  # an hour after the deliveries: every pending entry is stale
# Delta writes a checkpoint after every CHECKPOINT_INTERVAL-th commit (a job of its own): no measured
# commit lands there.
CHECKPOINT_INTERVAL = int(STATE_TABLE_PROPERTIES["delta.checkpointInterval"])


def entry(n: int) -> str:
    return f"{T0}-{n}"


# (name, argv): each changes something (or reads something non-empty) on the store ``build`` makes.
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("XADD", ("XADD", "s", "*", "f", "v")),
    ("XRANGE of 5", ("XRANGE", "s", "-", "+", "COUNT", "5")),
    ("XPENDING summary", ("XPENDING", "s", "g")),
    ("XINFO CONSUMERS", ("XINFO", "CONSUMERS", "s", "g")),
    ("XINFO GROUPS", ("XINFO", "GROUPS", "s")),
    ("XCLAIM of 1 ID", ("XCLAIM", "s", "g", "alive", "60000", entry(7))),
    ("XACK of 1 ID", ("XACK", "s", "g", entry(8))),
    ("XAUTOCLAIM COUNT 100", ("XAUTOCLAIM", "s", "g", "alive", "60000", entry(100), "COUNT", "100")),
    ("XREADGROUP of 5", ("XREADGROUP", "GROUP", "g2", "c", "COUNT", "5", "STREAMS", "s", ">")),
    ("XACKDEL of 1 ID", ("XACKDEL", "s", "g", "IDS", "1", entry(9))),
    ("XACKDEL DELREF of 1 ID", ("XACKDEL", "s", "g", "DELREF", "IDS", "1", entry(10))),
    ("XDELEX of 1 ID", ("XDELEX", "s", "IDS", "1", entry(11))),
    (
        "XREADGROUP CLAIM of 5",
        ("XREADGROUP", "GROUP", "g", "alive", "COUNT", "5", "CLAIM", "60000", "STREAMS", "s", ">"),
    ),
    ("XNACK of 1 ID", ("XNACK", "s", "g", "FAIL", "IDS", "1", entry(12))),
    ("XGROUP SETID", ("XGROUP", "SETID", "s", "g2", "$")),
    # Now only the entry XACK acknowledged is referenced by no group: the one this trim deletes.
    ("XTRIM ACKED", ("XTRIM", "s", "MAXLEN", "0", "ACKED")),
    ("XADD DELREF MAXLEN (20 trimmed)", ("XADD", "s", "DELREF", "MAXLEN", "480", "*", "f", "v")),
    # 81 entries over: less than a whole chunk of 100, so nothing to trim (as on 99 of 100 such XADDs).
    ("XADD MAXLEN ~ (no whole chunk over)", ("XADD", "s", "MAXLEN", "~", "400", "*", "f", "v")),
)


# A batch of 100 commands on one stream and group (issue 27): 20 rounds of a client's XADD, XREADGROUP,
# XACK, XCLAIM and XPENDING, run as one pipeline (tests/spark/test_job_budgets.py's BATCH_BUDGET), one commit.
BATCH_OF_100: tuple[tuple[str, ...], ...] = tuple(
    command
    for n in range(20)
    for command in (
        ("XADD", "s", "*", "f", "v"),
        ("XREADGROUP", "GROUP", "g2", "c", "COUNT", "1", "STREAMS", "s", ">"),
        ("XACK", "s", "g", entry(200 + n)),
        ("XCLAIM", "s", "g", "alive", "60000", entry(300 + n)),
        ("XPENDING", "s", "g"),
    )
)


def build(spark: SparkSession, path: str) -> StreamStore:
    """Stream s of 500 entries T0-0..T0-499 delivered to consumer dead of group g; group g2 undelivered."""
    now = [T0]
    store = StreamStore.open(path, spark=spark, clock=lambda: now[0])
    store.append("s", spark.range(500).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "dead")
    store.execute("XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "0")
    now[0] = CLOCK
    return store


def _version(store: StreamStore) -> int:
    return int(store.snapshot().version or 0)


def jobs_of(spark: SparkSession, store: StreamStore, *argv: str) -> tuple[int, object]:
    """The Spark jobs ``argv`` runs on a table version it has not read yet, and its reply."""
    while (_version(store) + 2) % CHECKPOINT_INTERVAL in (0, 1):
        store.execute("XADD", "other", "*", "n", "1")
    store.execute("XADD", "other", "*", "n", "1")  # a new version, as another client's write makes
    with count_jobs(spark.sparkContext) as counted:
        reply = store.execute(*argv)
    return counted.jobs, reply


def jobs_of_batch(
    spark: SparkSession, store: StreamStore, commands: Sequence[Sequence[str]]
) -> tuple[int, int, list[Any]]:
    """The Spark jobs and commits of ``commands`` run as one pipeline (on an unread version), and the replies."""
    while (_version(store) + 2) % CHECKPOINT_INTERVAL in (0, 1):
        store.execute("XADD", "other", "*", "n", "1")
    store.execute("XADD", "other", "*", "n", "1")
    before = _version(store)
    pipe = store.pipeline()
    for command in commands:
        pipe.execute_command(*command)
    with count_jobs(spark.sparkContext) as counted:
        replies = pipe.execute(raise_on_error=False)
    return counted.jobs, _version(store) - before, replies


def main() -> None:
    spark = build_session(conf={"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    store = build(spark, tempfile.mkdtemp(prefix="bench-jobs-") + "/store")
    print("| command | Spark jobs |")
    print("|---|---:|")
    for name, command in COMMANDS:
        jobs, _ = jobs_of(spark, store, *command)
        print(f"| {name} | {jobs} |", flush=True)
    jobs, commits, _ = jobs_of_batch(spark, store, BATCH_OF_100)
    print(f"| pipeline of 100 (20 x XADD, XREADGROUP, XACK, XCLAIM, XPENDING), {commits} commit | {jobs} |")


if __name__ == "__main__":
    main()

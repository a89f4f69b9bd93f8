"""Prototype for the design study in docs/DESIGN.md: claims as blind appends, resolved on read.

Today a claim is a guarded MERGE (a read, then a MERGE that re-reads and rewrites the touched file).
The alternative measured here: a claim is one blind Delta append of *claim intents* (group, entry ID,
new owner, cutoff = now - min-idle, new delivery time), which never conflicts; who won is decided on
read, deterministically in commit order: starting from the folded PEL row, each intent in
(commit version, position) order wins iff the current delivery time is <= its cutoff, and then becomes
the current row. A background fold would write the winners back into the state table. This script
measures, on this machine, what each step costs:

- ``append``: one XCLAIM as a blind append of one intent (the write path);
- ``resolve``: the claimer learning its outcome: reading its group's intents after the last fold and
  resolving them against the folded PEL rows they name;
- ``fold``: folding a log of intents into the PEL (one MERGE), amortised over them.

Run: ``.venv/bin/python -m bench.blind_claims --pel 10000 --intents 200 --calls 20``. Prints one
Markdown table. A prototype: it is not wired into the store, and no test depends on it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.state.session import build_session
from streamclaim_spark.testing.spark_jobs import count_jobs

T0 = 1_700_000_000_000
MIN_IDLE_MS = 60_000

INTENT_SCHEMA = "group_name string, entry long, owner string, cutoff long, delivery_time_ms long, pos int"

# The resolution rule as one SQL fold over each entry's intents in commit order.
RESOLVE = """
aggregate(
  array_sort(intents, (a, b) -> CASE WHEN a.version < b.version THEN -1 WHEN a.version > b.version THEN 1
                                     WHEN a.pos < b.pos THEN -1 WHEN a.pos > b.pos THEN 1 ELSE 0 END),
  named_struct('owner', owner, 'delivery_time_ms', delivery_time_ms, 'delivery_count', delivery_count),
  (acc, c) -> IF(acc.delivery_time_ms <= c.cutoff,
                 named_struct('owner', c.owner, 'delivery_time_ms', c.delivery_time_ms,
                              'delivery_count', acc.delivery_count + 1),
                 acc)
)
"""


def build(spark: SparkSession, root: str, pel: int) -> tuple[str, str]:
    """A folded PEL of ``pel`` rows owned by a dead consumer, and an empty intent log with row tracking."""
    pel_path, log_path = f"{root}/pel", f"{root}/intents"
    (
        spark.range(pel)
        .selectExpr(
            "'g' AS group_name",
            "id AS entry",
            "'dead' AS owner",
            f"CAST({T0} AS BIGINT) AS delivery_time_ms",
            "CAST(1 AS BIGINT) AS delivery_count",
        )
        .write.format("delta")
        .save(pel_path)
    )
    (
        spark.createDataFrame(
            [], "group_name string, entry long, owner string, cutoff long, delivery_time_ms long, pos int"
        )
        .write.format("delta")
        .option("delta.enableRowTracking", "true")
        .option("delta.appendOnly", "true")
        .save(log_path)
    )
    return pel_path, log_path


def append_intent(spark: SparkSession, log_path: str, entry: int, owner: str, now: int) -> None:
    """One XCLAIM of one entry as a blind append (no read, no conflict check beyond Delta's append)."""
    (
        spark.range(1)
        .selectExpr(
            "'g' AS group_name",
            f"CAST({entry} AS BIGINT) AS entry",
            f"'{owner}' AS owner",
            f"CAST({now - MIN_IDLE_MS} AS BIGINT) AS cutoff",
            f"CAST({now} AS BIGINT) AS delivery_time_ms",
            "0 AS pos",
        )
        .write.format("delta")
        .mode("append")
        .save(log_path)
    )


def _intents(spark: SparkSession, log_path: str, entries: Sequence[int] | None = None) -> DataFrame:
    """Each entry's intents (owner, cutoff, delivery time, position, commit version) as one list."""
    log = spark.read.format("delta").load(log_path)
    if entries is not None:
        log = log.where(F.col("entry").isin(list(entries)))
    version = F.col("_metadata.row_commit_version").alias("version")
    intent = F.struct("owner", "cutoff", "delivery_time_ms", "pos", version).alias("intent")
    return log.select("entry", intent).groupBy("entry").agg(F.collect_list("intent").alias("intents"))


def resolved(spark: SparkSession, pel_path: str, log_path: str, entries: Sequence[int]) -> dict[int, Any]:
    """Who owns ``entries`` now: the folded rows with every later intent applied in commit order."""
    intents = _intents(spark, log_path, entries)
    pel = spark.read.format("delta").load(pel_path).where(F.col("entry").isin(list(entries)))
    rows = (
        pel.join(intents, "entry", "left")
        .select(
            "entry",
            F.expr(
                f"IF(intents IS NULL, named_struct('owner', owner, 'delivery_time_ms', delivery_time_ms, "
                f"'delivery_count', delivery_count), {RESOLVE})"
            ).alias("now"),
        )
        .collect()
    )
    return {row["entry"]: row["now"] for row in rows}


def fold(spark: SparkSession, pel_path: str, log_path: str) -> None:
    """Writes every resolved claim back into the PEL (one MERGE).

    A real fold would also record the log version it folded up to, so that reads apply only later
    intents; re-applying folded intents is harmless here (their cutoffs precede the winners' times).
    """
    intents = _intents(spark, log_path)
    current = spark.read.format("delta").load(pel_path).join(intents, "entry")
    winners = current.select("group_name", "entry", F.expr(RESOLVE).alias("now")).select("group_name", "entry", "now.*")
    (
        DeltaTable.forPath(spark, pel_path)
        .alias("t")
        .merge(winners.alias("s"), "t.group_name = s.group_name AND t.entry = s.entry")
        .whenMatchedUpdateAll()
        .execute()
    )


def _measure(action: Callable[[], Any], calls: int, spark: SparkSession) -> tuple[float, int]:
    times, jobs = [], 0
    for _ in range(calls):
        started = time.perf_counter()
        with count_jobs(spark.sparkContext) as counted:
            action()
        times.append(time.perf_counter() - started)
        jobs = counted.jobs
    return statistics.median(times[1:] if calls > 1 else times) * 1000, jobs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pel", type=int, default=10_000, help="folded PEL rows")
    parser.add_argument("--intents", type=int, default=200, help="intents in the log before resolve/fold")
    parser.add_argument("--calls", type=int, default=20, help="timed calls per step")
    args = parser.parse_args(argv)
    spark = build_session(conf={"spark.sql.shuffle.partitions": "2"})
    root = tempfile.mkdtemp(prefix="blind-claims-")
    pel_path, log_path = build(spark, root, args.pel)
    now = T0 + 3_600_000
    counter = iter(range(10**9))
    append_ms, append_jobs = _measure(
        lambda: append_intent(spark, log_path, next(counter) % args.pel, "w1", now), args.calls, spark
    )
    for n in range(args.intents - args.calls):
        append_intent(spark, log_path, n % args.pel, f"w{n % 3}", now)
    resolve_ms, resolve_jobs = _measure(lambda: resolved(spark, pel_path, log_path, [1, 2]), args.calls, spark)
    started = time.perf_counter()
    with count_jobs(spark.sparkContext) as folded:
        fold(spark, pel_path, log_path)
    fold_ms = (time.perf_counter() - started) * 1000
    winners = resolved(spark, pel_path, log_path, [0])
    print("| step | p50 | Spark jobs |")
    print("|---|---:|---:|")
    print(f"| claim as a blind append of one intent | {append_ms:,.0f} ms | {append_jobs} |")
    resolve_label = f"resolve 2 entries against {args.intents} intents and a {args.pel:,}-row PEL"
    print(f"| {resolve_label} | {resolve_ms:,.0f} ms | {resolve_jobs} |")
    print(f"| fold {args.intents} intents into the PEL (one MERGE, once) | {fold_ms:,.0f} ms | {folded.jobs} |")
    print(f"entry 0 after the fold: {winners[0]}")


if __name__ == "__main__":
    main()

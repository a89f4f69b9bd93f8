"""The README's demo: a small store with a dead consumer and poison entries, then the recovery job.

``python -m streamclaim_spark.demo [--path DIR]`` (what ``bash scripts/demo.sh`` runs) builds a store under
``./data/demo-store`` on local Spark and local Delta tables: three streams, four consumer groups, a consumer
``worker-1`` that took every entry an hour ago and died, and three payments delivered 12 times (poison).
It shows XPENDING, runs the recovery job through the same entry point as ``streamclaim-recover`` and
``spark-submit jobs/recover_stale.py`` (``cli.recover.main``: conf/ files, then flags), and prints the job's
report, the dead letters it wrote and XPENDING afterwards. Spark's output, Ivy's report and the job's log
(its JSON summary too) go to the log file whose path it prints first; ``--verbose`` shows them instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark.cli import recover
from streamclaim_spark.cli.console import console
from streamclaim_spark.fleet.bulk import NewGroup
from streamclaim_spark.sql import register
from streamclaim_spark.state.session import build_session
from streamclaim_spark.store import StreamStore

HOUR_MS = 3_600_000
GROUPS = (("orders-eu", "billing"), ("orders-eu", "shipping"), ("orders-us", "billing"), ("payments", "billing"))
STREAM_SIZES = {"orders-eu": 40, "orders-us": 25, "payments": 10}
POISON_DELIVERIES = 12
# The job's flags: claim what has been idle 30 minutes; dead-letter what was delivered more than 10 times.
JOB_FLAGS = ("--min-idle", "30m", "--max-deliveries", "10", "--consumer", "recovery")


def build_demo_store(path: str, spark: SparkSession, delivered_at_ms: int) -> StreamStore:
    """Fills a store as a crashed service leaves it; every delivery is stamped ``delivered_at_ms``.

    Every group's entries go to ``worker-1``; the first three payments are then re-delivered with
    ``RETRYCOUNT 12``, as if they had crashed their consumer again and again.
    """
    store = StreamStore.open(path, spark=spark, clock=lambda: delivered_at_ms)
    # The bulk paths: every stream in one commit, every group in one, every delivery in one.
    frames = [
        spark.range(rows).selectExpr(
            f"'{key}' AS stream", "concat('sku-', id) AS sku", "CAST(id % 5 + 1 AS STRING) AS qty"
        )
        for key, rows in STREAM_SIZES.items()
    ]
    entries = frames[0]
    for frame in frames[1:]:
        entries = entries.unionByName(frame)
    store.append_streams(entries.coalesce(1), "stream")
    store.create_groups([NewGroup(key, group, "0") for key, group in GROUPS])
    store.deliver_many([(key, group, "worker-1") for key, group in GROUPS])
    poison = [entry[0] for entry in store.execute("XRANGE", "payments", "-", "+", "COUNT", "3")]
    store.execute("XCLAIM", "payments", "billing", "worker-1", "0", *poison, "RETRYCOUNT", str(POISON_DELIVERIES))
    return store


def run_recovery_job(
    path: str, conf_dir: str = "conf", log_file: Path | None = None
) -> tuple[int, dict[str, Any] | None]:
    """Runs the recovery job on ``path`` as its console script would; returns (exit code, JSON summary).
    With ``log_file``, the JSON line the job prints goes there: the demo prints the summary as a table."""
    with tempfile.TemporaryDirectory() as folder, _stdout_to(log_file):
        summary_file = os.path.join(folder, "summary.json")
        code = recover.main(["--conf-dir", conf_dir, "--store", path, *JOB_FLAGS, "--summary-file", summary_file])
        if not os.path.exists(summary_file):
            return code, None
        with open(summary_file, encoding="utf-8") as handle:
            summary: dict[str, Any] = json.load(handle)
    return code, summary


@contextlib.contextmanager
def _stdout_to(log_file: Path | None) -> Iterator[None]:
    if log_file is None:
        yield
        return
    with open(log_file, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log):
        yield


def print_report(summary: dict[str, Any]) -> None:
    """The job's summary as a table, one line per group."""
    header = f"  {'stream/group':<20} {'pending':>7} {'stale':>5} {'dead-lettered':>13} {'claimed':>7}  to"
    print(header)
    for group in summary["groups"]:
        name = f"{group['stream']}/{group['group_name']}"
        owners = ", ".join(group["owners"]) or "-"
        print(
            f"  {name:<20} {group['scanned']:>7} {group['stale']:>5} {group['dead_lettered']:>13} "
            f"{group['claimed']:>7}  {owners}"
        )
    totals = summary["totals"]
    print(
        f"  run {summary['run_id']} {summary['status']}: {totals['groups']} groups, {totals['claimed']} claimed, "
        f"{totals['dead_lettered']} dead-lettered, {totals['conflicts_retried']} conflicts retried"
    )


def show_pending(store: StreamStore) -> None:
    for key, group in GROUPS:
        print(f"  XPENDING {key} {group} -> {store.execute('XPENDING', key, group)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--path", default="data/demo-store", help="store folder (recreated; default %(default)s)")
    parser.add_argument("--conf-dir", default="conf", help="the job's conf/ folder (default %(default)s)")
    parser.add_argument("--verbose", action="store_true", help="show Spark's and the job's log instead of a log file")
    args = parser.parse_args(argv)
    with console("streamclaim-demo", verbose=args.verbose, progress=False) as log_file:
        return run_demo(os.path.abspath(args.path), args.conf_dir, log_file)


def run_demo(path: str, conf_dir: str, log_file: Path | None) -> int:
    """Builds the demo store at ``path``, shows it, runs the recovery job and shows what it did."""
    shutil.rmtree(path, ignore_errors=True)
    spark = build_session()
    store = build_demo_store(path, spark, delivered_at_ms=int(time.time() * 1000) - HOUR_MS)
    print("Before: worker-1 took every entry an hour ago and died. XPENDING says:")
    show_pending(store)
    print(f"\nRunning the recovery job: streamclaim-recover --store {path} {' '.join(JOB_FLAGS)}", flush=True)
    code, summary = run_recovery_job(path, conf_dir, log_file)
    if code != recover.EXIT_OK or summary is None:
        print(f"The recovery job failed with exit code {code}; its log ({log_file or 'above'}) says why.")
        return code or recover.EXIT_RUN_FAILED
    print("\nRecovery report:")
    print_report(summary)
    print("\nDead letters (SELECT ... FROM streamclaim.dead_letters):")
    register(spark, path)
    letters = spark.sql(
        "SELECT stream, group_name, id, owner, delivery_count FROM streamclaim.dead_letters ORDER BY stream, id"
    )
    for row in letters.collect():
        print(f"  {row.stream}/{row.group_name} {row.id} last owner {row.owner}, delivered {row.delivery_count} times")
    print("\nAfter: XPENDING says:")
    show_pending(store)
    return recover.EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())

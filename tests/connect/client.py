"""The Spark Connect side of tests/connect: a process that is only a Connect client, as a user's is.

pyspark decides per process whether its functions build classic or Connect Columns, so the checks run
here, in a process of their own, against the Connect server the test run's JVM serves; the test reads
back what each section produced (a pickle) and compares it with redis-server and with a classic session.

    python -m tests.connect.client <sc://url> <work folder> <request.pickle> <result.pickle>

Each section records its result or the error it raised, so one failure never hides the others.
"""

from __future__ import annotations

import pickle
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore, sql
from streamclaim_spark.core.config import RecoveryOptions, RedriveOptions
from streamclaim_spark.errors import StreamclaimError
from streamclaim_spark.fleet.claims import ClaimRequest, StaleSelection
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.session import build_session
from streamclaim_spark.store import wall_clock_ms
from streamclaim_spark.streaming import register
from tests.clock import ManualClock
from tests.parity.harness import Step, run_on


def parity(spark: SparkSession, work: Path, scenarios: dict[str, list[Step]]) -> dict[str, Any]:
    """Each scenario's outcomes on one store, emptied between scenarios as the test empties Redis.

    The store's clock stands still (these scenarios never pause): Redis runs them in microseconds, so
    its idle times are 0, and the store's are then its own logic's, not this machine's round trips."""
    store = StreamStore.open(str(work / "parity"), spark=spark, clock=ManualClock(wall_clock_ms()))
    outcomes = {}
    for name, steps in scenarios.items():
        store.execute("FLUSHALL")
        outcomes[name] = run_on(store, steps)
    return outcomes


FLEET_SIZES = {"orders-1": 40, "orders-2": 40, "orders-3": 40, "jobs": 6, "mail": 4}
FLEET_GROUPS = {
    "orders-1": "billing",
    "orders-2": "billing",
    "orders-3": "billing",
    "jobs": "workers",
    "mail": "senders",
}
FLEET_DEAD = {"billing": "dead", "workers": "crashed", "senders": "gone"}


def fleet(spark: SparkSession, work: Path) -> StreamStore:
    """One store for the other sections, built with the bulk APIs in three commits: streams orders-1..3
    (40 entries each, group billing), jobs (6, group workers) and mail (4, group senders), every entry
    delivered to a consumer that then died."""
    store = StreamStore.open(str(work / "fleet"), spark=spark)
    rows = [(stream, str(n)) for stream, size in FLEET_SIZES.items() for n in range(1, size + 1)]
    store.append_streams(spark.createDataFrame(rows, "stream string, n string"), "stream")
    store.create_groups([(stream, group, "0") for stream, group in FLEET_GROUPS.items()])
    store.deliver_many([(stream, group, FLEET_DEAD[group]) for stream, group in FLEET_GROUPS.items()])
    return store


def fleet_pel(store: StreamStore) -> dict[str, Any]:
    """What the fleet's groups hold right after it is built, before any other section changes it: per
    stream, its entry IDs, the XPENDING summary and the extended XPENDING rows without the idle time
    (ID, owner, delivery count)."""
    pel: dict[str, Any] = {}
    for stream, group in FLEET_GROUPS.items():
        pel[stream] = {
            "ids": [entry[0] for entry in store.execute("XRANGE", stream, "-", "+")],
            "summary": store.execute("XPENDING", stream, group),
            "rows": [
                [entry_id, owner, count]
                for entry_id, owner, _, count in store.execute("XPENDING", stream, group, "-", "+", "1000")
            ],
        }
    return pel


def batched_claim(store: StreamStore) -> dict[str, Any]:
    """The orders streams' stale entries claimed in one commit, then a Redis-style claim batch; the
    replies are read back with XPENDING."""
    stale = store.claim_stale(StaleSelection(0, streams=("orders-*",), max_deliveries=1), "alive")
    summary = store.execute("XPENDING", "orders-2", "billing")
    first = store.execute("XRANGE", "orders-3", "-", "+", "COUNT", "2")
    requests = [
        ClaimRequest("orders-3", "billing", "later", 0, ids=(first[0][0], first[1][0])),
        ClaimRequest("orders-1", "billing", "later", 0, count=5, just_id=True),
    ]
    batch = store.claim_batch(requests)
    return {
        "ids": {n: [entry[0] for entry in store.execute("XRANGE", f"orders-{n}", "-", "+")] for n in (1, 2, 3)},
        "claimed": stale.total_claimed,
        "counts": stale.counts,
        "pending_summary": summary,
        "batch_replies": batch.replies,
        "owners": store.execute("XPENDING", "orders-1", "billing", "-", "+", "100", "later"),
    }


def recovery(spark: SparkSession, store: StreamStore) -> dict[str, Any]:
    """A recovery run over stream jobs that claims stale entries and dead-letters the two delivered too often."""
    ids = [entry[0] for entry in store.execute("XRANGE", "jobs", "-", "+")]
    store.execute("XCLAIM", "jobs", "workers", "crashed", "0", ids[0], ids[1], "RETRYCOUNT", "20", "JUSTID")
    options = RecoveryOptions(min_idle_ms=0, streams=("jobs",), max_deliveries=10)
    report = recover_stale(store, options, run_id="connect-1")
    sql.register(spark, store.path)
    return {
        "ids": ids,
        "totals": report.totals,
        "status": report.status,
        "pending": store.execute("XPENDING", "jobs", "workers", "-", "+", "10"),
        "dead_letters": sorted(r[0] for r in spark.sql("SELECT id FROM streamclaim.dead_letters").collect()),
    }


def redrive(store: StreamStore, work: Path) -> dict[str, Any]:
    """The recovery section's two dead letters put back into their group, then read with XREADGROUP ...
    CLAIM and acknowledged, on a copy of the fleet's store (the other sections read it as recovery left it)."""
    copy = work / "redrive"
    shutil.copytree(store.path, copy)
    redriven = StreamStore.open(str(copy), spark=store.spark)
    options = RedriveOptions(streams=("jobs",))
    report = redriven.redrive(options, run_id="connect-redrive-1")
    # NACK-zone entries come first; the COUNT leaves the recovery's own claims where they are.
    claimed = redriven.execute(
        "XREADGROUP", "GROUP", "workers", "alive", "COUNT", "2", "CLAIM", "0", "STREAMS", "jobs", ">"
    )
    ids = [entry[0] for entry in claimed[0][1]] if claimed else []
    acked = redriven.execute("XACK", "jobs", "workers", *ids) if ids else 0
    again = redriven.redrive(options, run_id="connect-redrive-2")
    return {
        "status": report.status,
        "recorded": report.recorded,
        "totals": report.totals,
        "claimed": claimed,
        "acked": acked,
        "again": again.totals,
    }


def sql_views(spark: SparkSession, queries: dict[str, str]) -> dict[str, Any]:
    """The docs' queries over the fleet's store, through the views ``sql.register`` made."""
    return {name: [tuple(row) for row in spark.sql(query).collect()] for name, query in queries.items()}


def streaming_refused(spark: SparkSession) -> str:
    """The data source refuses a Connect session at once, with its own error."""
    try:
        register(spark)
    except StreamclaimError as error:
        return f"{type(error).__name__}: {error}"
    return "registered"


def main(url: str, work: str, request_path: str, result_path: str) -> None:
    request = pickle.loads(Path(request_path).read_bytes())
    spark = build_session(remote=url)
    folder = Path(work)
    results: dict[str, Any] = {"is_connect": is_connect(spark)}
    stores: dict[str, StreamStore] = {}
    sections: dict[str, Callable[[], Any]] = {
        "parity": lambda: parity(spark, folder, request["parity"]),
        "fleet": lambda: fleet_pel(stores.setdefault("fleet", fleet(spark, folder))),
        "batched_claim": lambda: batched_claim(stores["fleet"]),
        "recovery": lambda: recovery(spark, stores["fleet"]),
        "redrive": lambda: redrive(stores["fleet"], folder),
        "sql": lambda: sql_views(spark, request["queries"]),
        "streaming": lambda: streaming_refused(spark),
    }
    for name, section in sections.items():
        started = time.monotonic()
        try:
            results[name] = section()
        except Exception:
            results[name] = {"raised": traceback.format_exc()}
        print(f"connect client: {name} took {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    Path(result_path).write_bytes(pickle.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])

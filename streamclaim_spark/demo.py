"""The README's demo: a small store with a dead consumer and poison entries, then a recovery run.

``python -m streamclaim_spark.demo [--path DIR]`` builds the store under ``./data/demo-store`` (local
Spark, local Delta tables), shows the stale entries as XPENDING reports them, recovers them and prints
the report.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence

from streamclaim_spark.batch_claim import StaleSelection
from streamclaim_spark.session import build_session
from streamclaim_spark.store import StreamStore

HOUR_MS = 3_600_000


def build_demo_store(path: str) -> tuple[StreamStore, list[int]]:
    """Two order streams and a payments stream; consumer 'worker-1' took entries and died an hour ago."""
    spark = build_session()
    clock = [1_700_000_000_000]
    store = StreamStore.open(path, spark=spark, clock=lambda: clock[0])
    for key, rows in (("orders-eu", 40), ("orders-us", 25), ("payments", 10)):
        frame = spark.range(rows).selectExpr("concat('sku-', id) AS sku", "CAST(id % 5 + 1 AS STRING) AS qty")
        store.append(key, frame)
        store.execute("XGROUP", "CREATE", key, "billing", "0")
        store.deliver(key, "billing", "worker-1")
    # Three payments were retried over and over: poison candidates.
    first = store.execute("XRANGE", "payments", "-", "+", "COUNT", "3")
    store.execute("XCLAIM", "payments", "billing", "worker-1", "0", *(e[0] for e in first), "RETRYCOUNT", "9")
    clock[0] += HOUR_MS
    return store, clock


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--path", default="data/demo-store", help="store folder (recreated; default %(default)s)")
    args = parser.parse_args(argv)
    shutil.rmtree(args.path, ignore_errors=True)
    store, _ = build_demo_store(args.path)
    print("Stale pending entries, as XPENDING reports them:")
    for key in ("orders-eu", "orders-us", "payments"):
        print(f"  XPENDING {key} billing -> {store.execute('XPENDING', key, 'billing')}")
    poison = store.claim_stale(StaleSelection(min_idle_ms=600_000, min_deliveries=6), "poison-review")
    recovered = store.claim_stale(StaleSelection(min_idle_ms=600_000, max_deliveries=5), ["worker-2", "worker-3"])
    report = {
        "store": args.path,
        "poison_to_review": poison.total_claimed,
        "recovered": {f"{s}/{g}": claimed for (s, g), (claimed, _) in sorted(recovered.counts.items())},
        "recovered_total": recovered.total_claimed,
        "commit_versions": [poison.version, recovered.version],
    }
    print("Recovery report:")
    print(json.dumps(report, indent=2))
    print(f"  XPENDING payments billing -> {store.execute('XPENDING', 'payments', 'billing')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

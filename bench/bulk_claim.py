"""The bulk-claim lever: claim_stale as one Delta UPDATE against the MERGE path, on the same store.

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.bulk_claim --sizes 100000 1000000 --calls 3

For each N: one stream of N entries all pending for ``dead``. Then, alternating so both paths see the
same store and the same file layout, ``--calls`` times each: ``claim_stale`` of all N to a consumer the
group already has, by the MERGE path (the in-place path switched off for the call) and by the UPDATE
path; and once each to a consumer the group does not have yet (the UPDATE path then commits the
consumer first). Prints the median seconds per case, and the Delta operations of the last calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from delta.tables import DeltaTable

from bench.side_by_side import GROUP, KEY, entries, timed, wait_until_stale
from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.fleet.claims import batch
from streamclaim_spark.state.session import build_session


@contextmanager
def merge_path() -> Iterator[None]:
    """claim_stale as it was before the UPDATE path: every claim through the MERGE."""
    in_place = batch.claim_in_place
    batch.claim_in_place = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        yield
    finally:
        batch.claim_in_place = in_place  # type: ignore[assignment]


def measure(store: StreamStore, size: int, calls: int) -> dict[str, float]:
    """Median seconds per case; every call claims all ``size`` entries."""
    selection = StaleSelection(min_idle_ms=0, streams=(KEY,), groups=(GROUP,))
    samples: dict[str, list[float]] = {"MERGE, known owner": [], "UPDATE, known owner": []}
    for owner in ("merge-owner", "update-owner"):
        store.execute("XGROUP", "CREATECONSUMER", KEY, GROUP, owner)
    for _ in range(calls):
        wait_until_stale()
        with merge_path():
            seconds, result = timed(store.claim_stale, selection, "merge-owner")
        assert result.total_claimed == size, result.counts
        samples["MERGE, known owner"].append(seconds)
        wait_until_stale()
        seconds, result = timed(store.claim_stale, selection, "update-owner")
        assert result.total_claimed == size, result.counts
        samples["UPDATE, known owner"].append(seconds)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    wait_until_stale()
    with merge_path():
        medians["MERGE, new owner"] = timed(store.claim_stale, selection, "merge-new")[0]
    wait_until_stale()
    medians["UPDATE, new owner"] = timed(store.claim_stale, selection, "update-new")[0]
    return medians


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args(argv)
    spark = build_session(conf={"spark.driver.memory": "12g", "spark.sql.shuffle.partitions": "4"})
    root = tempfile.mkdtemp(prefix="bench-bulk-claim-")
    rows = []
    for size in args.sizes:
        store = StreamStore.open(os.path.join(root, f"pel-{size}"), spark=spark)
        store.append(KEY, entries(spark, size))
        store.execute("XGROUP", "CREATE", KEY, GROUP, "0")
        store.deliver(KEY, GROUP, "dead")
        result = measure(store, size, args.calls)
        rows.append((size, result))
        print(f"PEL {size:,}: {result}", flush=True)
        history = DeltaTable.forPath(spark, store.runner.state_path).history(3).select("version", "operation")
        print("  last commits:", [tuple(row) for row in history.collect()], flush=True)
    names = list(rows[0][1])
    print("\n| PEL size | " + " | ".join(names) + " |")
    print("|---:|" + "---:|" * len(names))
    for size, result in rows:
        print(f"| {size:,} | " + " | ".join(f"{result[name]:.1f} s" for name in names) + " |")


if __name__ == "__main__":
    main()

"""What a commit that changes only heads and consumers copies, on a big stream (CHANGELOG.md, "Heads apart").

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.heads_apart --entries 1000000

One stream of N entries, all delivered to consumer ``dead`` of group ``g`` (an N-row PEL). Then, each
timed as a client calls it, with the commit's own metrics: XGROUP CREATE of a second group on the
stream (one head changed, one inserted), and XGROUP CREATECONSUMER on ``g`` (one consumer inserted,
the group's head bumped). Before heads were apart, each copied the ~100,000 entries or PEL rows that
shared a file with the head it bumped.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.engine.transaction import commit_metrics
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.session import build_session
from streamclaim_spark.state.tables import table_path

KEY, GROUP = "big", "g"
COMMANDS = (
    ("XGROUP CREATE on the stream", ("XGROUP", "CREATE", KEY, "late", "$")),
    ("XGROUP CREATECONSUMER on the PEL's group", ("XGROUP", "CREATECONSUMER", KEY, GROUP, "alive")),
)


def measure(store: StreamStore) -> list[dict[str, object]]:
    """Each command's seconds and what its commit copied and changed."""
    state = table_path(store.path, C.STATE_TABLE_DIR)
    rows = []
    for name, argv in COMMANDS:
        started = time.perf_counter()
        store.execute(*argv)
        seconds = time.perf_counter() - started
        metrics = commit_metrics(store.spark, state, latest_version(store.spark, state))
        rows.append(
            {
                "command": name,
                "seconds": round(seconds, 2),
                "copied": metrics["numTargetRowsCopied"],
                "updated": metrics["numTargetRowsUpdated"],
                "inserted": metrics["numTargetRowsInserted"],
                "files_removed": metrics["numTargetFilesRemoved"],
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    spark = build_session(conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "8g"})
    spark.sparkContext.setLogLevel("ERROR")
    store = StreamStore.open(tempfile.mkdtemp(prefix="bench-heads-") + "/store", spark=spark)
    store.append(KEY, spark.range(args.entries).selectExpr("id AS n", "uuid() AS body"))
    store.execute("XGROUP", "CREATE", KEY, GROUP, "0")
    store.deliver(KEY, GROUP, "dead")
    store.execute("XADD", "other", "*", "n", "1")  # a warm session, as a running client has
    for row in measure(store):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

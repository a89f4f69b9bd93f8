"""A consumer's command mix on a store in a local folder and on ``s3a://``, same process, same run.

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.store_mix --entries 10000 --rounds 10

Two stores, one on a local folder and one on ``s3a://`` (Hadoop's S3A against moto's S3 server on
loopback, single-writer mode), each with a stream of ``--entries`` entries all delivered to a consumer
whose PEL is an hour stale. Then ``--rounds`` rounds of a consumer's mix on each store in turn: XADD,
XREADGROUP COUNT 10, XACK of those, XPENDING summary, XPENDING - + 10, XCLAIM of one stale entry,
XAUTOCLAIM COUNT 10, XINFO GROUPS. Prints per command and store the p50 milliseconds of the rounds
after the first and the Spark jobs of the last round, and the ratio s3a / local. With ``--claim-entries
N``, then on each store a stream of N entries delivered to a dead consumer, claimed twice in a batch
(``claim_stale``, each time all N stale again): the seconds of each claim.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.moto import moto_server
from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.testing.spark_jobs import count_jobs

BUCKET = "mix"
T0 = 1_700_000_000_000
HOUR_MS = 3_600_000


def build(spark: SparkSession, path: str, entries: int, clock: list[int]) -> tuple[StreamStore, list[str]]:
    """Stream s of ``entries`` entries delivered to consumer ``dead`` of group g, an hour before ``clock``."""
    store = StreamStore.open(path, spark=spark, clock=lambda: clock[0], single_writer=path.startswith("s3a://"))
    store.append("s", spark.range(entries).select(F.col("id").cast("string").alias("n")))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "dead")
    stale = [str(entry[0]) for entry in store.execute("XPENDING", "s", "g", "-", "+", "1000")]
    return store, stale


def one_round(store: StreamStore, stale: list[str], round_number: int) -> dict[str, tuple[float, int]]:
    """Each command of the mix once: its milliseconds and Spark jobs."""
    spark = store.spark
    took: dict[str, tuple[float, int]] = {}

    def run(name: str, *argv: Any) -> Any:
        started = time.perf_counter()
        with count_jobs(spark.sparkContext) as counted:
            reply = store.execute(*argv)
        took[name] = ((time.perf_counter() - started) * 1000, counted.jobs)
        return reply

    run("XADD", "XADD", "s", "*", "n", str(round_number))
    read = run("XREADGROUP", "XREADGROUP", "GROUP", "g", "live", "COUNT", "10", "STREAMS", "s", ">")
    ids = [entry[0] for entry in read[0][1]] if read else []
    run("XACK", "XACK", "s", "g", *(ids or ["0-1"]))
    run("XPENDING", "XPENDING", "s", "g")
    run("XPENDING - + 10", "XPENDING", "s", "g", "-", "+", "10")
    run("XCLAIM", "XCLAIM", "s", "g", "claimer", str(HOUR_MS), stale[2 * round_number])
    run("XAUTOCLAIM", "XAUTOCLAIM", "s", "g", "auto", str(HOUR_MS), "0", "COUNT", "10")
    run("XINFO GROUPS", "XINFO", "GROUPS", "s")
    return took


def batched_claims(store: StreamStore, entries: int, clock: list[int]) -> list[float]:
    """Seconds of two batched claims of ``entries`` stale entries of a new stream ``big``."""
    store.append("big", store.spark.range(entries).select(F.col("id").cast("string").alias("n")))
    store.execute("XGROUP", "CREATE", "big", "g", "0")
    store.deliver("big", "g", "dead")
    selection = StaleSelection(min_idle_ms=HOUR_MS, streams=("big",), groups=("g",))
    took = []
    for claimer in ("first", "second"):
        clock[0] += 2 * HOUR_MS
        started = time.perf_counter()
        result = store.claim_stale(selection, claimer)
        took.append(round(time.perf_counter() - started, 2))
        assert result.total_claimed == entries, result.counts
    return took


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--port", type=int, default=5078)
    parser.add_argument("--claim-entries", type=int, default=0, help="then a batched claim of this many (0: none)")
    args = parser.parse_args(argv)

    from streamclaim_spark.state.session import build_session
    from tests.spark.s3_worker import s3a_settings

    with moto_server(args.port, BUCKET) as endpoint, tempfile.TemporaryDirectory() as folder:
        spark = build_session(conf={"spark.ui.enabled": "false", **s3a_settings(endpoint)})
        clock = [T0]
        stores = {
            "local": build(spark, f"{folder}/store", args.entries, clock),
            "s3a": build(spark, f"s3a://{BUCKET}/store", args.entries, clock),
        }
        clock[0] = T0 + 2 * HOUR_MS
        rounds: dict[str, list[dict[str, tuple[float, int]]]] = {name: [] for name in stores}
        for number in range(args.rounds):
            for name, (store, stale) in stores.items():
                rounds[name].append(one_round(store, stale, number))
        claims = {
            name: batched_claims(store, args.claim_entries, clock) if args.claim_entries else []
            for name, (store, _) in stores.items()
        }
        spark.stop()
    result: dict[str, Any] = {}
    for command in rounds["local"][0]:
        row: dict[str, Any] = {}
        for name in stores:
            row[f"{name}_p50_ms"] = round(statistics.median(r[command][0] for r in rounds[name][1:]), 1)
            row[f"{name}_jobs"] = rounds[name][-1][command][1]
        row["ratio"] = round(row["s3a_p50_ms"] / row["local_p50_ms"], 2)
        result[command] = row
    if args.claim_entries:
        result[f"batched claim of {args.claim_entries}"] = {f"{name}_seconds": took for name, took in claims.items()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""The redrive at fleet scale: every dead letter of a thousand groups back into its group in one run.

Run from the repo root, with nothing else running::

    .venv/bin/python -m bench.redrive --streams 100 --entries 10000 --groups 10 --letters 1000

Builds a store of ``--streams`` streams of ``--entries`` entries each (one bulk append) with ``--groups``
groups each (one ``create_groups``), and a ``dead_letters`` table holding, for every group, a letter for
each of the first ``--letters`` entries of its stream, as the recovery job writes them (one append: a
recovery run that dead-letters a million entries first needs them delivered eleven times, which is not
what this measures). Then one ``store.redrive()`` on a fresh process's session, timed, and checked: every
entry back in its group's PEL once, one state commit, the take and the mark one commit each. There is no
Redis side: Redis has no redrive; a script would XADD or XCLAIM each entry back (docs/RECOVERY.md, "Redrive").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence

from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.fleet.bulk import NewGroup
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.session import build_session
from streamclaim_spark.state.tables import ensure_dead_letter_table

T0 = 1_700_000_000_000


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--entries", type=int, default=10_000, help="entries per stream")
    parser.add_argument("--groups", type=int, default=10, help="groups per stream")
    parser.add_argument("--letters", type=int, default=1_000, help="dead letters per group")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    spark = build_session(master=args.master)
    now = [T0]
    store = StreamStore.open(tempfile.mkdtemp(prefix="redrive-bench-") + "/store", spark=spark, clock=lambda: now[0])
    started = time.perf_counter()
    stream = F.concat(F.lit("s"), (F.col("id") % args.streams).cast("string"))
    store.append_streams(spark.range(args.streams * args.entries).select(stream.alias("stream"), "id"), "stream")
    store.create_groups([NewGroup(f"s{i}", f"g{j}", "$") for i in range(args.streams) for j in range(args.groups)])
    entries = store.snapshot().frame().where(F.col(C.ROW_KIND) == C.KIND_ENTRY)
    first = entries.where(F.col(C.ID_SEQ) < F.lit(args.letters - 2**63)).select(  # stored sequences are shifted
        C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS
    )
    groups = spark.createDataFrame([(f"g{j}",) for j in range(args.groups)], f"{C.GROUP} string")
    letters = first.crossJoin(groups).select(
        F.lit("bench").alias("run_id"),
        F.timestamp_millis(F.lit(T0)).alias("dead_lettered_at"),
        C.STREAM,
        C.GROUP,
        id_text(C.ID_MS, C.ID_SEQ).alias("id"),
        F.lit("worker").alias(C.OWNER),
        F.lit(11).cast("long").alias(C.DELIVERY_COUNT),
        F.lit(T0).cast("long").alias(C.DELIVERY_TIME_MS),
        C.FIELDS,
        F.lit("max-deliveries exceeded (11 > 10)").alias("reason"),
    )
    table = ensure_dead_letter_table(spark, store.path)
    letters.write.format("delta").mode("append").option("userMetadata", "BENCH LETTERS").save(table)
    built = time.perf_counter() - started
    now[0] = T0 + 60_000
    state_before, letters_before = latest_version(spark, store.state_path), latest_version(spark, table)
    started = time.perf_counter()
    report = store.redrive(RedriveOptions(), run_id="bench")
    took = time.perf_counter() - started
    pel = store.snapshot().frame().where(F.col(C.ROW_KIND) == C.KIND_PENDING)
    expected = args.streams * args.groups * args.letters
    result = {
        "streams": args.streams,
        "groups": args.streams * args.groups,
        "entries_redriven": report.totals["redriven"],
        "build_s": round(built, 1),
        "redrive_s": round(took, 1),
        "state_commits": latest_version(spark, store.state_path) - state_before,
        "dead_letter_commits": latest_version(spark, table) - letters_before,
        "pel_rows": pel.count(),
        "pel_distinct": pel.select(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ).distinct().count(),
    }
    assert result["entries_redriven"] == result["pel_rows"] == result["pel_distinct"] == expected, result
    print(json.dumps(result))


if __name__ == "__main__":
    main()

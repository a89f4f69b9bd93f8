"""Child process for the crash test: its own Spark driver runs a ``streamclaim`` query until killed.

Run as ``python -m tests.spark.stream_worker --path P --output O --checkpoint C --stall-batch K``.
Each micro-batch appends its rows to the Delta table at ``--output`` through ``foreachBatch``, then
prints ``written <batch id> <rows>``; batch K, once written, prints its line and waits to be killed
(SIGKILL from the parent), so the crash falls after the output and before Spark commits the batch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--path", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--stall-batch", type=int, required=True)
    parser.add_argument("--max-entries", type=int, default=1000)
    args = parser.parse_args(argv)

    from streamclaim_spark.state.session import build_session
    from streamclaim_spark.streaming import register
    from tests.fixtures import TEST_SPARK_CONF

    spark = build_session(
        master="local[1]", app_name="stream-worker", conf={**TEST_SPARK_CONF, "spark.sql.shuffle.partitions": "1"}
    )
    register(spark)

    def process(frame: Any, batch_id: int) -> None:
        frame.withColumn("batch", __import__("pyspark.sql.functions").sql.functions.lit(batch_id)).write.format(
            "delta"
        ).mode("append").save(args.output)
        _say(f"written {batch_id} {frame.count()}")
        if batch_id == args.stall_batch:
            time.sleep(600)  # killed here: the batch's output exists, Spark has not committed it

    query = (
        spark.readStream.format("streamclaim")
        .option("path", args.path)
        .option("stream", "orders")
        .option("group", "billing")
        .option("consumer", "spark-1")
        .option("maxEntriesPerTrigger", args.max_entries)
        .load()
        .writeStream.foreachBatch(process)
        .option("checkpointLocation", args.checkpoint)
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Child driver for the S3 test: the store on ``s3a://`` through Hadoop's S3A connector and a local S3 server.

Run as ``python -m tests.spark.s3_worker --endpoint http://127.0.0.1:PORT --path s3a://b/streams
--refused-path s3a://b/refused --moto-log FILE`` (``FILE``: where the S3 server logs its requests).
Its own JVM carries ``hadoop-aws`` (the test session does not), so it runs in a process of its own. It
prints one line, ``result <json>``, with what each step saw; Spark's logging goes to stderr.

Steps: open at ``--refused-path`` without a multi-writer log store (refused, nothing written); open
with ``single_writer=True``; seed 200 entries delivered to a dead consumer in bulk; race two threads'
XAUTOCLAIM for them; run the recovery job's library entry point on what is left stale; read back
``recovery_runs``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.clock import ManualClock

T0 = 1_700_000_000_000
HOUR = 3_600_000
ENTRIES = 200


def s3a_settings(endpoint: str) -> dict[str, str]:
    """Spark settings for S3A against a local, plain-HTTP S3 server with path-style buckets."""
    from streamclaim_spark.core.object_store import S3A_PACKAGE
    from streamclaim_spark.state.session import DELTA_PACKAGE

    return {
        "spark.jars.packages": f"{DELTA_PACKAGE},{S3A_PACKAGE}",
        "spark.sql.shuffle.partitions": "2",
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "testing",
        "spark.hadoop.fs.s3a.secret.key": "testing",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--path", required=True, help="where the store opens in single-writer mode")
    parser.add_argument("--refused-path", required=True, help="where opening without opt-in must be refused")
    parser.add_argument("--moto-log", required=True, type=Path, help="the S3 server's request log")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from streamclaim_spark import StreamStore
    from streamclaim_spark.core.config import RecoveryOptions
    from streamclaim_spark.errors import UnsafeObjectStoreError
    from streamclaim_spark.fleet.recovery import recover_stale
    from streamclaim_spark.state.session import build_session
    from tests.fixtures import TEST_SPARK_CONF

    spark = build_session(
        master="local[2]", app_name="s3-worker", conf={**TEST_SPARK_CONF, **s3a_settings(args.endpoint)}
    )
    result: dict[str, Any] = {}
    try:
        StreamStore.open(args.refused_path, spark=spark)
        result["refusal"] = None
    except UnsafeObjectStoreError as error:
        result["refusal"] = str(error)

    clock = ManualClock(T0)
    store = StreamStore.open(args.path, spark=spark, clock=clock, single_writer=True)
    result["mode"] = store.safety.mode
    result["log_store"] = store.safety.log_store
    store.append("s", spark.range(ENTRIES).select(F.col("id").cast("string").alias("n")))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "dead")
    result["ids"] = [entry[0] for entry in store.execute("XRANGE", "s", "-", "+")]
    store.execute("XADD", "s", "*", "n", "warm")
    result["xadd_requests"] = requests_of(args.moto_log, lambda: store.execute("XADD", "s", "*", "n", "counted"))

    clock.now = T0 + HOUR
    replies: dict[str, Any] = {}
    attempts: dict[str, int] = {}
    start = threading.Barrier(2)

    def claim(consumer: str) -> None:
        start.wait()
        replies[consumer] = store.execute("XAUTOCLAIM", "s", "g", consumer, str(HOUR // 2), "0", "COUNT", "1000")
        attempts[consumer] = store.last_attempts

    threads = [threading.Thread(target=claim, args=(name,)) for name in ("c1", "c2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result["race"] = {name: [entry[0] for entry in reply[1]] for name, reply in replies.items()}
    result["attempts"] = attempts
    result["xpending_after_race"] = store.execute("XPENDING", "s", "g")

    clock.now = T0 + 3 * HOUR
    report = recover_stale(store, RecoveryOptions(min_idle_ms=HOUR, max_deliveries=10), run_id="s3-run")
    result["recovery"] = report.to_json()["totals"]
    runs = spark.read.format("delta").load(f"{args.path}/recovery_runs").select("run_id", "writer_mode")
    result["recovery_runs"] = [list(row) for row in runs.collect()]
    result["xpending_after_recovery"] = store.execute("XPENDING", "s", "g")
    return report_and_stop(spark, result)


def requests_of(moto_log: Path, run: Callable[[], Any]) -> list[str]:
    """The S3 requests ``run`` made, from the server's log: method and key (``LIST`` and the prefix for a
    listing), with versions, data files and temporary names made general, in the order made."""
    before = _logged_requests(moto_log)
    run()
    # The server logs a request once it has answered it: wait until its log stops growing.
    seen, still_since = len(_logged_requests(moto_log)), time.monotonic()
    while time.monotonic() - still_since < 0.5:
        time.sleep(0.05)
        now = len(_logged_requests(moto_log))
        if now != seen:
            seen, still_since = now, time.monotonic()
    return [_general(line) for line in _logged_requests(moto_log)[len(before) :]]


def _logged_requests(moto_log: Path) -> list[str]:
    return re.findall(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+ \S+) HTTP', moto_log.read_text())


def _general(request: str) -> str:
    method, target = request.split(" ", 1)
    listing = re.fullmatch(r"/[^/?]+\?list-type=2&delimiter=/&max-keys=\d+&prefix=(\S*)", target)
    key = listing.group(1) if listing else target.split("/", 2)[2]
    key = re.sub(r"\d{20}", "N", key)
    key = re.sub(r"\.N\.crc\.[0-9a-f-]{36}\.tmp", ".N.crc.tmp", key)
    key = re.sub(r"part-\d{5}-[0-9a-f-]{36}\.c000\.snappy\.parquet", "DATA", key)
    return f"{'LIST' if listing else method} {key}"


def report_and_stop(spark: Any, result: dict[str, Any]) -> int:
    """Prints the worker's one ``result <json>`` line, stops its session and gives the exit code 0."""
    sys.stdout.write("result " + json.dumps(result) + "\n")
    sys.stdout.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

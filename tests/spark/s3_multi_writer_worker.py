"""Child driver for the multi-writer S3 test: one of two drivers racing XAUTOCLAIM on ``s3a://`` through
Delta's ``S3DynamoDBLogStore``, with S3 and DynamoDB both served by moto on loopback.

Run as ``python -m tests.spark.s3_multi_writer_worker --endpoint http://127.0.0.1:PORT --path s3a://b/multi
--table delta_log --endpoints-jar JAR [--log-store-jar JAR] --barrier DIR --name c1 --peer c2 [--seed]``,
once per driver, each in a process (and so a JVM) of its own. It prints one line, ``result <json>``; Spark's
logging goes to stderr. ``--log-store-jar`` is the log store built from Delta's sources
(tests/jars/log_store_jar.py); without it the driver asks Maven for ``io.delta:delta-storage-s3-dynamodb``.

The two drivers meet at files in ``--barrier``:

1. the seeding driver (``--seed``) builds its session and touches ``session-up``; the other waits for that
   file before it builds its own, so the two JVMs never resolve the Ivy packages into one cache at the
   same time (the first run on a machine downloads them);
2. the seeding driver opens the store, appends 200 entries, creates group ``g`` and delivers them all to
   the dead consumer ``dead`` (bulk APIs), then touches ``seeded``; the other opens the store after that;
3. each reads XPENDING (the entries as seeded, and a warm-up of its JVM), moves its ManualClock an hour on,
   touches ``ready-<name>`` and spins until ``ready-<peer>`` exists too, then issues
   ``XAUTOCLAIM s g <name> 1800000 0 COUNT 1000``: the store re-runs it on a lost commit race, as always;
   ``store.last_attempts`` says how many attempts it took, and the retry loop's log lines why each lost.
   The claim's first commit (a transaction of files, its data files written) waits before Delta commits
   it until the other driver's has got there too (``commit-<name>``, ``commit-<peer>``): both decided on
   the same snapshot and both ask Delta for the same next version of the state table at once, so what
   keeps one winner is the log store's put-if-absent, not a re-read that happened to see the other's
   commit;
4. each touches ``done-<name>``, waits for ``done-<peer>`` and reads XPENDING (summary and every entry),
   so both report the state after both claims.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.clock import ManualClock
from tests.spark.s3_worker import report_and_stop, s3a_settings

T0 = 1_700_000_000_000
HOUR = 3_600_000
ENTRIES = 200
WAIT_S = 300.0


def dynamodb_log_store_settings(table: str, endpoints_jar: str, log_store_jar: str | None) -> dict[str, str]:
    """Spark settings that make Delta commit to ``s3a://`` through S3DynamoDBLogStore, its DynamoDB
    client pointed at moto by the AWS SDK v1 endpoints override in ``endpoints_jar`` (see
    ``write_endpoints_override``). The log store's classes come from ``log_store_jar``, or, when it is
    None, from the published ``io.delta:delta-storage-s3-dynamodb``; the AWS SDK v1's DynamoDB client
    from Maven either way."""
    from streamclaim_spark.core.object_store import S3_DYNAMODB_LOG_STORE, S3A_PACKAGE
    from streamclaim_spark.state.session import DELTA_PACKAGE
    from tests.jars.log_store_jar import AWS_SDK_PACKAGE, LOG_STORE_PACKAGE

    packages = [DELTA_PACKAGE, S3A_PACKAGE, AWS_SDK_PACKAGE]
    jars = [endpoints_jar]
    if log_store_jar is None:
        packages.append(LOG_STORE_PACKAGE)
    else:
        jars.append(log_store_jar)

    prefix = "spark.io.delta.storage.S3DynamoDBLogStore"
    return {
        "spark.delta.logStore.s3a.impl": S3_DYNAMODB_LOG_STORE,
        f"{prefix}.ddb.tableName": table,
        f"{prefix}.ddb.region": "us-east-1",
        # SDK v1 class (the log store's ReflectionUtils instantiates it with no arguments): reads
        # AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, which the test sets to moto's dummy keys.
        f"{prefix}.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
        "spark.jars": ",".join(jars),
        # The log store's client speaks HTTPS whatever the endpoint file says (the protocol comes from
        # its ClientConfiguration, which the log store leaves at HTTPS), so moto's DynamoDB is served
        # over TLS with a self-signed certificate; this SDK v1 switch accepts it. It touches the v1
        # clients only: S3A (SDK v2) keeps talking plain HTTP to the S3 server.
        "spark.driver.extraJavaOptions": "-Dcom.amazonaws.sdk.disableCertChecking=true",
        "spark.jars.packages": ",".join(packages),
    }


def write_endpoints_override(jar: Path, host_port: str) -> Path:
    """Writes the jar ``jar`` holding only ``com/amazonaws/partitions/override/endpoints.json``, which
    sends the AWS SDK v1's DynamoDB clients in region us-east-1 to ``host_port``; returns ``jar``.

    S3DynamoDBLogStore builds its ``AmazonDynamoDBClient`` from a region alone (no endpoint setting), and
    the AWS SDK v1 resolves a region's endpoint from the partitions file among its classes: its
    PartitionsLoader reads this override resource, through the class loader that loaded the SDK, instead
    of the bundled ``com/amazonaws/partitions/endpoints.json`` when it exists. The override replaces the
    whole file (the format of aws-java-sdk-core 1.12.x, version 3): one ``aws`` partition with one region,
    ``us-east-1``, where DynamoDB is at ``host_port``. Only SDK v1 clients read it, and in these drivers
    only the log store's DynamoDB client is one (S3A's clients are SDK v2).

    A jar in ``spark.jars`` rather than a folder in ``spark.driver.extraClassPath``: Spark loads it with
    the packages' jars, the SDK's among them, so the SDK finds it; and the JVM's own class path stays the
    one the class archive (setup.sh, jvm_archive.py) was dumped with, which a longer one disables.
    """
    partitions = {
        "version": 3,
        "partitions": [
            {
                "partition": "aws",
                "partitionName": "moto on loopback",
                "dnsSuffix": "amazonaws.com",
                "regionRegex": "^us\\-east\\-1$",
                "defaults": {
                    "hostname": "{service}.{region}.{dnsSuffix}",
                    "protocols": ["https"],
                    "signatureVersions": ["v4"],
                },
                "regions": {"us-east-1": {"description": "US East (N. Virginia)"}},
                "services": {
                    "dynamodb": {
                        "endpoints": {
                            "us-east-1": {
                                "hostname": host_port,
                                "protocols": ["https"],
                                "credentialScope": {"region": "us-east-1"},
                            }
                        }
                    }
                },
            }
        ],
    }
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("com/amazonaws/partitions/override/endpoints.json", json.dumps(partitions, indent=2))
    return jar


class _LostRaces(logging.Handler):
    """Keeps the retry loop's "lost a commit race (<error type>)" lines (engine/retries.py)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _meet_at_first_commit(barrier: Path, name: str, peer: str, met: list[float]) -> Callable[[Any], None]:
    """A ``delta_txn.before_commit`` hook that holds this process' first transaction until the peer's
    first one is held too (it appends the release time to ``met``); later commits pass."""

    def hook(_transaction: Any) -> None:
        if met:
            return
        _touch(barrier, f"commit-{name}")
        _wait_for(barrier, f"commit-{peer}")
        met.append(time.time())

    return hook


def _touch(barrier: Path, name: str) -> None:
    (barrier / name).touch()


def _wait_for(barrier: Path, *names: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all((barrier / name).exists() for name in names):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_S:.0f} s for {names} in {barrier}")
        time.sleep(0.01)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", required=True, help="the S3 server (plain HTTP)")
    parser.add_argument("--path", required=True, help="the store, s3a://...")
    parser.add_argument("--table", required=True, help="the DynamoDB table of the log store")
    parser.add_argument("--endpoints-jar", required=True, help="jar with the SDK v1 endpoints override")
    parser.add_argument("--log-store-jar", default=None, help="S3DynamoDBLogStore's jar (default: from Maven)")
    parser.add_argument("--barrier", required=True, type=Path, help="folder where the two drivers meet")
    parser.add_argument("--name", required=True, help="this driver's consumer name")
    parser.add_argument("--peer", required=True, help="the other driver's consumer name")
    parser.add_argument("--seed", action="store_true", help="this driver creates and seeds the store")
    args = parser.parse_args(argv)
    barrier: Path = args.barrier

    if not args.seed:
        _wait_for(barrier, "session-up")

    from pyspark.sql import functions as F

    from streamclaim_spark import StreamStore
    from streamclaim_spark.state.delta_txn import before_commit
    from streamclaim_spark.state.session import build_session
    from tests.fixtures import TEST_SPARK_CONF

    log_store = dynamodb_log_store_settings(args.table, args.endpoints_jar, args.log_store_jar)
    conf = {**TEST_SPARK_CONF, **s3a_settings(args.endpoint), **log_store}
    spark = build_session(master="local[2]", app_name=f"s3-multi-writer-{args.name}", conf=conf)
    result: dict[str, Any] = {"name": args.name}
    clock = ManualClock(T0)
    if args.seed:
        _touch(barrier, "session-up")
        store = StreamStore.open(args.path, spark=spark, clock=clock)
        store.append("s", spark.range(ENTRIES).select(F.col("id").cast("string").alias("n")))
        store.execute("XGROUP", "CREATE", "s", "g", "0")
        store.deliver("s", "g", "dead")
        result["ids"] = [entry[0] for entry in store.execute("XRANGE", "s", "-", "+")]
        _touch(barrier, "seeded")
    else:
        _wait_for(barrier, "seeded")
        store = StreamStore.open(args.path, spark=spark, clock=clock)
    result["mode"] = store.safety.mode
    result["log_store"] = store.safety.log_store
    result["xpending_before"] = store.execute("XPENDING", "s", "g")

    lost_races = _LostRaces()
    retries_log = logging.getLogger("streamclaim_spark.engine.retries")
    retries_log.setLevel(logging.INFO)
    retries_log.addHandler(lost_races)
    clock.now = T0 + HOUR
    _touch(barrier, f"ready-{args.name}")
    _wait_for(barrier, f"ready-{args.peer}")
    met: list[float] = []
    started = time.time()
    with before_commit(_meet_at_first_commit(barrier, args.name, args.peer, met)):
        reply = store.execute("XAUTOCLAIM", "s", "g", args.name, str(HOUR // 2), "0", "COUNT", "1000")
    result["claim_window"] = [started, time.time()]
    result["met_at_commit"] = met
    result["attempts"] = store.last_attempts
    result["lost_races"] = lost_races.messages
    result["claimed"] = [entry[0] for entry in reply[1]]
    result["deleted"] = reply[2]

    _touch(barrier, f"done-{args.name}")
    _wait_for(barrier, f"done-{args.peer}")
    result["xpending_after"] = store.execute("XPENDING", "s", "g")
    result["pending_after"] = [
        [entry_id, consumer, int(deliveries)]
        for entry_id, consumer, _idle, deliveries in store.execute("XPENDING", "s", "g", "-", "+", "1000")
    ]
    return report_and_stop(spark, result)


if __name__ == "__main__":
    raise SystemExit(main())

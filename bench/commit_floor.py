"""The floor of one small Delta commit from the driver, by engine and file system (docs/DESIGN.md, "One engine").

Run from the repo root (nothing else running)::

    .venv/bin/python -m bench.commit_floor --commits 30

Each engine appends one 1-row Parquet file per commit to a fresh table and commits it, ``--commits``
times, on a local folder and on S3 (moto's server on loopback, single-writer mode):

- ``jvm``: Delta's own ``OptimisticTransaction`` through py4j, as ``state/delta_txn.py`` drives it: the
  file written by pyarrow (to S3 through the table's Hadoop file system), an ``AddFile`` and one commit.
- ``deltalake``: delta-rs' Python package: ``write_deltalake(mode="append")`` writes the file and commits.

Prints one JSON object: per engine and file system, the p50 and p90 of a commit in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from bench.moto import moto_server

BUCKET = "floor"
SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])


def timed(commits: int, commit: Callable[[int], None]) -> dict[str, float]:
    """p50/p90 milliseconds of ``commit(i)`` over ``commits`` calls, after two untimed warm-up calls."""
    for i in range(2):
        commit(-1 - i)
    took = []
    for i in range(commits):
        started = time.perf_counter()
        commit(i)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return {"p50_ms": round(statistics.median(took), 1), "p90_ms": round(took[int(len(took) * 0.9) - 1], 1)}


def jvm_commits(spark: object, path: str, commits: int) -> dict[str, float]:
    """Delta's JVM transaction: one pyarrow file, uploaded through Hadoop where remote, one commit."""
    from pyspark.sql import SparkSession

    from streamclaim_spark.state.scala_seqs import scala_seq

    assert isinstance(spark, SparkSession)
    spark.createDataFrame([], "k string, v long").write.format("delta").save(path)
    jvm = spark._jvm
    assert jvm is not None
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    write = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")
    none = jvm.scala.Option.empty()

    def commit(i: int) -> None:
        txn = delta_log.startTransaction()
        name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        with tempfile.TemporaryDirectory() as folder:
            local = os.path.join(folder, name)
            pq.write_table(pa.table({"k": [str(i)], "v": [i]}, schema=SCHEMA), local)
            size = os.path.getsize(local)
            target = jvm.org.apache.hadoop.fs.Path(f"{path}/{name}")
            source = jvm.org.apache.hadoop.fs.Path(f"file://{local}")
            jvm.org.apache.hadoop.fs.FileUtil.copy(
                source.getFileSystem(hadoop_conf), source, target.getFileSystem(hadoop_conf), target, True, hadoop_conf
            )
        add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": int(time.time() * 1000)}
        action = jvm.org.apache.spark.sql.delta.actions.Action.fromJson(
            json.dumps({"add": {**add, "dataChange": True}})
        )
        operation = write(jvm.org.apache.spark.sql.SaveMode.Append, none, none, none, none, none, none, none, none)
        txn.commit(scala_seq(jvm, [action]), operation)

    return timed(commits, commit)


def deltalake_commits(uri: str, storage_options: dict[str, str] | None, commits: int) -> dict[str, float]:
    """delta-rs: ``write_deltalake`` appends one 1-row file and commits."""
    from deltalake import write_deltalake

    write_deltalake(uri, pa.table({"k": [], "v": []}, schema=SCHEMA), storage_options=storage_options)

    def commit(i: int) -> None:
        rows = pa.table({"k": [str(i)], "v": [i]}, schema=SCHEMA)
        write_deltalake(uri, rows, mode="append", storage_options=storage_options)

    return timed(commits, commit)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--port", type=int, default=5077)
    args = parser.parse_args(argv)

    from streamclaim_spark.state.session import build_session
    from tests.spark.s3_worker import s3a_settings

    results: dict[str, dict[str, float]] = {}
    with moto_server(args.port, BUCKET) as endpoint, tempfile.TemporaryDirectory() as folder:
        spark = build_session(conf={"spark.ui.enabled": "false", **s3a_settings(endpoint)})
        results["jvm local"] = jvm_commits(spark, f"{folder}/jvm", args.commits)
        results["jvm s3a"] = jvm_commits(spark, f"s3a://{BUCKET}/jvm", args.commits)
        results["deltalake local"] = deltalake_commits(f"{folder}/rs", None, args.commits)
        options = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",  # single writer, as the JVM's S3SingleDriverLogStore
        }
        results["deltalake s3"] = deltalake_commits(f"s3://{BUCKET}/rs", options, args.commits)
        spark.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

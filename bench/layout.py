"""How a store's state table lies on disk: files per partition and the ID range each file covers.

Data skipping can only prune files whose ``id_ms``/``id_seq`` ranges are narrow, so this is the first
thing to look at when a claim on a big PEL reads more than it should::

    .venv/bin/python -m bench.layout /path/to/store
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.state.session import build_session
from streamclaim_spark.state.tables import table_path


def files(spark: SparkSession, store_path: str) -> DataFrame:
    """One row per data file of the state table: partition, rows, size, min/max of the stored ID."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    state = table_path(store_path, C.STATE_TABLE_DIR)
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, state)
    snapshot = log.update(False, getattr(log, "update$default$2")(), getattr(log, "update$default$3")())
    adds = DataFrame(snapshot.allFiles().toDF(), spark)
    stats = F.from_json(
        "stats",
        "numRecords long, minValues struct<id_ms long, id_seq long, row_kind string>, "
        "maxValues struct<id_ms long, id_seq long, row_kind string>",
    )
    return adds.select(
        # The Delta partition: a bucket (schema.bucket_of), or partition_id itself on a store made before buckets.
        F.coalesce(F.col("partitionValues").getItem(C.BUCKET), F.col("partitionValues").getItem(C.PARTITION_ID)).alias(
            "partition"
        ),
        "path",
        "size",
        stats.alias("s"),
        F.col("deletionVector").isNotNull().alias("has_dv"),
    ).select(
        "partition",
        "path",
        "size",
        "has_dv",
        F.col("s.numRecords").alias("rows"),
        F.col("s.minValues.row_kind").alias("min_kind"),
        F.col("s.maxValues.row_kind").alias("max_kind"),
        F.struct(F.col("s.minValues.id_ms"), F.col("s.minValues.id_seq")).alias("min_id"),
        F.struct(F.col("s.maxValues.id_ms"), F.col("s.maxValues.id_seq")).alias("max_id"),
    )


def summary(spark: SparkSession, store_path: str) -> DataFrame:
    """Per Delta partition (bucket): files, rows, bytes, files carrying deletion vectors, smallest and largest file."""
    frame = files(spark, store_path)
    return frame.groupBy("partition").agg(
        F.count("*").alias("files"),
        F.sum("rows").alias("rows"),
        F.sum("size").alias("bytes"),
        F.sum(F.col("has_dv").cast("int")).alias("files_with_dv"),
        F.min("rows").alias("min_rows_per_file"),
        F.max("rows").alias("max_rows_per_file"),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    args = parser.parse_args(argv)
    spark = build_session()
    summary(spark, args.store).show(truncate=False)
    files(spark, args.store).orderBy("partition", "min_id").show(200, truncate=False)


if __name__ == "__main__":
    main()

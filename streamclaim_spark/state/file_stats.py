"""Where an ordered read with a limit can stop, from the per-file statistics in Delta's log.

An ordered read of the first N rows (XAUTOCLAIM's scan of COUNT x 10 PEL entries, ``XPENDING - + 10``,
``XRANGE - + COUNT 10``) has no bound on the far side that Delta can skip files by, so Spark reads every
file of the partition to keep its top N: at 10M pending entries, 100 files for 10,000 rows. The log
knows each file's row count and its smallest and largest ID. Walking the files in ID order until they
hold N rows gives an ID past which the first N rows cannot lie if those files hold N matching rows;
the read bounded there skips the rest. The bound is a hint only: the caller checks that the bounded read
returned N rows and reads unbounded otherwise (the files also hold other groups' and kinds' rows, and
the statistics may come from a newer version than the read's), so a wrong hint costs a query, never a row.

Reading the statistics is one Spark job over the log state, worth it only for large tables: it is done
when the table's checksum file (read without a job) says it holds ``NARROW_FROM_BYTES`` or more.
Classic sessions only; on Spark Connect reads are never narrowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Need, Scan
from streamclaim_spark.core.partitions import bucket_of, group_partition, stream_partition
from streamclaim_spark.state.columns import stored_id
from streamclaim_spark.state.delta_io import delta_log, is_connect

# Tables below this size are read whole faster than their statistics are read (a 1M-entry store, its
# PEL included, is about 18 MB; a test's store a few KB). Tests lower it to exercise narrowing.
NARROW_FROM_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class FileRange:
    """One data file as the log describes it: its row count and its smallest and largest stored ID."""

    rows: int
    low: StreamId
    high: StreamId


def narrowed(scan: Scan, files: Sequence[FileRange]) -> Scan | None:
    """``scan`` with its far bound moved in as far as files lying wholly inside the range still hold
    ``scan.limit`` rows, or None when no bound short of the scan's own would (or there is no limit).

    Only files wholly inside count: a file whose IDs span much of the range (a MERGE rewrites the files
    it touches into files that need not be ID-ordered) says nothing of how many of its rows lie below
    the bound, though the bounded read still reads it.
    """
    if scan.limit is None:
        return None
    overlapping = [f for f in files if f.high >= scan.low and f.low <= scan.high]
    rows = 0
    if scan.reverse:  # the last rows first: files by largest smallest ID
        for file in sorted(overlapping, key=lambda f: f.low, reverse=True):
            rows += file.rows if file.high <= scan.high else 0
            if rows >= scan.limit:
                return dataclasses.replace(scan, low=file.low) if file.low > scan.low else None
        return None
    for file in sorted(overlapping, key=lambda f: f.high):
        rows += file.rows if file.low >= scan.low else 0
        if rows >= scan.limit:
            return dataclasses.replace(scan, high=file.high) if file.high < scan.high else None
    return None


def table_bytes(spark: SparkSession, table_path: str) -> int | None:
    """The table's size at its newest known version from the version's checksum file (no Spark job),
    None on Spark Connect or when the checksum is missing."""
    if is_connect(spark):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log = delta_log(spark, table_path)
    version = log.unsafeVolatileSnapshot().version()
    if version < 0:
        return None
    checksum = log.readChecksum(version, jvm.scala.Option.apply(None))
    return int(checksum.get().tableSizeBytes()) if checksum.isDefined() else None


def file_ranges(spark: SparkSession, table_path: str, partition_id: str, kind: str, scan: Scan) -> list[FileRange]:
    """The files of the bucket of ``partition_id``'s ``kind`` whose statistics admit rows of that kind there
    (and of the scan's owner and delivery cutoff), in one query over Delta's cached log state."""
    files = DataFrame(delta_log(spark, table_path).unsafeVolatileSnapshot().withStats(), spark)
    low, high = (F.col("stats.minValues"), F.col("stats.maxValues"))
    in_bucket = F.col("partitionValues")[C.BUCKET] == bucket_of(partition_id, kind)
    admits = in_bucket & F.col("stats.numRecords").isNotNull()
    for column, value in ((C.PARTITION_ID, partition_id), (C.ROW_KIND, kind), (C.OWNER, scan.owner)):
        if value is not None:
            admits = admits & (low[column] <= F.lit(value)) & (high[column] >= F.lit(value))
    if scan.delivered_at_or_before is not None:
        admits = admits & (low[C.DELIVERY_TIME_MS] <= F.lit(scan.delivered_at_or_before))
    rows = (
        files.where(admits & low[C.ID_MS].isNotNull() & high[C.ID_MS].isNotNull())
        .select(F.col("stats.numRecords").alias("rows"), low.alias("low"), high.alias("high"))
        .collect()
    )
    return [FileRange(row["rows"], stored_id(row["low"]), stored_id(row["high"])) for row in rows]


def narrowed_scan(spark: SparkSession, table_path: str, partition_id: str, kind: str, scan: Scan) -> Scan | None:
    """``narrowed`` over the files of ``partition_id``, when the table is large enough to be worth it."""
    if scan.limit is None:
        return None
    size = table_bytes(spark, table_path)
    if size is None or size < NARROW_FROM_BYTES:
        return None
    return narrowed(scan, file_ranges(spark, table_path, partition_id, kind, scan))


def bounded_needs(
    spark: SparkSession, table_path: str, needs: Sequence[Need], scan: tuple[str, str, str | None, Scan] | None
) -> list[Need] | None:
    """``needs`` with their range read (``scan``: kind, stream, group, range) bounded by ``narrowed_scan``,
    None when the read has no range or no bound is worth reading the statistics for."""
    if scan is None:
        return None
    kind, key, group, wanted = scan
    partition_id = stream_partition(key) if group is None else group_partition(key, group)
    bounded = narrowed_scan(spark, table_path, partition_id, kind, wanted)
    if bounded is None:
        return None
    if kind == C.KIND_ENTRY:
        return [
            dataclasses.replace(n, entry_scan=bounded) if n.entry_scan == wanted and n.key == key else n for n in needs
        ]
    return [
        dataclasses.replace(n, pending_scan=bounded) if n.pending_scan == wanted and n.key == key else n for n in needs
    ]

"""What a table takes on disk, what its newest version needs, and what a run removed: the report's numbers.

Files are listed with Spark's own file listing (the ``binaryFile`` source, names and lengths only: no file
is read), which works on any file system the store does and on Spark Connect. Spark's listing skips hidden
names (``_delta_log``, ``.crc`` files), so a table's folder lists its data files and ``_delta_log`` lists
the log's commits and checkpoints. A listing is pinned (``localCheckpoint``) so that the files gone by the
end of the run are the first listing less the second, exactly, whatever writers added meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.state.delta_io import quoted_path


@dataclass(frozen=True)
class Usage:
    """Files and bytes."""

    files: int
    bytes: int

    def to_json(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes}


@dataclass(frozen=True)
class Listing:
    """A folder's files as listed once (a pinned frame of path and length), and their total."""

    files: DataFrame
    usage: Usage

    def gone_by(self, later: Listing) -> Usage:
        """The files of this listing that ``later`` no longer has (one Spark job)."""
        return _total(self.files.join(later.files.select("path"), "path", "left_anti"))


@dataclass(frozen=True)
class TableListing:
    """One table's data files on disk, the files its newest version references (live), and its log."""

    data: Listing
    live: Usage
    log: Listing

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"data": self.data.usage.to_json(), "live": self.live.to_json(), "log": self.log.usage.to_json()}


def table_listing(spark: SparkSession, path: str) -> TableListing:
    """``path``'s data files, live files and log files (a few small Spark jobs)."""
    detail = spark.sql(f"DESCRIBE DETAIL {quoted_path(path)}").select("numFiles", "sizeInBytes").first()
    assert detail is not None
    live = Usage(int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0))
    return TableListing(_listed(spark, path), live, _listed(spark, path.rstrip("/") + "/_delta_log"))


def _listed(spark: SparkSession, folder: str) -> Listing:
    files = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(folder)
        .select("path", "length")
        .localCheckpoint()
    )
    return Listing(files, _total(files))


def _total(files: DataFrame) -> Usage:
    row = files.agg(F.count(F.lit(1)).alias("files"), F.coalesce(F.sum("length"), F.lit(0)).alias("bytes")).first()
    assert row is not None
    return Usage(int(row["files"]), int(row["bytes"]))

"""The streaming queries a store's history must still serve: each one's restart version.

A ``streamclaim`` query restarts from its checkpoint by reading its last batch's version by time travel
(streaming/source.py), and Delta refuses time travel to a version older than the table's file retention
(other than the newest). So a retention shorter than the age of a query's last batch leaves that query
unable to restart: maintenance finds each query's last batch in the table's history (the mark its commit
carries, core/reader_marks.py) and refuses such a retention, naming the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from streamclaim_spark.core.reader_marks import BATCH_OPERATION, ReaderMark, operation_mark
from streamclaim_spark.core.retention import describe_ms
from streamclaim_spark.state.delta_io import AUTO_COMPACTION_OPERATION, quoted_path


@dataclass(frozen=True)
class StreamingReader:
    """A query as the history shows it: its mark, and the version it restarts from with its commit time (Unix ms)."""

    mark: ReaderMark
    version: int
    committed_at_ms: int

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.committed_at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.mark.describe()} (restarts from version {self.version}, committed {when})"

    def to_json(self) -> dict[str, object]:
        return {
            "group": self.mark.group,
            "consumer": self.mark.consumer,
            "version": self.version,
            "committed_at_ms": self.committed_at_ms,
        }


def streaming_readers(spark: SparkSession, state_path: str) -> list[StreamingReader]:
    """Every query whose batches the state table's history still holds, at the version it restarts from.

    A query's offset names the commit that planned its last batch; the commit after it may only have
    acknowledged that batch (the last call of an AvailableNow run commits the acknowledgement and keeps
    the offset). The history cannot tell the two apart, so a query's restart version is taken as the
    older of its two newest batch commits. One Spark job over the log's commit infos, grouped there.
    """
    history = spark.sql(f"DESCRIBE HISTORY {quoted_path(state_path)}")
    # Delta's auto compaction commits right after a batch, in the same call, with the batch's label.
    batches = F.col("userMetadata").startswith(BATCH_OPERATION + " {") & (
        F.col("operation") != AUTO_COMPACTION_OPERATION
    )
    marked = history.where(batches).select(
        F.regexp_extract("userMetadata", r"^(.*) [^ ]*$", 1).alias("mark"), "version", "timestamp"
    )
    newest_two = marked.withColumn(
        "rank", F.row_number().over(Window.partitionBy("mark").orderBy(F.col("version").desc()))
    ).where(F.col("rank") <= 2)
    restart = newest_two.groupBy("mark").agg(F.min(F.struct("version", "timestamp")).alias("restart")).collect()
    readers = []
    for row in restart:
        mark = operation_mark(row["mark"])
        if mark is not None:
            committed = row["restart"]["timestamp"].replace(tzinfo=UTC)
            readers.append(StreamingReader(mark, int(row["restart"]["version"]), int(committed.timestamp() * 1000)))
    return sorted(readers, key=lambda reader: reader.version)


def stranded_readers(
    readers: list[StreamingReader], newest_version: int, now_ms: int, retention_ms: int
) -> list[StreamingReader]:
    """The readers a retention of ``retention_ms`` would leave unable to restart: Delta's own rule, a
    version other than the newest, committed before ``now_ms - retention_ms``."""
    horizon = now_ms - retention_ms
    return [r for r in readers if r.version != newest_version and r.committed_at_ms < horizon]


def refusal(stranded: list[StreamingReader], retention_ms: int, now_ms: int) -> str:
    """Why maintenance refuses, and the ways on."""
    oldest = min(reader.committed_at_ms for reader in stranded)
    needed = describe_ms(-(-(now_ms - oldest) // 60_000) * 60_000)
    names = "; ".join(reader.describe() for reader in stranded)
    return (
        f"a history retention of {describe_ms(retention_ms)} would leave {names} unable to restart from its "
        f"checkpoint (Delta refuses time travel past the retention). Let the query plan a new batch first, "
        f"give a retention of at least {needed} (--retain / store.history_retention), or pass --ignore-readers "
        "if the query is stopped for good"
    )

"""The three things maintenance does to one Delta table: compact, vacuum, and trim the log.

- **Compaction** is Delta's OPTIMIZE restricted to the files small commits leave: only files under
  ``commit_settings.small_file_bytes`` (the size auto compaction counts as small), only in buckets that
  hold ``MIN_SMALL_FILES`` of them (auto compaction's own threshold: what it skipped), are binned, within
  a bucket (a Delta partition, so heads stay apart from entries and PEL rows), and the result is capped
  at the store's rows per file; full capped files, ID-ordered by the bulk writers, are never touched. A
  compaction that loses a race with a writer is tried again on the new version, then skipped: it never
  makes a writer fail for long (a writer that loses to it re-runs, as after any lost race).
- **Vacuum** removes the data files a commit replaced once the table's file retention has passed
  since (Delta's VACUUM LITE: the files the log's removals name, never a file no commit named), and
  files no version references at all — a transaction's files before it commits, those of one that died
  or lost its race — only once they are ``ORPHAN_RETENTION_MS`` old, far past the longest a transaction
  may stay open (``MAX_TRANSACTION_MS``): so a commit never names a file maintenance removed, whatever
  the retention (docs/DESIGN.md, "What maintenance may remove"). Neither writes VACUUM's own log
  entries (two commits per run on local, S3 and Azure file systems: a store that needs nothing would
  grow its log at every run); the summary is the record.
- **The log** loses commit and checkpoint files older than the log retention, up to the newest
  checkpoint that is older (Delta's own cleanup, asked to cut at the minute instead of the day it
  otherwise rounds down to). It needs the driver's JVM: on Spark Connect Delta's cleanup runs only after
  its own checkpoints, at day granularity.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.retention import (
    HOUR_MS,
    ORPHAN_RETENTION_MS,
    RETENTION_PROPERTIES,
    delta_interval,
    file_retention_ms,
    interval_ms,
)
from streamclaim_spark.state.commit_settings import USER_METADATA, small_file_bytes
from streamclaim_spark.state.conflicts import is_lost_race
from streamclaim_spark.state.delta_io import (
    commit_info,
    delta_log,
    is_connect,
    quoted_path,
    table_properties,
    updated_snapshot,
)
from streamclaim_spark.state.small_files import AUTO_COMPACT_MIN_FILES

# A compaction that lost its race this often in a row is left for the next run.
COMPACTION_ATTEMPTS = 3
# A bucket is compacted once it holds as many small files as make auto compaction fold it (50): what
# auto compaction skipped (it is checked only where a commit adds small files). Compacting fewer would
# leave the files it replaced on disk for the retention, which at a store's few live files is many times
# the live data: after a 10-minute soak, 12x live after one run with 10 (1.0x after the next), for a
# read of a bucket's files that costs little (bench.soak; CHANGELOG.md, "Maintenance").
MIN_SMALL_FILES = AUTO_COMPACT_MIN_FILES
OPERATION = "MAINTAIN"


@dataclass(frozen=True)
class Compaction:
    """What one compaction did: small files replaced by fewer, or why it did nothing."""

    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    skipped: str | None = None  # lost every race

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {
            "files_removed": self.files_removed,
            "files_added": self.files_added,
            "bytes_removed": self.bytes_removed,
            "bytes_added": self.bytes_added,
        }
        if self.skipped is not None:
            found["skipped"] = self.skipped
        return found


@contextlib.contextmanager
def settings(spark: SparkSession, values: dict[str, str]) -> Iterator[None]:
    """``values`` set in ``spark`` for the block, then put back (the session may be a user's)."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def set_retention(spark: SparkSession, path: str, retention_ms: int) -> bool:
    """Stores ``retention_ms`` as the table's file and log retention; False (no commit) when it has it."""
    properties = table_properties(spark, path)
    current = [properties.get(name) for name in RETENTION_PROPERTIES]
    if all(value is not None and interval_ms(value) == retention_ms for value in current):
        return False
    pairs = ", ".join(f"'{name}' = '{delta_interval(retention_ms)}'" for name in RETENTION_PROPERTIES)
    with settings(spark, {USER_METADATA: OPERATION}):
        spark.sql(f"ALTER TABLE {quoted_path(path)} SET TBLPROPERTIES ({pairs})")
    return True


def compact(spark: SparkSession, path: str, rows_per_file: int) -> Compaction:
    """Bins the small files of each bucket holding ``MIN_SMALL_FILES`` or more into capped files (see the
    module); a lost race is retried. No bucket that many: no commit."""
    small = small_file_bytes(rows_per_file) if rows_per_file else small_file_bytes(C.DEFAULT_ROWS_PER_FILE)
    buckets = crowded_buckets(spark, path, small)
    if buckets is not None and not buckets:
        return Compaction()
    # Every bucket on Spark Connect (None), and an unpartitioned table's only "bucket", need no filter.
    named = [bucket for bucket in buckets or () if bucket is not None]
    where = " WHERE " + " OR ".join(f"{C.BUCKET} = '{bucket}'" for bucket in named) if named else ""
    values = {
        USER_METADATA: OPERATION,
        "spark.databricks.delta.optimize.minFileSize": str(small),
        "spark.sql.files.maxRecordsPerFile": str(rows_per_file),
    }
    last_race = ""
    for _ in range(COMPACTION_ATTEMPTS):
        try:
            with settings(spark, values):
                row = spark.sql(f"OPTIMIZE {quoted_path(path)}{where}").first()
        except Exception as error:
            if not is_lost_race(error):
                raise
            last_race = type(error).__name__
            continue
        assert row is not None
        metrics = row["metrics"]
        return Compaction(
            int(metrics["numFilesRemoved"]),
            int(metrics["numFilesAdded"]),
            int(metrics["filesRemoved"]["totalSize"]),
            int(metrics["filesAdded"]["totalSize"]),
        )
    return Compaction(skipped=f"lost {COMPACTION_ATTEMPTS} races with writers ({last_race}); left for the next run")


def crowded_buckets(spark: SparkSession, path: str, small: int) -> list[str | None] | None:
    """The buckets (None: the whole of an unpartitioned table) holding ``MIN_SMALL_FILES`` or more files
    under ``small`` bytes, read from the newest snapshot's file list (one small Spark job); None on Spark
    Connect, where that list is out of reach (then every bucket is binned)."""
    if is_connect(spark):
        return None
    files = DataFrame(updated_snapshot(spark, path).allFiles().toDF(), spark)
    counts = (
        files.where(F.col("size") < small)
        .groupBy(F.col("partitionValues").getItem(C.BUCKET).alias("bucket"))
        .count()
        .where(F.col("count") >= MIN_SMALL_FILES)
        .collect()
    )
    return sorted((row["bucket"] for row in counts), key=lambda bucket: bucket or "")


@dataclass(frozen=True)
class Vacuum:
    """What one vacuum removed besides the replaced files (those the folder's listing counts)."""

    orphans_removed: int = 0
    lite_repaired: bool = False  # Delta's LITE bookkeeping was behind the log (see ``vacuum``)


def vacuum(spark: SparkSession, path: str, now_ms: int | None = None) -> Vacuum:
    """Removes the replaced files past the table's retention and the orphans past ``ORPHAN_RETENTION_MS``
    (see the module).

    LITE refuses (DELTA_CANNOT_VACUUM_LITE) when commits were cut from the log since its last run, or
    before its first, so their removals are out of its reach: its mark is then set to the log's first
    commit, and the files those cut commits replaced wait for the orphan sweep, which judges them by age.
    On Spark Connect, out of reach of the JVM, a full VACUUM keeping ``ORPHAN_RETENTION_MS`` does both.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    with settings(spark, {"spark.databricks.delta.vacuum.logging.enabled": "false"}):
        if is_connect(spark):
            return _full_vacuum(spark, path)
        repaired = False
        try:
            spark.sql(f"VACUUM {quoted_path(path)} LITE").collect()
        except Exception as error:
            if "DELTA_CANNOT_VACUUM_LITE" not in str(error):
                raise
            _restart_lite_at_log_start(spark, path)
            repaired = True
        return Vacuum(_sweep_orphans(spark, path, now_ms), repaired)


def _full_vacuum(spark: SparkSession, path: str) -> Vacuum:
    """A full VACUUM that keeps every file younger than ``ORPHAN_RETENTION_MS`` or the table's retention,
    whichever is longer (whole hours, as RETAIN takes them): on Spark Connect, the one safe way."""
    keep_ms = max(ORPHAN_RETENTION_MS, file_retention_ms(table_properties(spark, path)))
    hours = math.ceil(keep_ms / HOUR_MS)
    # Delta ignores RETAIN unless this is off, and would vacuum at the table's (short) retention instead.
    with settings(spark, {"spark.databricks.delta.vacuum.retentionWindowIgnore.enabled": "false"}):
        spark.sql(f"VACUUM {quoted_path(path)} RETAIN {hours} HOURS").collect()
    return Vacuum()


def _restart_lite_at_log_start(spark: SparkSession, path: str) -> None:
    """Records the log's first commit as the point LITE has vacuumed to, so its next run reads the log
    from there instead of refusing for ever (Delta's own mark, ``_delta_log/_last_vacuum_info``)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta = jvm.org.apache.spark.sql.delta
    log = delta_log(spark, path)
    first = delta.DeltaHistoryManager.getEarliestDeltaFile(log)
    since = jvm.scala.Option.apply(jvm.java.lang.Long.valueOf(int(first)))
    last_vacuum_info = getattr(getattr(delta.commands, "LastVacuumInfo$"), "MODULE$")
    last_vacuum_info.persistLastVacuumInfo(delta.commands.LastVacuumInfo(since), log)


def _sweep_orphans(spark: SparkSession, path: str, now_ms: int) -> int:
    """Deletes the files a full VACUUM would (no version within the retention names them) that are older
    than ``ORPHAN_RETENTION_MS`` by their own modification time; returns how many. VACUUM only lists
    them (DRY RUN: it records nothing, so LITE's mark stays), and each one's age is read again before it
    goes: the rule holds whatever retention VACUUM listed them by."""
    listed = [row[0] for row in spark.sql(f"VACUUM {quoted_path(path)} DRY RUN").collect()]
    if not listed:
        return 0
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    removed = 0
    for name in listed:
        file = jvm.org.apache.hadoop.fs.Path(name)
        fs = file.getFileSystem(hadoop_conf)
        try:
            status = fs.getFileStatus(file)
        except Py4JJavaError:
            continue  # gone meanwhile
        if status.isFile() and status.getModificationTime() < now_ms - ORPHAN_RETENTION_MS and fs.delete(file, False):
            removed += 1
    return removed


def clean_log(spark: SparkSession, path: str, retention_ms: int, now_ms: int) -> bool:
    """Deletes log files older than the log retention (see the module); False on Spark Connect.

    Delta deletes only what lies before a checkpoint that is itself expired, and writes one every 100
    commits: a store that commits rarely would keep its log for ever. So when commits older than the
    retention follow the newest checkpoint, a checkpoint of the newest version is written (a file, not a
    commit), which the next run's cleanup can cut at once it has aged.
    """
    if is_connect(spark):
        return False
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log = delta_log(spark, path)
    none = jvm.scala.Option.empty()
    snapshot = updated_snapshot(spark, path)
    checkpoint = int(snapshot.logSegment().checkpointProvider().version())
    first_after = commit_info(spark, path, checkpoint + 1) if snapshot.version() > checkpoint else {}
    if int(first_after.get("timestamp", now_ms)) < now_ms - retention_ms:
        log.checkpoint(snapshot, none)
    minute = jvm.org.apache.spark.sql.delta.TruncationGranularity.MINUTE()
    log.cleanUpExpiredLogs(snapshot, none, none, minute)
    return True

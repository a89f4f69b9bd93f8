"""``maintain``: one maintenance run over a store's tables, and its report.

A run sets the history retention when it is given (each table's file and log retention), refuses first
if that retention would strand a streaming query (readers.py), then, table by table, compacts, vacuums
and trims the log (upkeep.py), measuring each table's folder before and after (disk.py). It is safe
while the server, recovery jobs and streaming queries write: compaction retries or skips its lost races,
vacuum removes a replaced file only past the retention and a file no commit named only past a day, so
no transaction still open can lose the files it wrote (upkeep.py; docs/DESIGN.md, "What maintenance may
remove").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.retention import (
    DELTA_LOG_RETENTION_MS,
    LOG_RETENTION_PROPERTY,
    check_retention,
    describe_ms,
    file_retention_ms,
    interval_ms,
)
from streamclaim_spark.errors import MaintenanceRefusedError
from streamclaim_spark.fleet.maintenance.disk import TableListing, Usage, table_listing
from streamclaim_spark.fleet.maintenance.readers import (
    StreamingReader,
    refusal,
    stranded_readers,
    streaming_readers,
)
from streamclaim_spark.fleet.maintenance.upkeep import (
    Compaction,
    Vacuum,
    clean_log,
    compact,
    set_retention,
    vacuum,
)
from streamclaim_spark.state.delta_io import is_delta_table, latest_version, table_properties
from streamclaim_spark.state.tables import table_path

log = logging.getLogger("streamclaim_spark.maintenance")

# The store's tables, by the name the report gives them; the companions exist once a recovery run (or a
# redrive, or an XNACK FATAL with a reason) wrote one.
TABLES = (
    ("state", C.STATE_TABLE_DIR),
    ("dead_letters", C.DEAD_LETTER_TABLE_DIR),
    ("recovery_runs", C.RECOVERY_RUNS_TABLE_DIR),
    ("redrive_runs", C.REDRIVE_RUNS_TABLE_DIR),
    ("give_up_reasons", C.GIVE_UP_REASONS_TABLE_DIR),
)


@dataclass(frozen=True)
class TableReport:
    """What a run did to one table: its folder before and after, and the files gone from disk."""

    table: str
    before: TableListing
    after: TableListing
    vacuumed: Usage  # data files gone from disk (vacuum; compaction only replaces)
    log_removed: Usage  # log files gone (expired commits and checkpoints)
    retention_set: bool
    compaction: Compaction
    log_cleaned: bool
    swept: Vacuum  # the orphans among ``vacuumed``, and whether LITE's mark was reset

    @property
    def commits(self) -> int:
        return int(self.retention_set) + int(self.compaction.files_removed > 0)

    def to_json(self) -> dict[str, object]:
        return {
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "removed": {
                "data": self.vacuumed.to_json(),
                "log": self.log_removed.to_json(),
                "orphan_files": self.swept.orphans_removed,
            },
            "compaction": self.compaction.to_json(),
            "retention_set": self.retention_set,
            "log_cleaned": self.log_cleaned,
            "lite_mark_reset": self.swept.lite_repaired,
            "commits": self.commits,
        }


@dataclass(frozen=True)
class MaintenanceReport:
    """A maintenance run: the retention it kept, the readers it found, each table's report."""

    store: str
    retention_ms: int
    readers: tuple[StreamingReader, ...]
    ignored_readers: tuple[StreamingReader, ...]
    tables: tuple[TableReport, ...] = field(default=())
    seconds: float = 0.0

    @property
    def commits(self) -> int:
        return sum(table.commits for table in self.tables)

    def to_json(self) -> dict[str, object]:
        return {
            "store": self.store,
            "retention_ms": self.retention_ms,
            "retention": describe_ms(self.retention_ms),
            "readers": [reader.to_json() for reader in self.readers],
            "ignored_readers": [reader.to_json() for reader in self.ignored_readers],
            "tables": {table.table: table.to_json() for table in self.tables},
            "commits": self.commits,
            "seconds": round(self.seconds, 3),
        }


# Long: the run's steps in order (retention, the readers' check, then each table's four steps with its
# progress line); each step is one call into readers.py, upkeep.py or disk.py.
def maintain(
    spark: SparkSession,
    store_path: str,
    *,
    retain_ms: int | None = None,
    retain_setting: str = "retain_ms",
    ignore_readers: bool = False,
    rows_per_file: int = C.DEFAULT_ROWS_PER_FILE,
    clock: Callable[[], float] = time.time,
) -> MaintenanceReport:
    """Compacts, vacuums and trims the log of every table of the store at ``store_path``.

    Args:
        retain_ms: The history retention to keep from now on (stored on each table); None keeps each
            table's own (Delta's 7 days unless set before). At least ``retention.MIN_RETENTION_MS``.
        retain_setting: How the caller names ``retain_ms`` in errors (``--retain``, ``store.history_retention``).
        ignore_readers: Go on even when the retention leaves a streaming query unable to restart (the
            report lists it); otherwise that raises ``MaintenanceRefusedError`` before anything changes.
        rows_per_file: The store's cap on rows per data file, which compaction keeps.
    """
    started = clock()
    if retain_ms is not None:
        check_retention(retain_ms, retain_setting)
    state = table_path(store_path, C.STATE_TABLE_DIR)
    retention = retain_ms if retain_ms is not None else file_retention_ms(table_properties(spark, state))
    readers = streaming_readers(spark, state)
    now_ms = int(clock() * 1000)
    stranded = stranded_readers(readers, latest_version(spark, state), now_ms, retention)
    if stranded and not ignore_readers:
        raise MaintenanceRefusedError(refusal(stranded, retention, now_ms))
    reports = []
    for name, folder in TABLES:
        path = table_path(store_path, folder)
        if not is_delta_table(spark, path):
            continue
        before = table_listing(spark, path)
        retention_set = retain_ms is not None and set_retention(spark, path, retain_ms)
        compaction = compact(spark, path, rows_per_file)
        swept = vacuum(spark, path, int(clock() * 1000))
        log_cleaned = clean_log(spark, path, _log_retention_ms(spark, path), int(clock() * 1000))
        after = table_listing(spark, path)
        report = TableReport(
            name,
            before,
            after,
            before.data.gone_by(after.data),
            before.log.gone_by(after.log),
            retention_set,
            compaction,
            log_cleaned,
            swept,
        )
        reports.append(report)
        log.info(
            "%s: %d data files (%d live) -> %d (%d live); removed %d files, %d bytes; log %d -> %d files",
            name,
            before.data.usage.files,
            before.live.files,
            after.data.usage.files,
            after.live.files,
            report.vacuumed.files,
            report.vacuumed.bytes,
            before.log.usage.files,
            after.log.usage.files,
            extra=C.PROGRESS,
        )
    return MaintenanceReport(
        store_path, retention, tuple(readers), tuple(stranded), tuple(reports), seconds=clock() - started
    )


def _log_retention_ms(spark: SparkSession, path: str) -> int:
    value = table_properties(spark, path).get(LOG_RETENTION_PROPERTY)
    return DELTA_LOG_RETENTION_MS if value is None else interval_ms(value)

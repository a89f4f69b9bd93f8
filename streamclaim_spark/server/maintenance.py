"""Maintenance the server runs by itself: ``fleet.maintenance.maintain`` in a background thread.

A store served for months must lose its replaced files and old log without anyone scheduling a job
(docs/MAINTENANCE.md). The thread wakes every few seconds and runs a maintenance when ``maintain_every``
has passed since the last one and a batch was committed since, or as soon as ``maintain_after_batches``
batches were; the retention is the store's (``store.history_retention``; unset: the tables' own). A
maintenance refused because a streaming query would be stranded, or one that fails, is logged, shown by
``INFO maintenance`` and tried again at the next turn; commands never wait for it (its compaction may
make a group commit re-run, as any lost race does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamclaim_spark.core.retention import describe_ms
from streamclaim_spark.errors import MaintenanceRefusedError
from streamclaim_spark.fleet.maintenance import MaintenanceReport
from streamclaim_spark.store import StreamStore

log = logging.getLogger(__name__)

# How often the thread looks whether a maintenance is due.
_POLL_S = 1.0


@dataclass
class MaintenanceStats:
    """What INFO reports about background maintenance since the server started."""

    enabled: bool
    every_ms: int
    after_batches: int
    retention_ms: int | None
    runs: int = 0
    refused: int = 0
    failed: int = 0
    last_started: float = 0.0  # Unix seconds, 0 before the first run
    last_seconds: float = 0.0
    last_status: str = "none"
    last_removed_files: int = 0
    last_removed_bytes: int = 0
    last_message: str = ""

    def lines(self) -> list[str]:
        retention = "tables" if self.retention_ms is None else describe_ms(self.retention_ms)
        return [
            f"maintenance_enabled:{int(self.enabled)}",
            f"maintenance_every:{describe_ms(self.every_ms)}",
            f"maintenance_after_batches:{self.after_batches}",
            f"maintenance_history_retention:{retention}",
            f"maintenance_runs:{self.runs}",
            f"maintenance_refused:{self.refused}",
            f"maintenance_failed:{self.failed}",
            f"maintenance_last_started_unix:{int(self.last_started)}",
            f"maintenance_last_seconds:{self.last_seconds:.1f}",
            f"maintenance_last_status:{self.last_status}",
            f"maintenance_last_removed_files:{self.last_removed_files}",
            f"maintenance_last_removed_bytes:{self.last_removed_bytes}",
            f"maintenance_last_message:{self.last_message}",
        ]


class BackgroundMaintenance:
    """The thread; ``batches`` tells it how many batches the server has committed so far."""

    def __init__(
        self,
        store: StreamStore,
        batches: Callable[[], int],
        *,
        enabled: bool,
        every_ms: int,
        after_batches: int,
        retention_ms: int | None,
    ) -> None:
        self.store = store
        self.batches = batches
        self.stats = MaintenanceStats(enabled, every_ms, after_batches, retention_ms)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_run = time.monotonic()
        self._batches_then = 0

    def start(self) -> BackgroundMaintenance:
        if self.stats.enabled:
            self._thread = threading.Thread(target=self._loop, name="streamclaim-maintenance", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the thread after the maintenance it may be running."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(_POLL_S):
            if self._due():
                self.run_once()

    def _due(self) -> bool:
        committed = self.batches() - self._batches_then
        waited_ms = (time.monotonic() - self._last_run) * 1000
        return committed >= self.stats.after_batches or (committed > 0 and waited_ms >= self.stats.every_ms)

    def run_once(self) -> MaintenanceReport | None:
        """One maintenance now; its outcome goes to ``stats`` and the log, never up to the caller."""
        self._last_run, self._batches_then = time.monotonic(), self.batches()
        stats = self.stats
        stats.last_started = time.time()
        report = None
        try:
            report = self.store.maintain(stats.retention_ms)
        except MaintenanceRefusedError as refused:
            stats.refused += 1
            stats.last_status, stats.last_message = "refused", str(refused)
            log.warning("background maintenance refused: %s", refused)
        except Exception as error:
            stats.failed += 1
            stats.last_status, stats.last_message = "failed", f"{type(error).__name__}: {error}"
            log.exception("background maintenance failed")
        else:
            stats.runs += 1
            stats.last_status, stats.last_message = "ok", ""
            stats.last_removed_files = sum(t.vacuumed.files + t.log_removed.files for t in report.tables)
            stats.last_removed_bytes = sum(t.vacuumed.bytes + t.log_removed.bytes for t in report.tables)
        stats.last_message = stats.last_message.replace("\r", " ").replace("\n", " ")
        stats.last_seconds = time.time() - stats.last_started
        return report

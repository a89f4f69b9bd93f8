"""A redrive run's sign of life: a file under the store that the run touches while it works.

Another run adopts a run's taken letters only on evidence that it is gone. Each run keeps an empty file
``<store>/_redrive_heartbeats/<run_id>`` and rewrites it every ``RENEW_SECONDS`` from a thread of its own
until it ends (then deletes it). The file system stamps each rewrite, so a run is judged by one clock:
an adopter rewrites its own file, reads back the time the file system gave it, and takes a run as gone
once that run's file is older by ``GONE_AFTER_MS``. A killed run's file stays, aging; a run older than
heartbeats has none (letters.adoptable then judges by the take's time). Files go through the table's
Hadoop file system, with the session's settings and credentials; on Spark Connect, out of reach of the
JVM, no heartbeat is kept and the take's time decides, as for older runs.
"""

from __future__ import annotations

import threading
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.tables import table_path

HEARTBEAT_DIR = "_redrive_heartbeats"
RENEW_SECONDS = 5.0
# Twelve missed renewals: a pause of the run's process (GC, a stalled store) short of that is no death.
GONE_AFTER_MS = 60_000


class Heartbeat:
    """The heartbeat of run ``run_id`` of the store at ``store_path``: ``start`` writes it and keeps it
    fresh, ``stop`` ends it and deletes the file. Does nothing on Spark Connect."""

    def __init__(self, spark: SparkSession, store_path: str, run_id: str) -> None:
        self._folder = _folder(spark, store_path)
        self._path = None if self._folder is None else self._folder.path(run_id)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._path is None:
            return
        self.beat()
        self._thread = threading.Thread(target=self._renew, name="redrive-heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> int | None:
        """Rewrites the file now; returns the time the file system stamped on it (Unix ms)."""
        if self._folder is None or self._path is None:
            return None
        return self._folder.touch(self._path)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        if self._folder is not None and self._path is not None:
            self._folder.delete(self._path)

    def gone(self, run_id: str) -> bool | None:
        """Whether run ``run_id`` is gone by its heartbeat, judged by the file system's clock: True once
        its file is ``GONE_AFTER_MS`` older than this run's fresh one, None where it keeps none."""
        now = self.beat()
        if self._folder is None or now is None:
            return None
        last = self._folder.modified(self._folder.path(run_id))
        return None if last is None else now - last > GONE_AFTER_MS

    def forget(self, run_id: str) -> None:
        """Deletes the heartbeat a gone run left, once its letters are adopted."""
        if self._folder is not None:
            self._folder.delete(self._folder.path(run_id))

    def _renew(self) -> None:
        while not self._stopped.wait(RENEW_SECONDS):
            try:
                self.beat()
            except Py4JJavaError:
                continue  # a store briefly unreachable: the next renewal tries again


class _Folder:
    """The heartbeat folder through the store's Hadoop file system (a classic session's JVM)."""

    def __init__(self, spark: SparkSession, folder: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._folder = folder
        hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
        self._fs = jvm.org.apache.hadoop.fs.Path(folder).getFileSystem(hadoop_conf)

    def path(self, run_id: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(f"{self._folder}/{run_id}")

    def touch(self, path: Any) -> int:
        self._fs.create(path, True).close()
        return int(self._fs.getFileStatus(path).getModificationTime())

    def modified(self, path: Any) -> int | None:
        try:
            return int(self._fs.getFileStatus(path).getModificationTime())
        except Py4JJavaError:
            return None  # no such file

    def delete(self, path: Any) -> None:
        self._fs.delete(path, False)


def _folder(spark: SparkSession, store_path: str) -> _Folder | None:
    return None if is_connect(spark) else _Folder(spark, table_path(store_path, HEARTBEAT_DIR))

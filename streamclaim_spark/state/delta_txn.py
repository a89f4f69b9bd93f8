"""One Delta transaction driven from Python on a classic session: read some files, write files, commit once.

``DataFrame.mergeInto`` is the only multi-file write Delta gives Python, and a MERGE joins its whole
source with the target before it writes, even for rows that cannot match anything. Delta's own
``OptimisticTransaction`` (reached through py4j, so classic sessions only) lets a commit write new rows
as plain data files, remove the few files it rewrote, and record which files it read, so that Delta's
conflict check treats it exactly as it treats a MERGE that read the same buckets
(reference/delta-concurrency.md). Spark Connect has no JVM on the client: there the MERGE path stays.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.core.retention import MAX_TRANSACTION_MS
from streamclaim_spark.errors import TransactionExpiredError
from streamclaim_spark.state.add_files import bucket_of, data_file_path, file_name, row_count
from streamclaim_spark.state.delta_io import fresh_snapshot, is_connect
from streamclaim_spark.state.driver_writes import FilePlace, rewrite_files, stats_columns, write_files
from streamclaim_spark.state.hadoop_files import download, is_local, local_path, upload
from streamclaim_spark.state.jvm_classes import java_class, static_method
from streamclaim_spark.state.logged_files import LoggedFile, files_at, keep_committed
from streamclaim_spark.state.pruning_filters import bucket_filters, pruning_filters
from streamclaim_spark.state.scala_seqs import java_items, scala_seq
from streamclaim_spark.state.schema import STATE_SCHEMA, file_condition


def supports_transactions(spark: SparkSession) -> bool:
    """True where ``DeltaTransaction`` works: a classic session (Spark Connect has no JVM here)."""
    return not is_connect(spark)


def commits_files(spark: SparkSession) -> bool:
    """True where a commit is made as a transaction of files from the driver, not a MERGE: a classic
    session, unless the placement forces Spark (core/placement.py, ``Work.COMMIT``)."""
    return placement().on_driver(Work.COMMIT, classic=supports_transactions(spark))


@contextlib.contextmanager
def active_session(spark: SparkSession) -> Iterator[None]:
    """Makes ``spark`` the JVM thread's active session while a transaction runs, then puts back the one
    before: Delta reads settings (the commit's user metadata among them) from the active session, and
    a caller's later queries in this thread resolve names (its registered data sources) through it."""
    jvm = spark._jvm
    assert jvm is not None, "a Delta transaction needs a classic session"
    before = jvm.SparkSession.getActiveSession()
    jvm.SparkSession.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if before.isDefined():
            jvm.SparkSession.setActiveSession(before.get())
        else:
            jvm.SparkSession.clearActiveSession()


class DeltaTransaction:
    """A Delta transaction on the table at ``path``, started at its newest version (the one this thread
    just listed, when it did: ``delta_io.fresh_snapshot``).

    Run it inside ``active_session``. Use: ``files_in`` (the files that may hold some rows, recorded as
    read), ``read_files`` (their rows), ``write`` (rows as new data files), ``commit`` (the new files
    plus the removal of files read, as one Delta WRITE). Nothing is visible
    until ``commit``; a transaction that is never committed leaves only unreferenced files, which VACUUM
    removes. A concurrent commit that changed what was read makes ``commit`` raise Delta's conflict
    exception (``conflicts.is_lost_race`` recognises it). One open longer than ``MAX_TRANSACTION_MS``
    refuses to commit (``TransactionExpiredError``, a lost race too): maintenance removes files no
    version references once they are far older than that (docs/DESIGN.md, "What maintenance may remove").
    """

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = path
        jvm = spark._jvm
        assert jvm is not None, "DeltaTransaction needs a classic session"
        self._jvm = jvm
        delta_log = static_method(jvm, "org.apache.spark.sql.delta.DeltaLog", "forTable")(spark._jsparkSession, path)
        fresh = fresh_snapshot(path)
        if fresh is None or fresh.version() < delta_log.unsafeVolatileSnapshot().version():
            self._txn = delta_log.startTransaction()  # lists the log for its newest version
        else:  # the snapshot this command just listed, still the newest this process knows
            empty, some = (static_method(jvm, "scala.Option", name) for name in ("empty", "apply"))
            self._txn = delta_log.startTransaction(empty(), some(fresh))
        self.started_ms = int(time.time() * 1000)  # before any file of it is written
        self._logged: list[LoggedFile] | None = None
        self._written_files: dict[int, LoggedFile] = {}  # by the id of its AddFile: what it was written as
        self._written = (0, 0, 0)  # files, rows and bytes written on the driver, for the commit's metrics

    @property
    def path(self) -> str:
        """The table's location."""
        return self._path

    @property
    def read_version(self) -> int:
        """The table version this transaction reads and commits on top of."""
        return int(self._txn.readVersion())

    def table(self) -> DataFrame:
        """The table as of ``read_version``, each row with the path of the data file holding it."""
        return (
            self._spark.read.format("delta")
            .option("versionAsOf", self.read_version)
            .load(self._path)
            .withColumn(FILE_PATH, F.col("_metadata.file_path"))
        )

    def files_in(self, query: FileQuery) -> list[Any]:
        """The data files (Delta ``AddFile``s) as of ``read_version`` that may hold rows ``query`` names
        (bucket, and the files' statistics), recorded as read as Delta's ``filterFiles`` records them: a
        concurrent commit that adds a file the query's filter may match, or removes a file listed here,
        makes this transaction's commit fail. Listed on the driver from the files kept for the log
        (state/logged_files.py); through Delta's state where they cannot be."""
        logged = self._logged_files()
        if logged is None:  # Delta's data skipping needs the query's whole filter, IDs included
            filters = pruning_filters(self._spark, self._path, file_condition(query))
            return java_items(self._jvm, self._txn.filterFiles(filters, True))  # with row counts
        files = [file.add_file(self._jvm) for file in logged if query.may_hold(file.bucket, file.bounds)]
        # Delta's conflict check tests other commits' files against a read's partition predicates alone
        # (ConflictChecker: ``readPredicate.partitionPredicates``): the buckets. The rest of the query's
        # filter (partitions, IDs) it records and never tests; building it cost ~50 py4j calls a read.
        buckets = bucket_filters(self._spark, self._path, query.buckets)
        self._txn.trackReadPredicates(buckets, True, True)
        self._txn.trackFilesRead(self._seq(files))
        return files

    def _logged_files(self) -> list[LoggedFile] | None:
        """Every data file as of ``read_version``, listed once per transaction (its snapshot is fixed):
        a commit lists its heads, the files it rewrites and its small files from the same list."""
        if self._logged is None:
            self._logged = files_at(self._spark, self._path, self._txn.snapshot())
        return self._logged

    def small_files(self, buckets: Iterable[str], below: int) -> dict[str, list[Any]]:
        """The data files (``AddFile``s) smaller than ``below`` bytes of each of ``buckets`` as of
        ``read_version``. Not recorded as read: they decide whether compacting is worth a look, and
        compacting them changes no row (a concurrent removal of one still makes the commit conflict)."""
        found: dict[str, list[Any]] = {bucket: [] for bucket in sorted(set(buckets))}
        if not found:
            return found
        logged = self._logged_files()
        if logged is not None:
            for file in logged:
                if file.bucket in found and file.size < below:
                    found[file.bucket].append(file.add_file(self._jvm))
            return found
        filters = bucket_filters(self._spark, self._path, list(found))
        scan = self._txn.snapshot().filesForScan(filters, False)
        for file in java_items(self._jvm, scan.files()):
            if file.size() < below:
                found[bucket_of(file)].append(file)
        return found

    def read_files(self, files: Sequence[Any], *, with_path: bool = False) -> DataFrame:
        """Every row of ``files`` (``AddFile``s of this table), with its bucket: what rewriting them
        must write back, less what it removes. Read as plain Parquet, so only those files are
        opened. ``with_path`` adds ``FILE_PATH``, the data file each row lies in
        (``file_name`` matches it to its ``AddFile``)."""
        names = [field.name for field in STATE_SCHEMA.fields] + ([FILE_PATH] if with_path else [])
        if any(file.deletionVector() is not None for file in files):
            # Rows a deletion vector hides must stay hidden: read through Delta, by file name.
            wanted = sorted(file_name(str(file.path())) for file in files)
            return self.table().where(F.element_at(F.split(F.col(FILE_PATH), "/"), -1).isin(*wanted)).select(*names)
        by_bucket: dict[str, list[str]] = {}
        for file in files:
            by_bucket.setdefault(bucket_of(file), []).append(data_file_path(self._path, str(file.path())))
        data_schema = StructType([field for field in STATE_SCHEMA.fields if field.name != C.BUCKET])
        if all(f"/{C.BUCKET}={bucket}/" in path for bucket, paths in by_bucket.items() for path in paths):
            # One scan, its bucket read from the directory names: Spark packs small files into a few tasks,
            # where a scan per bucket made at least one task, and one written file, per bucket (a fleet's
            # 1M PEL rows: 32 tasks, 5.6 s against 4.2 s in 2).
            scan = (
                self._spark.read.schema(data_schema)
                .option("basePath", self._path)
                .parquet(*sorted(path for paths in by_bucket.values() for path in paths))
            )
            return scan.withColumn(FILE_PATH, F.col("_metadata.file_path")).select(*names)
        frames = [
            self._spark.read.schema(data_schema)
            .parquet(*paths)
            .withColumn(C.BUCKET, F.lit(bucket))
            .withColumn(FILE_PATH, F.col("_metadata.file_path"))
            for bucket, paths in sorted(by_bucket.items())
        ]
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame)
        return rows.select(*names)

    def write(self, rows: DataFrame) -> list[Any]:
        """Writes ``rows`` (the table's columns) as new data files of this transaction; returns Delta's
        ``AddFile`` actions for ``commit``. Files are capped by ``spark.sql.files.maxRecordsPerFile``."""
        # Delta caps files by the settings of the frame's own session: the frame is moved to this
        # transaction's session, whose settings the commit set (a user's frame comes from another).
        dataset = self._jvm.org.apache.spark.sql.classic.Dataset.ofRows(
            self._spark._jsparkSession, rows._jdf.logicalPlan()
        )
        return java_items(self._jvm, self._txn.writeFiles(dataset))

    def write_arrow(self, rows: pa.Table, rows_per_file: int) -> list[Any]:
        """Writes ``rows`` (the state table's Arrow schema, in write order) as new data files of this
        transaction, on the driver where the table allows it (state/driver_writes.py), else through
        ``write``; returns Delta's ``AddFile`` actions for ``commit``. ``rows_per_file``: 0, no cap."""
        columns = self._driver_columns
        if columns is None or not placement().on_driver(Work.WRITE_FILES, classic=True, stored_bytes=rows.nbytes):
            return self.write(self._spark.createDataFrame(rows, STATE_SCHEMA).coalesce(1))
        with self._file_place() as place:
            return self._added(write_files(place, rows, rows_per_file, columns), rows.num_rows)

    def rewrite_arrow(self, files: Sequence[Any], transform: Callable[[pa.Table], pa.Table]) -> list[Any] | None:
        """Rewrites each of ``files`` (``AddFile``s of this table, none with a deletion vector) on the
        driver as one new file of ``transform`` of its rows (driver_writes.rewrite_files); returns the
        new ``AddFile`` actions, or None where the table's files are not written on the driver."""
        columns = self._driver_columns
        if columns is None or any(file.deletionVector() is not None for file in files):
            return None
        root = self._data_path
        located = [(data_file_path(root, str(file.path())), bucket_of(file)) for file in files]
        sizes = {location: int(file.size()) for (location, _), file in zip(located, files, strict=True)}
        with self._file_place(sizes) as place:
            if place.fetch is None:
                located = [(local_path(self._jvm, location), bucket) for location, bucket in located]
            rows = sum(row_count(file) for file in files)
            return self._added(rewrite_files(place, located, transform, columns), rows)

    @functools.cached_property
    def _driver_columns(self) -> list[str] | None:
        """The statistics columns of files written on the driver; None where Delta must write them (a
        table whose files Delta writes otherwise: driver_writes.stats_columns). The table's properties
        come as the metadata's JSON in one py4j call: iterating Delta's Scala map costs a round trip an
        entry, and a Java exception at its end."""
        metadata = json.loads(str(self._txn.metadata().json()))["metaData"]
        return stats_columns(metadata.get("configuration") or {})

    @functools.cached_property
    def _data_path(self) -> str:
        """The table's location, qualified as Delta resolved it (a relative path made absolute)."""
        return str(self._txn.deltaLog().dataPath().toString())

    @contextlib.contextmanager
    def _file_place(self, sizes: dict[str, int] | None = None) -> Iterator[FilePlace]:
        """Where this transaction's files are written on the driver: the table's own folder when it is
        local; else a staging folder whose files go to the table's file system one by one as they are
        written (state/hadoop_files.py), removed with whatever a failed write left in it. ``sizes``: the
        lengths of the files a rewrite reads, by location."""
        root = self._data_path
        if is_local(self._jvm, root):
            yield FilePlace(local_path(self._jvm, root))
            return
        with tempfile.TemporaryDirectory(prefix="streamclaim-writes-") as staging:
            yield FilePlace(
                staging,
                publish=lambda local, relative: upload(self._spark, local, f"{root.rstrip('/')}/{relative}"),
                fetch=lambda location, local: download(self._spark, location, local, (sizes or {}).get(location)),
            )

    def _added(self, actions: list[dict[str, Any]], rows: int) -> list[Any]:
        """``add`` actions written on the driver as Delta's ``AddFile``s, counted for the commit's metrics."""
        from_json = static_method(self._jvm, "org.apache.spark.sql.delta.actions.Action", "fromJson")
        added = []
        for action in actions:
            line = json.dumps({"add": action})
            file = LoggedFile.from_add(action, line)
            file._add_file = from_json(line)
            self._written_files[id(file._add_file)] = file
            added.append(file._add_file)
        files, written_rows, size = self._written
        self._written = (files + len(added), written_rows + rows, size + sum(action["size"] for action in actions))
        return added

    def _register_written(self) -> None:
        """Gives the commit the metrics Delta's own write registers (DESCRIBE HISTORY's numFiles,
        numOutputRows, numOutputBytes), summed over its writes on the driver, once (Delta keeps the last)."""
        if self._written == (0, 0, 0):
            return
        metrics = java_class(self._jvm, "java.util.HashMap")()
        context = self._spark.sparkContext._jsc.sc()
        for name, value in zip(("numFiles", "numOutputRows", "numOutputBytes"), self._written, strict=True):
            metric = static_method(self._jvm, "org.apache.spark.sql.execution.metric.SQLMetrics", "createMetric")(
                context, name
            )
            metric.set(value)
            metrics.put(name, metric)
        scala_map = static_method(self._jvm, "org.apache.spark.api.python.PythonUtils", "toScalaMap")(metrics)
        self._txn.registerSQLMetrics(self._spark._jsparkSession, scala_map)

    def recorded_version(self, app_id: str) -> int:
        """The last version recorded for the idempotent writer ``app_id`` (-1: none), as read by this
        transaction: a concurrent commit of the same writer makes this one conflict."""
        return int(self._txn.txnVersion(app_id))

    def commit(self, added: Iterable[Any], removed_files: Iterable[Any], writer: tuple[str, int] | None = None) -> int:
        """Commits the ``added`` actions and the removal of ``removed_files`` (``AddFile``s read through
        ``files_in``) as one Delta WRITE; returns its version. The user metadata is the session's.
        ``writer`` (app ID, version) is recorded in the commit, as Delta's idempotent writes record it.
        Raises ``TransactionExpiredError``, committing nothing, once the transaction is too old (the class)."""
        for hook in _BEFORE_COMMIT:
            hook(self)
        age_ms = int(time.time() * 1000) - self.started_ms
        if age_ms > MAX_TRANSACTION_MS:
            raise TransactionExpiredError(
                f"a transaction on {self._path} stayed open {age_ms} ms, longer than the {MAX_TRANSACTION_MS} ms "
                "a commit may take: it commits nothing and re-runs"
            )
        added, removed_files = list(added), list(removed_files)
        actions = [*added, *(file.remove() for file in removed_files)]
        if writer is not None:
            app_id, version = writer
            millis = static_method(self._jvm, "scala.Option", "apply")(
                static_method(self._jvm, "java.lang.Long", "valueOf")(int(time.time() * 1000))
            )
            actions.append(
                java_class(self._jvm, "org.apache.spark.sql.delta.actions.SetTransaction")(app_id, version, millis)
            )
        self._register_written()
        none = static_method(self._jvm, "scala.Option", "empty")()
        append = java_class(self._jvm, "org.apache.spark.sql.SaveMode").Append
        write = java_class(self._jvm, "org.apache.spark.sql.delta.DeltaOperations$Write")
        operation = write(append, none, none, none, none, none, none, none, none)
        version = int(self._txn.commit(self._seq(actions), operation))
        self._keep_files(version, added, removed_files)
        return version

    def _keep_files(self, version: int, added: Sequence[Any], removed_files: Sequence[Any]) -> None:
        """Keeps the table's files at ``version``, this commit's, on the driver (``keep_committed``) when
        every file it added was written here and every file it removed came from the kept files."""
        if self._logged is None:
            return
        written = [self._written_files.get(id(file)) for file in added]
        kept = {id(file._add_file): file for file in self._logged if file._add_file is not None}
        gone = [kept.get(id(file)) for file in removed_files]
        if all(file is not None for file in written) and all(file is not None for file in gone):
            keep_committed(self._path, self._txn.snapshot(), version, written, gone)  # type: ignore[arg-type]

    def mark_checked(self, files: Iterable[Any]) -> None:
        """Records in Delta's per-process auto-compaction memory that the buckets of ``files`` (committed
        ``AddFile``s) were looked at, as its own check records a bucket it compacted: the next commit
        there checks only once the bucket gathers Delta's threshold of small files, instead of a no-op
        check at the first commit (a MERGE) after a commit of files that skipped it. A hint only: an
        unreachable internal (another Delta version) leaves the next commit to check."""
        partitions = java_class(self._jvm, "java.util.HashSet")()
        for file in files:
            partitions.add(file.partitionValues())
        if partitions.isEmpty():
            return
        try:
            stats = static_method(self._jvm, "org.apache.spark.sql.delta.stats.AutoCompactPartitionStats", "instance")(
                self._spark._jsparkSession
            )
            table_id = self._txn.deltaLog().unsafeVolatileTableId()
            scala_set = static_method(self._jvm, "scala.jdk.javaapi.CollectionConverters", "asScala")(
                partitions
            ).toSet()
            stats.markPartitionsAsCompacted(table_id, scala_set)
        except Py4JError:
            return

    def _seq(self, items: Iterable[Any]) -> Any:
        return scala_seq(self._jvm, items)


# Called with each transaction just before it commits, in the committing thread: a seam for tests that
# hold a transaction open between its writes and its commit (streamclaim_spark.testing.commit_gate).
# Empty outside such a test.
_BEFORE_COMMIT: list[Callable[[DeltaTransaction], None]] = []


@contextlib.contextmanager
def before_commit(hook: Callable[[DeltaTransaction], None]) -> Iterator[None]:
    """Runs ``hook`` before every ``DeltaTransaction.commit`` of the process while the block runs."""
    _BEFORE_COMMIT.append(hook)
    try:
        yield
    finally:
        _BEFORE_COMMIT.remove(hook)


# Delta's idempotent-write settings: a commit made with them records (app ID, version), and a writer
# skips a version already recorded for its app ID (the streaming sink's exactly-once).
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"

# The column ``DeltaTransaction.table`` adds: the data file a row lies in.
FILE_PATH = "_file_path"

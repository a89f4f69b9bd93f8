"""What the store asks of Delta beyond reading DataFrames, on a classic or a Spark Connect session.

A classic session reaches Delta's JVM through py4j; a Spark Connect session has no JVM on the client,
and the Delta Connect server plugin (which would serve ``delta.tables.DeltaTable`` there) is not on
Maven Central for Delta 4.4. So everything here goes through what both kinds of session speak — SQL,
``DataFrame.mergeInto`` and session settings — except where a classic session's JVM does the same for
less: a table's newest version and a commit's ``commitInfo`` are a py4j call each there (no query), one
query each on Connect, and an in-place UPDATE keeps Delta's UPDATE on classic (docs/DEPLOY.md).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamclaim_spark.state.commit_settings import COMMIT_SETTINGS, USER_METADATA, apply_settings
from streamclaim_spark.state.jvm_classes import static_method
from streamclaim_spark.state.log_tip import listed, still_newest

# The name a MERGE's target goes by: a temporary view of the table in the committing session, which on
# Spark Connect is the user's own (see ``child_session``), so a name no user's view is likely to have.
MERGE_TARGET = "streamclaim_target"
# Delta's auto compaction runs inside the commit call that triggered it, in the same session, so its
# OPTIMIZE commit carries that commit's user metadata: a commit with a write's label is that write
# only when its operation is not this one (the write's own version, a batch's, a put-back's).
AUTO_COMPACTION_OPERATION = "OPTIMIZE"
# The one column of the one-row source an in-place update merges on Connect (named to clash with none).
_ONE_ROW = "_streamclaim_one_row"
# What Delta raises for a location that holds no Delta table (any kind of session).
_NOT_A_TABLE = ("DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_ONLY_OPERATION", "PATH_NOT_FOUND", "DELTA_TABLE_NOT_FOUND")


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect``), which has no JVM on this side."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def child_session(spark: SparkSession) -> SparkSession:
    """The session a thread's commands run in: on classic a new one sharing the SparkContext, so Delta's
    per-session commit bookkeeping never mixes between threads; on Spark Connect ``spark`` itself, since
    a Connect DataFrame (a user's frame for ``append``) joins only frames of its own session. There
    ``committing`` serialises the commits and puts back the settings they change."""
    if is_connect(spark):
        return spark
    return spark.newSession()


_COMMIT_LOCKS: dict[str, threading.Lock] = {}
_COMMIT_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def committing(spark: SparkSession) -> Iterator[None]:
    """Brackets one commit's settings, MERGE and version read. On classic a thread's session is its own:
    only the commit's label is taken off afterwards, so that no later write of that session (maintenance's
    OPTIMIZE, a user's write through ``store.session()``) carries it. On Connect the session is shared by
    the caller's threads and is the user's: one commit at a time, and the settings it changes and its
    target view are put back afterwards."""
    if not is_connect(spark):
        try:
            yield
        finally:
            spark.conf.unset(USER_METADATA)
        return
    with _COMMIT_LOCKS_GUARD:
        lock = _COMMIT_LOCKS.setdefault(spark.session_id, threading.Lock())  # type: ignore[attr-defined]
    with lock:
        before = {key: spark.conf.get(key, None) for key in COMMIT_SETTINGS}
        try:
            yield
        finally:
            apply_settings(spark, before)
            spark.catalog.dropTempView(MERGE_TARGET)


def quoted_path(path: str) -> str:
    """``delta.`path``` as SQL names it (a backtick in the path doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"


def delta_log(spark: SparkSession, table_path: str) -> Any:
    """Delta's JVM ``DeltaLog`` of the table (classic sessions only), cached by Delta per path."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return static_method(jvm, "org.apache.spark.sql.delta.DeltaLog", "forTable")(spark._jsparkSession, table_path)


def updated_snapshot(spark: SparkSession, table_path: str) -> Any:
    """Delta's JVM snapshot of the table's newest version, after looking for new commits: the next
    commit's file probed on a local disk or HDFS (log_tip.py), else one log listing. This thread's next
    ``fresh_snapshot`` of the table takes it without looking again."""
    log = delta_log(spark, table_path)
    snapshot = still_newest(spark, table_path, log)
    if snapshot is None:
        snapshot = log.update(False, getattr(log, "update$default$2")(), getattr(log, "update$default$3")())
        listed(spark, table_path, int(snapshot.version()))
    _fresh.snapshots = {table_path: snapshot}
    return snapshot


# The snapshot this thread's last ``updated_snapshot`` listed, by table: a command lists the log once to
# pin its snapshot, and its transaction starts there instead of listing it again (one request on S3).
_fresh = threading.local()


def fresh_snapshot(table_path: str) -> Any | None:
    """The snapshot of ``table_path`` this thread's last ``updated_snapshot`` listed, once (None after, or
    if there is none). A transaction may start at it: commits that landed since make its commit check
    them, as any commit on a snapshot older than the newest does."""
    snapshots: dict[str, Any] = getattr(_fresh, "snapshots", {})
    return snapshots.pop(table_path, None)


def latest_version(spark: SparkSession, table_path: str) -> int:
    """The table's newest version, asking Delta to look for new commits (one log listing)."""
    if is_connect(spark):
        row = spark.sql(f"DESCRIBE HISTORY {quoted_path(table_path)} LIMIT 1").select("version").first()
        assert row is not None
        return int(row[0])
    return int(updated_snapshot(spark, table_path).version())


def commit_info(spark: SparkSession, table_path: str, version: int) -> dict[str, Any]:
    """The ``commitInfo`` action of commit ``version`` (operation, user metadata, metrics), read from the
    commit's log file: through Hadoop's file system on classic (no Spark job; Delta writes it first, so
    usually one line is read), as one filtered text read on Connect."""
    log_file = f"{table_path}/_delta_log/{version:020d}.json"
    if is_connect(spark):
        lines = spark.read.text(log_file).where(F.col("value").contains('"commitInfo"')).limit(1).collect()
        for row in lines:
            info: dict[str, Any] = json.loads(row[0]).get("commitInfo", {})
            return info
        return {}
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(log_file)
    fs = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    stream = fs.open(path)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        line = reader.readLine()
        while line is not None:
            action = json.loads(line)
            if "commitInfo" in action:
                found: dict[str, Any] = action["commitInfo"]
                return found
            line = reader.readLine()
    finally:
        stream.close()
    return {}


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table: Delta's own check on classic, one probe query on Connect."""
    if not is_connect(spark):
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, path))
    return not_a_table_error(spark, path) is None


def not_a_table_error(spark: SparkSession, path: str) -> Exception | None:
    """What Delta says of ``path`` when it holds no table, e.g. ``[DELTA_MISSING_DELTA_TABLE] ... is not a
    Delta table`` (None: it holds one); other failures raise."""
    try:
        spark.sql(f"DESCRIBE DETAIL {quoted_path(path)}").collect()
    except AnalysisException as error:
        if is_not_a_table(error):
            return error
        raise
    return None


def has_delta_log(spark: SparkSession, path: str) -> bool:
    """True when ``path`` has a ``_delta_log`` folder, complete or not (a creator may be mid-way): a listing
    the server makes when planning a read, so it works where this process cannot see the file system."""
    try:
        _ = spark.read.text(path.rstrip("/") + "/_delta_log").schema  # Connect plans lazily: ask now
    except AnalysisException as error:
        if "PATH_NOT_FOUND" in str(error):
            return False
        raise
    return True


def table_schema(spark: SparkSession, path: str) -> StructType:
    """The schema of the Delta table at ``path`` (its newest version)."""
    return spark.read.format("delta").load(path).schema


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table properties of the Delta table at ``path`` (its newest version). On a classic session
    they come from the snapshot's metadata action: ``DESCRIBE DETAIL`` also sums the files' sizes, which
    makes a new process rebuild the table's state first (a Spark job, 6-7 s of a cold import's open,
    CHANGELOG.md, "The import's re-run as a commit of files"). On Connect, ``DESCRIBE DETAIL``."""
    if not is_connect(spark):
        configuration = updated_snapshot(spark, path).metadata().configuration()
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(configuration))
    detail = spark.sql(f"DESCRIBE DETAIL {quoted_path(path)}").select("properties").collect()
    return dict(detail[0]["properties"] or {}) if detail else {}


def create_table(
    spark: SparkSession, path: str, schema: StructType, properties: dict[str, str], partition_by: str | None
) -> None:
    """``CREATE TABLE`` at ``path``: the columns of ``schema`` (nullability kept), its partition column and
    table properties; the same SQL on either kind of session. A location that already has a ``_delta_log``
    is an error ("already exists"), as with Delta's ``create`` builder: ``IF NOT EXISTS`` would skip a
    location whose first commit is still being written, and leave no table."""
    columns = ", ".join(
        f"`{field.name}` {field.dataType.simpleString()}{'' if field.nullable else ' NOT NULL'}" for field in schema
    )
    partitioned = f" PARTITIONED BY (`{partition_by}`)" if partition_by is not None else ""
    settings = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    described = f" TBLPROPERTIES ({settings})" if settings else ""
    spark.sql(f"CREATE TABLE {quoted_path(path)} ({columns}) USING delta{partitioned}{described}")


def merge_into(spark: SparkSession, table_path: str, source: DataFrame, condition: Column) -> Any:
    """Starts a MERGE of ``source`` (as ``s``) into the table (as ``MERGE_TARGET``) on ``condition``: Spark's own
    ``DataFrame.mergeInto``, which Delta plans exactly as its builder's MERGE, on either kind of session.

    The target is a temporary view of the table in ``spark``, the committing thread's own session; the
    MERGE itself reads the table's newest snapshot in its own transaction, whatever the view saw.
    """
    spark.read.format("delta").load(table_path).createOrReplaceTempView(MERGE_TARGET)
    return source.alias("s").mergeInto(MERGE_TARGET, condition)


def update_in_place(spark: SparkSession, table_path: str, condition: Column, assignments: dict[str, Column]) -> None:
    """Rewrites the rows ``condition`` selects with ``assignments`` (columns unqualified).

    Delta's UPDATE on classic (no source, no join); on Connect, where only SQL text or a MERGE can
    reach Delta and these Columns have no SQL text, a MERGE whose source is one row that every selected
    row matches: the same rows rewritten, one more scan of one row.
    """
    if not is_connect(spark):
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, table_path).update(condition, dict(assignments))
        return
    one_row = spark.range(1).select(F.lit(1).alias(_ONE_ROW))
    merge_into(spark, table_path, one_row, condition).whenMatched().update(dict(assignments)).merge()


def register_connect_errors(spark: SparkSession) -> None:
    """Makes a Connect session raise Delta's conflict classes (conflicts.py recognises them) rather
    than a generic gRPC error: importing Delta's Connect exceptions registers their mapping."""
    if is_connect(spark):
        import delta.connect.exceptions  # noqa: F401


def is_not_a_table(error: BaseException) -> bool:
    """True for what Delta raises on a location that holds no Delta table."""
    return isinstance(error, AnalysisException) and any(code in str(error) for code in _NOT_A_TABLE)

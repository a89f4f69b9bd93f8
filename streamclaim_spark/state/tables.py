"""Creates and opens the store's Delta tables. No other module writes DDL."""

from __future__ import annotations

import threading
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.errors import StoreLayoutError
from streamclaim_spark.state.companion_schema import (
    DEAD_LETTER_SCHEMA,
    GIVE_UP_REASONS_SCHEMA,
    RECOVERY_RUNS_SCHEMA,
    REDRIVE_COLUMNS,
    REDRIVE_RUNS_SCHEMA,
)
from streamclaim_spark.state.conflicts import is_lost_race
from streamclaim_spark.state.delta_io import (
    create_table,
    has_delta_log,
    is_delta_table,
    not_a_table_error,
    quoted_path,
    table_properties,
    table_schema,
)
from streamclaim_spark.state.schema import FIELD_PAIR, STATE_SCHEMA, bucket_column

# The table property that names the state table's layout: heads and consumers in buckets of their own.
# Tables made before it have no such property (docs/DESIGN.md, "Layout").
LAYOUT_PROPERTY = "streamclaim.layout"
HEADS_APART = "heads-apart"

# Table properties of the state table, each for a reason given in docs/DESIGN.md ("Layout").
STATE_TABLE_PROPERTIES = {
    # Off: with deletion vectors enabled every read costs one more Spark job (Delta lists all files to
    # find their vectors), and capped files make rewriting the touched file cheap (docs/DESIGN.md).
    "delta.enableDeletionVectors": "false",
    # Each command commits a few small files; compaction after commits keeps reads fast.
    "delta.autoOptimize.autoCompact": "true",
    # A checkpoint every 100 commits, not Delta's 10: writing one costs a Spark job and ~1-2 s, and the
    # next snapshot rebuilds its state from it; 40 commands took 12-19% less time in all, and a new
    # process opened a table 96 JSON commits past its last checkpoint as fast as one 6 past it
    # (docs/BENCHMARKS.md, "Levers").
    "delta.checkpointInterval": "100",
    # Statistics only on the columns commands filter on: partitions (many share a bucket), IDs, kinds,
    # names, delivery times.
    "delta.dataSkippingStatsColumns": ",".join(
        [
            *(C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ),
            *(C.CONSUMER, C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT),
        ]
    ),
    LAYOUT_PROPERTY: HEADS_APART,
}


def table_path(store_path: str, table_dir: str) -> str:
    return store_path.rstrip("/") + "/" + table_dir


def ensure_state_table(spark: SparkSession, store_path: str) -> str:
    """Creates the state table under ``store_path`` unless it exists; returns its path.

    Two processes opening a new store at once may both try to create it; the loser sees Delta's
    conflict (or the other's table) and simply uses the table that won. A table of an older layout is
    refused with StoreLayoutError, which names ``upgrade_layout``.
    """
    path = table_path(store_path, C.STATE_TABLE_DIR)
    _ensure_table(spark, path, STATE_SCHEMA, STATE_TABLE_PROPERTIES, partition_by=C.BUCKET)
    schema = table_schema(spark, path)
    if C.BUCKET not in schema.names:
        _refuse_old_layout(store_path, "the layout from before buckets (one Delta partition per stream and per group)")
    if _holds_text_fields(schema):
        _refuse_old_layout(store_path, "entries' field names and values as strings (before binary payloads)")
    if not _has_heads_apart(spark, path):
        _refuse_old_layout(store_path, "heads and consumers in the files of entries and PEL rows (before heads apart)")
    if C.SOME_DELETED not in schema.names:
        _refuse_old_layout(store_path, "stream heads without the deleted-entry marker (before kept markers)")
    if C.COUNTED_VERSION not in schema.names:
        _refuse_old_layout(store_path, "groups without their kept pending counts (before kept counts)")
    return path


# The columns added in place by ``upgrade_layout``, in their order: null in existing rows reads as
# "unknown" (a deletion may have happened; the counts are recounted).
_ADDED_COLUMNS = (
    f"{C.SOME_DELETED} BOOLEAN AFTER {C.MAX_DELETED_SEQ}",
    f"{C.PENDING_COUNT} BIGINT AFTER {C.ACTIVE_TIME_MS}",
    f"{C.COUNTED_VERSION} BIGINT AFTER {C.VERSION}",
)


def _refuse_old_layout(store_path: str, what: str) -> None:
    raise StoreLayoutError(
        f"the store at {store_path} keeps {what}; stop every writer and run "
        f"streamclaim_spark.state.tables.upgrade_layout(spark, {store_path!r}) once, then open it again"
    )


def _has_heads_apart(spark: SparkSession, path: str) -> bool:
    """True when the state table at ``path`` is marked as keeping heads and consumers in buckets of their own."""
    return table_properties(spark, path).get(LAYOUT_PROPERTY) == HEADS_APART


def _holds_text_fields(schema: StructType) -> bool:
    """True when the table's ``fields`` column holds string pairs (stores made before binary payloads)."""
    if C.FIELDS not in schema.names:
        return False
    return schema[C.FIELDS].dataType != ArrayType(FIELD_PAIR)


def _conformed(frame: DataFrame, schema: StructType) -> DataFrame:
    """``frame``'s columns in ``schema``'s order and types (string fields cast to their UTF-8 bytes);
    a column the frame lacks is null (a marker added since: null reads as "unknown")."""
    present = set(frame.columns)
    return frame.select(
        *((F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields)
    )


def upgrade_layout(spark: SparkSession, store_path: str) -> bool:
    """Rewrites a store's tables made by an older version into today's layout; False if they have it.

    The state table, if it lacks any of the layout's steps (``bucket`` partitions; binary field names and
    values; heads and consumers in buckets of their own), is rewritten in one commit, every row in the
    bucket of its partition and kind, in files of at most ``DEFAULT_ROWS_PER_FILE`` rows ordered by
    partition, kind and ID; a second commit then marks the layout (a crash between the two leaves a table
    that is refused until this is run again, which redoes the rewrite). A table that lacks only columns
    added since (the stream heads' ``some_deleted``, the kept ``pending_count`` and ``counted_version``)
    gets them added in place (no file rewritten), null in existing rows, which reads as "an entry may
    have been deleted" and "the counts are unknown" (a group's next write recounts where its PEL is
    small); either way the table gets today's properties
    (``STATE_TABLE_PROPERTIES``). A dead-letter table from before
    binary payloads gets its fields as their UTF-8 bytes. Every row keeps its values. Readers see the old
    or the new table, never a mix; writers that commit meanwhile make it fail (run it again), or are lost
    if they started before it: stop them first.
    """
    path = table_path(store_path, C.STATE_TABLE_DIR)
    table = spark.read.format("delta").load(path)
    upgraded = False
    if not _has_heads_apart(spark, path) or _holds_text_fields(table.schema):
        rows = table.withColumn(C.BUCKET, bucket_column(F.col(C.PARTITION_ID), F.col(C.ROW_KIND)))
        (
            _conformed(rows, STATE_SCHEMA)
            .repartition(C.BUCKET)
            .sortWithinPartitions(C.BUCKET, C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ, C.CONSUMER)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .option("maxRecordsPerFile", C.DEFAULT_ROWS_PER_FILE)
            .partitionBy(C.BUCKET)
            .save(path)
        )
        upgraded = True
    else:
        # Only columns added since are missing: added in place (metadata only, no file rewritten).
        for column in _ADDED_COLUMNS:
            if column.split()[0] not in table.schema.names:
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({column})")
                upgraded = True
    if upgraded:
        # Today's properties, in a commit of their own: after a rewrite, the commit that marks the layout.
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({_settings(STATE_TABLE_PROPERTIES)})")
    dead_letters = table_path(store_path, C.DEAD_LETTER_TABLE_DIR)
    if is_delta_table(spark, dead_letters):
        copies = spark.read.format("delta").load(dead_letters)
        if _holds_text_fields(copies.schema):
            (
                _conformed(copies, DEAD_LETTER_SCHEMA)
                .write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .save(dead_letters)
            )
            upgraded = True
    return upgraded


def _settings(properties: dict[str, str]) -> str:
    """``properties`` as the list of an ALTER TABLE ... SET TBLPROPERTIES."""
    return ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())


# --- the recovery job's companion tables ---------------------------------------------------------------

RECOVERY_RUNS_TABLE_PROPERTIES = {
    # The run log is history: rows are appended, never changed.
    "delta.appendOnly": "true",
}


def ensure_dead_letter_table(spark: SparkSession, store_path: str) -> str:
    """Creates the store's dead-letter table unless it exists; returns its path (StoreLayoutError for
    a table from before binary payloads)."""
    path = _ensure_table(spark, table_path(store_path, C.DEAD_LETTER_TABLE_DIR), DEAD_LETTER_SCHEMA, {})
    if _holds_text_fields(table_schema(spark, path)):
        _refuse_old_layout(store_path, "dead letters' field names and values as strings (before binary payloads)")
    return path


def ensure_recovery_runs_table(spark: SparkSession, store_path: str) -> str:
    """Creates the store's recovery-run log unless it exists; returns its path."""
    path = table_path(store_path, C.RECOVERY_RUNS_TABLE_DIR)
    return _ensure_table(spark, path, RECOVERY_RUNS_SCHEMA, RECOVERY_RUNS_TABLE_PROPERTIES)


def ensure_redrive_runs_table(spark: SparkSession, store_path: str) -> str:
    """Creates the store's redrive-run log unless it exists; returns its path."""
    path = table_path(store_path, C.REDRIVE_RUNS_TABLE_DIR)
    return _ensure_table(spark, path, REDRIVE_RUNS_SCHEMA, RECOVERY_RUNS_TABLE_PROPERTIES)


def ensure_give_up_reasons_table(spark: SparkSession, store_path: str) -> str:
    """Creates the store's table of give-up reasons unless it exists; returns its path."""
    path = table_path(store_path, C.GIVE_UP_REASONS_TABLE_DIR)
    return _ensure_table(spark, path, GIVE_UP_REASONS_SCHEMA, RECOVERY_RUNS_TABLE_PROPERTIES)


def ensure_redrive_columns(spark: SparkSession, store_path: str) -> str:
    """The dead-letter table's path, with the redrive columns added if it was made before them (one
    ALTER TABLE, once per store); the table must exist."""
    path = table_path(store_path, C.DEAD_LETTER_TABLE_DIR)
    missing = [name for name in REDRIVE_COLUMNS if name not in table_schema(spark, path).names]
    if missing:
        columns = ", ".join(f"{name} {REDRIVE_COLUMNS[name]}" for name in missing)
        spark.sql(f"ALTER TABLE {quoted_path(path)} ADD COLUMNS ({columns})")
    return path


# A concurrent creator is waited out for up to 0.2 + 0.4 + ... + 1.2 s = 4.2 s.
CREATE_TABLE_ATTEMPTS = 6
# What creating a table raises while another creator is part-way (see _ensure_table).
CONCURRENT_CREATE_ERRORS = ("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", "DELTA_TABLE_NOT_FOUND")
# What SQL's CREATE TABLE says of a location that is not empty.
_ALREADY_EXISTS = "TABLE_OR_VIEW_ALREADY_EXISTS"
# Creators in one process take turns, so threads of one driver (two recovery runs) never race;
# creators in other processes are waited out as above.
_CREATE_LOCK = threading.Lock()


def _ensure_table(
    spark: SparkSession,
    path: str,
    schema: StructType,
    properties: dict[str, str],
    partition_by: str | None = None,
) -> str:
    """Creates a Delta table at ``path`` unless it exists, tolerating a concurrent creator.

    Two creators racing on one location (two recovery runs writing their first dead letter) see each
    other as a commit conflict, "already exists", or, while the other is part-way, a ``_delta_log``
    folder with no commit yet (DELTA_TABLE_NOT_FOUND) or a first commit that appeared after this
    command's analysis (DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION). All are waited out; a location
    that still is not a Delta table after the last wait raises the last error (a folder of other
    files, or a ``_delta_log`` a crashed creator left empty, is the user's to move).
    """
    with _CREATE_LOCK:
        return _create_table(spark, path, schema, properties, partition_by)


def _create_table(
    spark: SparkSession, path: str, schema: StructType, properties: dict[str, str], partition_by: str | None
) -> str:
    last_error: Exception | None = None
    for attempt in range(CREATE_TABLE_ATTEMPTS):
        if is_delta_table(spark, path):
            return path
        try:
            create_table(spark, path, schema, properties, partition_by)
            return path
        except Exception as error:
            if not _is_concurrent_create(error):
                raise
            last_error = error
            if _ALREADY_EXISTS in str(error):
                # SQL's CREATE says only that the location is taken: by a table (now complete), by a
                # creator mid-way, or by other files, which no wait will change.
                found = not_a_table_error(spark, path)
                if found is None:
                    return path
                if not has_delta_log(spark, path):
                    raise found from None
                last_error = found
            _wait_for_other_creator(0.2 * (attempt + 1))
    if is_delta_table(spark, path):
        return path
    assert last_error is not None
    raise last_error


def _wait_for_other_creator(seconds: float) -> None:
    """Sleeps between creation attempts (its own function, so tests can stand in for the other creator)."""
    time.sleep(seconds)


def _is_concurrent_create(error: Exception) -> bool:
    """True when ``error`` is what creating a table looks like while another creator is mid-way."""
    text = str(error)
    return is_lost_race(error) or "already exists" in text.lower() or any(e in text for e in CONCURRENT_CREATE_ERRORS)

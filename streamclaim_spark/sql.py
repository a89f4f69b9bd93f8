"""SQL access to a store: one Spark catalog database (``streamclaim``) with a view per kind of row.

``register(spark, store_path)`` creates the database and the views ``entries``, ``streams``, ``groups``,
``consumers``, ``pending``, ``dead_letters`` and ``recovery_runs`` over the store's Delta tables. IDs are
shown as Redis' ``ms-seq`` text (``id``) and as unsigned ``DECIMAL(20,0)`` parts (``id_ms``, ``id_seq``) for
ordering; ``pending.idle_ms`` and the consumers' ``idle_ms``/``inactive_ms`` are computed at query time.
The views live in the session's catalog, so each new Spark application registers them again (cheap).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import DEFAULT_DATABASE
from streamclaim_spark.core.ids import STORED_OFFSET
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.delta_io import is_delta_table
from streamclaim_spark.state.tables import (
    ensure_dead_letter_table,
    ensure_recovery_runs_table,
    table_path,
)

VIEWS = ("entries", "streams", "groups", "consumers", "pending", "dead_letters", "recovery_runs")

# Query time in Unix ms; current_timestamp() is fixed once per query, so every row sees the same "now".
NOW_MS = "unix_millis(current_timestamp())"


def unsigned_sql(stored: str) -> str:
    """SQL for a stored (shifted) ID part as the unsigned value Redis shows (DECIMAL(20,0))."""
    return f"CAST(CAST({stored} AS DECIMAL(20,0)) + {STORED_OFFSET}BD AS DECIMAL(20,0))"


def id_sql(ms: str, seq: str) -> str:
    """SQL rendering stored ID columns as ``ms-seq`` text (the SQL twin of ``snapshot.id_text``)."""
    return f"concat(CAST({unsigned_sql(ms)} AS STRING), '-', CAST({unsigned_sql(seq)} AS STRING))"


def _millis_timestamp(column: str) -> str:
    """A Unix-ms column as a TIMESTAMP, null for Redis' -1 "never"."""
    return f"CASE WHEN {column} >= 0 THEN timestamp_millis({column}) END"


def _table(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def view_queries(store_path: str) -> dict[str, str]:
    """The SELECT behind each view, keyed by view name."""
    state = _table(table_path(store_path, C.STATE_TABLE_DIR))

    def rows(kind: str) -> str:
        return f"{state} WHERE {C.ROW_KIND} = '{kind}'"

    return {
        "entries": (
            f"SELECT {C.STREAM}, {id_sql(C.ID_MS, C.ID_SEQ)} AS id, {unsigned_sql(C.ID_MS)} AS id_ms, "
            f"{unsigned_sql(C.ID_SEQ)} AS id_seq, {C.FIELDS} FROM {rows(C.KIND_ENTRY)}"
        ),
        "streams": (
            f"SELECT {C.STREAM}, {C.ENTRY_COUNT} AS length, {C.ENTRIES_ADDED}, "
            f"{id_sql(C.FIRST_MS, C.FIRST_SEQ)} AS first_id, {id_sql(C.LAST_MS, C.LAST_SEQ)} AS last_id, "
            f"{id_sql(C.MAX_DELETED_MS, C.MAX_DELETED_SEQ)} AS max_deleted_id, {C.GROUP_NAMES} "
            f"FROM {rows(C.KIND_STREAM)}"
        ),
        "groups": (
            f"SELECT {C.STREAM}, {C.GROUP}, {id_sql(C.LAST_MS, C.LAST_SEQ)} AS last_delivered_id, "
            f"CASE WHEN {C.ENTRIES_READ} >= 0 THEN {C.ENTRIES_READ} END AS {C.ENTRIES_READ} "
            f"FROM {rows(C.KIND_GROUP)}"
        ),
        "consumers": (
            f"SELECT {C.STREAM}, {C.GROUP}, {C.CONSUMER}, {C.SEEN_TIME_MS}, {C.ACTIVE_TIME_MS}, "
            f"{_millis_timestamp(C.SEEN_TIME_MS)} AS seen_at, {_millis_timestamp(C.ACTIVE_TIME_MS)} AS active_at, "
            f"{NOW_MS} - {C.SEEN_TIME_MS} AS idle_ms, "
            f"CASE WHEN {C.ACTIVE_TIME_MS} >= 0 THEN {NOW_MS} - {C.ACTIVE_TIME_MS} END AS inactive_ms "
            f"FROM {rows(C.KIND_CONSUMER)}"
        ),
        "pending": (
            f"SELECT {C.STREAM}, {C.GROUP}, {id_sql(C.ID_MS, C.ID_SEQ)} AS id, {unsigned_sql(C.ID_MS)} AS id_ms, "
            # An XNACKed entry (Redis 8.8) has no owner, delivery time 0 as Redis reports it, no
            # delivery timestamp and no idle time; its stored time is negative (model.nack_time). The
            # expressions below read the stored column: a FROM column wins over a lateral alias.
            f"{unsigned_sql(C.ID_SEQ)} AS id_seq, {C.OWNER}, {C.DELIVERY_COUNT}, "
            f"GREATEST({C.DELIVERY_TIME_MS}, 0) AS {C.DELIVERY_TIME_MS}, "
            f"{_millis_timestamp(C.DELIVERY_TIME_MS)} AS delivered_at, "
            f"CASE WHEN {C.DELIVERY_TIME_MS} >= 0 THEN {NOW_MS} - {C.DELIVERY_TIME_MS} END AS idle_ms "
            f"FROM {rows(C.KIND_PENDING)}"
        ),
        "dead_letters": f"SELECT * FROM {_table(table_path(store_path, C.DEAD_LETTER_TABLE_DIR))}",
        "recovery_runs": f"SELECT * FROM {_table(table_path(store_path, C.RECOVERY_RUNS_TABLE_DIR))}",
    }


def register(spark: SparkSession, store_path: str, database: str = DEFAULT_DATABASE) -> list[str]:
    """Creates ``database`` and (re)creates its views over the store at ``store_path``.

    The dead-letter and run-log tables are created empty if the recovery job has not run yet, so every
    view can be queried. Registering again (e.g. for another store) replaces the views.

    Args:
        spark: A Delta-enabled session.
        store_path: Folder of the store.
        database: Catalog database to put the views in (default ``streamclaim``).

    Returns:
        The qualified view names, e.g. ``["streamclaim.entries", ...]``.

    Raises:
        FileNotFoundError: No store at ``store_path``.
    """
    if not database.isidentifier():
        raise InvalidArgumentError(f"database={database!r}: give a plain SQL identifier such as 'streamclaim'")
    state = table_path(store_path, C.STATE_TABLE_DIR)
    if not is_delta_table(spark, state):
        raise FileNotFoundError(
            f"store_path={store_path!r}: no store there (no Delta table at {state}); "
            "check the path, or create the store with StreamStore.open"
        )
    ensure_dead_letter_table(spark, store_path)
    ensure_recovery_runs_table(spark, store_path)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    names = []
    for view, query in view_queries(store_path).items():
        name = f"`{database}`.`{view}`"
        spark.sql(f"CREATE OR REPLACE VIEW {name} AS {query}")
        names.append(f"{database}.{view}")
    return names

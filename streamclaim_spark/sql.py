"""SQL access to a store: one Spark catalog database (``streamclaim``) with a view per kind of row.

``register(spark, store_path)`` creates the database and the views ``entries``, ``streams``, ``groups``,
``consumers``, ``pending``, ``dead_letters``, ``recovery_runs``, ``redrive_runs`` and ``metrics`` (per
group: pending, stale, oldest idle, lag, consumers, dead letters of the last day) over the store's Delta
tables. IDs are
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
    ensure_redrive_columns,
    ensure_redrive_runs_table,
    table_path,
)

VIEWS = (
    *("entries", "streams", "groups", "consumers", "pending"),
    *("dead_letters", "recovery_runs", "redrive_runs", "metrics"),
)
# The idle time from which the metrics view counts a pending entry as stale: the recovery job's default
# min_idle (register's ``stale_after_ms`` sets another).
DEFAULT_STALE_AFTER_MS = 300_000

# Query time in Unix ms; current_timestamp() is fixed once per query, so every row sees the same "now".
NOW_MS = "unix_millis(current_timestamp())"


def unsigned_sql(stored: str) -> str:
    """SQL for a stored (shifted) ID part as the unsigned value Redis shows (DECIMAL(20,0))."""
    return f"CAST(CAST({stored} AS DECIMAL(20,0)) + {STORED_OFFSET}BD AS DECIMAL(20,0))"


def id_sql(ms: str, seq: str) -> str:
    """SQL rendering stored ID columns as ``ms-seq`` text (the SQL twin of ``snapshot.id_text``)."""
    return f"concat(CAST({unsigned_sql(ms)} AS STRING), '-', CAST({unsigned_sql(seq)} AS STRING))"


def _id_less(a: tuple[str, str], b: tuple[str, str]) -> str:
    """SQL: stored ID ``a`` (ms, seq columns) is before ``b`` (stored parts keep the IDs' order)."""
    return f"({a[0]} < {b[0]} OR ({a[0]} = {b[0]} AND {a[1]} < {b[1]}))"


def _id_equal(a: tuple[str, str], b: tuple[str, str]) -> str:
    return f"({a[0]} = {b[0]} AND {a[1]} = {b[1]})"


def lag_sql(stream: str, group: str) -> str:
    """SQL for a group's lag (entries not yet delivered to it, null when unknowable) from its stream head
    (alias ``stream``) and its head (alias ``group``): core.lag.lag, Redis' streamReplyWithCGLag, as SQL."""
    first = (f"{stream}.{C.FIRST_MS}", f"{stream}.{C.FIRST_SEQ}")
    last = (f"{stream}.{C.LAST_MS}", f"{stream}.{C.LAST_SEQ}")
    deleted = (f"{stream}.{C.MAX_DELETED_MS}", f"{stream}.{C.MAX_DELETED_SEQ}")
    position = (f"{group}.{C.LAST_MS}", f"{group}.{C.LAST_SEQ}")
    added, length = f"{stream}.{C.ENTRIES_ADDED}", f"{stream}.{C.ENTRY_COUNT}"
    none_deleted = f"({unsigned_sql(deleted[0])} = 0 AND {unsigned_sql(deleted[1])} = 0)"
    # range_has_tombstones(stream, group position): may an entry after the group's position be deleted?
    tombstones = (
        f"NOT ({length} = 0 OR {none_deleted}) AND NOT {_id_less(deleted, first)} AND NOT {_id_less(deleted, position)}"
    )
    # estimate_entries_read(stream, group position), -1 for unknown.
    estimate = (
        f"CASE WHEN {length} = 0 AND NOT {_id_less(last, position)} THEN {added} "
        f"WHEN {_id_equal(position, last)} THEN {added} "
        f"WHEN {_id_less(last, position)} THEN -1 "
        f"WHEN {none_deleted} OR {_id_less(deleted, first)} THEN "
        f"CASE WHEN {_id_less(position, first)} THEN {added} - {length} "
        f"WHEN {_id_equal(position, first)} THEN {added} - {length} + 1 ELSE -1 END "
        "ELSE -1 END"
    )
    read = f"{group}.{C.ENTRIES_READ}"
    return (
        f"CASE WHEN {added} = 0 THEN 0 "
        f"WHEN {read} != {C.ENTRIES_READ_UNKNOWN} AND NOT ({tombstones}) THEN {added} - {read} "
        f"WHEN ({estimate}) = -1 THEN NULL ELSE {added} - ({estimate}) END"
    )


def _millis_timestamp(column: str) -> str:
    """A Unix-ms column as a TIMESTAMP, null for Redis' -1 "never"."""
    return f"CASE WHEN {column} >= 0 THEN timestamp_millis({column}) END"


def _table(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def metrics_sql(store_path: str, groups: str, stale_after_ms: int, dead_letters_table: bool = True) -> str:
    """The metrics view's SELECT: per group, what monitoring watches, from the ``groups`` SELECT and the
    PEL, consumer and dead-letter rows (docs/SQL.md, "Metrics"); ``dead_letters_table`` False: the store has
    none yet, so none were dead-lettered (read as no rows, nothing created)."""
    state = _table(table_path(store_path, C.STATE_TABLE_DIR))
    dead_letters = (
        _table(table_path(store_path, C.DEAD_LETTER_TABLE_DIR))
        if dead_letters_table
        else f"(SELECT '' AS {C.STREAM}, '' AS {C.GROUP}, current_timestamp() AS dead_lettered_at WHERE false)"
    )
    owned = f"{C.DELIVERY_TIME_MS} >= 0"  # an XNACKed entry has no owner and no idle time (model.nack_time)
    idle = f"{NOW_MS} - {C.DELIVERY_TIME_MS}"
    by_group = f"GROUP BY {C.STREAM}, {C.GROUP}"
    return (
        f"WITH p AS (SELECT {C.STREAM}, {C.GROUP}, count(*) AS pending, "
        f"count_if({owned} AND {idle} >= {stale_after_ms}) AS stale, count_if(NOT ({owned})) AS nacked, "
        f"max(CASE WHEN {owned} THEN {idle} END) AS oldest_idle_ms, max({C.DELIVERY_COUNT}) AS max_delivery_count "
        f"FROM {state} WHERE {C.ROW_KIND} = '{C.KIND_PENDING}' {by_group}), "
        f"c AS (SELECT {C.STREAM}, {C.GROUP}, count(*) AS consumers "
        f"FROM {state} WHERE {C.ROW_KIND} = '{C.KIND_CONSUMER}' {by_group}), "
        f"d AS (SELECT {C.STREAM}, {C.GROUP}, count(*) AS dead_letters_last_day FROM {dead_letters} "
        f"WHERE dead_lettered_at >= current_timestamp() - INTERVAL 1 DAY {by_group}) "
        f"SELECT g.{C.STREAM}, g.{C.GROUP}, coalesce(p.pending, 0) AS pending, coalesce(p.stale, 0) AS stale, "
        f"CAST({stale_after_ms} AS BIGINT) AS stale_after_ms, coalesce(p.nacked, 0) AS nacked, p.oldest_idle_ms, "
        "p.max_delivery_count, g.lag, coalesce(c.consumers, 0) AS consumers, "
        "coalesce(d.dead_letters_last_day, 0) AS dead_letters_last_day "
        f"FROM ({groups}) g LEFT JOIN p USING ({C.STREAM}, {C.GROUP}) LEFT JOIN c USING ({C.STREAM}, {C.GROUP}) "
        f"LEFT JOIN d USING ({C.STREAM}, {C.GROUP})"
    )


def view_queries(store_path: str, stale_after_ms: int = DEFAULT_STALE_AFTER_MS) -> dict[str, str]:
    """The SELECT behind each view, keyed by view name; ``metrics`` counts as stale what is idle at least
    ``stale_after_ms``."""
    state = _table(table_path(store_path, C.STATE_TABLE_DIR))

    def rows(kind: str) -> str:
        return f"{state} WHERE {C.ROW_KIND} = '{kind}'"

    queries = {
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
            f"SELECT g.{C.STREAM}, g.{C.GROUP}, {id_sql(f'g.{C.LAST_MS}', f'g.{C.LAST_SEQ}')} AS last_delivered_id, "
            f"CASE WHEN g.{C.ENTRIES_READ} >= 0 THEN g.{C.ENTRIES_READ} END AS {C.ENTRIES_READ}, "
            f"{lag_sql('s', 'g')} AS lag "
            f"FROM (SELECT * FROM {rows(C.KIND_GROUP)}) g JOIN (SELECT * FROM {rows(C.KIND_STREAM)}) s "
            f"ON g.{C.STREAM} = s.{C.STREAM}"
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
        "redrive_runs": f"SELECT * FROM {_table(table_path(store_path, C.REDRIVE_RUNS_TABLE_DIR))}",
    }
    queries["metrics"] = metrics_sql(store_path, queries["groups"], stale_after_ms)
    return queries


def register(
    spark: SparkSession,
    store_path: str,
    database: str = DEFAULT_DATABASE,
    stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
) -> list[str]:
    """Creates ``database`` and (re)creates its views over the store at ``store_path``.

    The dead-letter and run-log tables are created empty if the recovery job (or the redrive) has not run
    yet, so every view can be queried. Registering again (e.g. for another store) replaces the views.

    Args:
        spark: A Delta-enabled session.
        store_path: Folder of the store.
        database: Catalog database to put the views in (default ``streamclaim``).
        stale_after_ms: The idle time from which ``metrics`` counts a pending entry as stale (5 minutes,
            the recovery job's default ``min_idle``).

    Returns:
        The qualified view names, e.g. ``["streamclaim.entries", ...]``.

    Raises:
        FileNotFoundError: No store at ``store_path``.
    """
    if stale_after_ms < 0:
        raise InvalidArgumentError(f"stale_after_ms={stale_after_ms}: give 0 or more milliseconds")
    if not database.isidentifier():
        raise InvalidArgumentError(f"database={database!r}: give a plain SQL identifier such as 'streamclaim'")
    state = table_path(store_path, C.STATE_TABLE_DIR)
    if not is_delta_table(spark, state):
        raise FileNotFoundError(
            f"store_path={store_path!r}: no store there (no Delta table at {state}); "
            "check the path, or create the store with StreamStore.open"
        )
    ensure_dead_letter_table(spark, store_path)
    ensure_redrive_columns(spark, store_path)  # a table made before redrive gains its columns
    ensure_recovery_runs_table(spark, store_path)
    ensure_redrive_runs_table(spark, store_path)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    names = []
    for view, query in view_queries(store_path, stale_after_ms).items():
        name = f"`{database}`.`{view}`"
        spark.sql(f"CREATE OR REPLACE VIEW {name} AS {query}")
        names.append(f"{database}.{view}")
    return names

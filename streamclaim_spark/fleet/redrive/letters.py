"""The dead-letter side of a redrive: which letters a run may take, taking them, and marking how each ended.

A letter is one row of ``dead_letters``; an entry (stream, group, ID) may have several (it died twice, or a
killed recovery run left a duplicate copy). A run works on entries: it takes every free letter of an entry
at once, so that one put-back answers them all.

A letter is **free** while ``redrive_run_id`` is null, **taken** by a run while that run puts its entry
back, and **redriven** once ``redriven_at`` is set. A run that stops between taking and marking leaves
letters taken but not redriven; the next run adopts them (``adoptable``): run.py decides, from the state
table's history, whether their put-back had landed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.engine.retries import RetryPolicy, run_with_retries
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.recovery.dead_letters import given_up, pairs_only
from streamclaim_spark.state.delta_io import MERGE_TARGET as TARGET
from streamclaim_spark.state.delta_io import committing, merge_into

TAKEN_BY = "redrive_run_id"
TAKEN_AT = "redrive_taken_at"
REDRIVEN_AT = "redriven_at"
# A run without a heartbeat (heartbeat.py) has its taken letters adopted this long after it took them,
# unless it was recorded as failed (then at once): a live run takes, puts back and marks well within it.
ADOPT_AFTER_MS = 10 * 60_000
ENTRY_KEY = [C.STREAM, C.GROUP, "id"]
# Columns of a chosen entry: its key, the payload and count of its newest letter, and its age for the order.
REDRIVES = "_redrives"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
OLDEST = "_oldest"


@dataclass(frozen=True)
class Choice:
    """What a run found among the free letters of its groups: entries to put back, entries that stay dead
    because they were redriven ``max_redrives`` times, and entries left for a later run by ``limit``."""

    chosen: int
    capped: int
    remaining: int


def free_entries(letters: DataFrame, session: SparkSession, pairs: list[Pair], where: str | None) -> DataFrame:
    """Every entry of the groups with a free letter that ``where`` selects: its key, how often it was
    redriven before (REDRIVES), and its oldest free letter's time (OLDEST)."""
    mine = pairs_only(session, letters, pairs)
    # Redrives, not letters: the duplicate letters of one entry are redriven together, by one run.
    redriven = mine.where(F.col(REDRIVEN_AT).isNotNull())
    redrives = redriven.groupBy(*ENTRY_KEY).agg(F.countDistinct(TAKEN_BY).alias(REDRIVES))
    free = mine.where(F.col(TAKEN_BY).isNull())
    if where is not None:
        free = free.where(F.expr(where))
    entries = free.groupBy(*ENTRY_KEY).agg(F.min("dead_lettered_at").alias(OLDEST))
    return entries.join(redrives, ENTRY_KEY, "left").fillna(0, [REDRIVES])


def choose(entries: DataFrame, max_redrives: int | None, limit: int | None) -> tuple[DataFrame, Choice]:
    """The entries a run puts back (oldest letter first, at most ``limit``), and the counts of the others.

    One aggregation counts what the cap and the limit leave out; the chosen entries stay a frame.
    """
    capped = F.lit(False) if max_redrives is None else F.col(REDRIVES) >= F.lit(max_redrives)
    counts = entries.agg(F.count(F.lit(1)).alias("all"), F.sum(F.when(capped, 1).otherwise(0)).alias("capped")).first()
    total, capped_count = (counts["all"], counts["capped"] or 0) if counts is not None else (0, 0)
    eligible = total - capped_count
    open_entries = entries.where(~capped)
    if limit is not None and eligible > limit:
        order = Window.orderBy(OLDEST, *ENTRY_KEY)
        open_entries = open_entries.withColumn("_n", F.row_number().over(order)).where(F.col("_n") <= limit).drop("_n")
    chosen = min(eligible, limit) if limit is not None else eligible
    return open_entries.select(*ENTRY_KEY), Choice(chosen, capped_count, eligible - chosen)


def take(
    session: SparkSession,
    table: str,
    entries: DataFrame,
    run_id: str,
    adopting: list[str],
    now_ms: int,
    policy: RetryPolicy,
) -> None:
    """Marks every free letter of ``entries``, and every letter the ``adopting`` runs took and left, as
    taken by ``run_id``, in one MERGE: a letter another run took meanwhile is not taken again."""
    mine = F.col(f"{TARGET}.{TAKEN_BY}").isNull()
    source = entries.select(*ENTRY_KEY)
    if adopting:
        mine = mine | F.col(f"{TARGET}.{TAKEN_BY}").isin(adopting)
        source = source.unionByName(_taken_rows(session, table, adopting)).distinct()
    condition = _same_entry() & mine & F.col(f"{TARGET}.{REDRIVEN_AT}").isNull()
    values = {TAKEN_BY: F.lit(run_id), TAKEN_AT: F.timestamp_millis(F.lit(now_ms))}
    _update(session, table, source, condition, values, f"REDRIVE TAKE {run_id}", policy)


def taken_by(letters: DataFrame, run_ids: list[str]) -> DataFrame:
    """The letters the runs took and have not marked."""
    return letters.where(F.col(TAKEN_BY).isin(run_ids) & F.col(REDRIVEN_AT).isNull())


def newest_letters(letters: DataFrame) -> DataFrame:
    """One row per entry of ``letters``: its key, its newest letter's fields and delivery count (0 for an
    entry given up on with XNACK FATAL: 2^63-1 is a marker, not a count), and its oldest letter's time."""
    newest = Window.partitionBy(*ENTRY_KEY).orderBy(F.col("dead_lettered_at").desc(), F.col("run_id").desc())
    return (
        letters.withColumn(OLDEST, F.min("dead_lettered_at").over(Window.partitionBy(*ENTRY_KEY)))
        .withColumn("_newest", F.row_number().over(newest))
        .where(F.col("_newest") == 1)
        .select(
            *ENTRY_KEY,
            C.FIELDS,
            F.when(given_up(), F.lit(0)).otherwise(F.col(C.DELIVERY_COUNT)).alias(C.DELIVERY_COUNT),
            OLDEST,
        )
    )


def adoptable(
    letters: DataFrame,
    failed: list[str],
    pairs: list[Pair],
    session: SparkSession,
    now_ms: int,
    gone: Callable[[str], bool | None],
) -> dict[str, int]:
    """The runs that took letters of the groups and are gone before marking them, with when they took
    them (Unix ms): a run recorded as failed, one whose heartbeat stopped (``gone`` True: heartbeat.py),
    or one without a heartbeat that took them more than ADOPT_AFTER_MS ago (a run of code older than
    heartbeats, or on Spark Connect). A run whose heartbeat is fresh is alive, however old its take."""
    taken = pairs_only(session, letters, pairs).where(F.col(TAKEN_BY).isNotNull() & F.col(REDRIVEN_AT).isNull())
    runs = taken.groupBy(TAKEN_BY).agg(F.unix_millis(F.min(TAKEN_AT)).alias("_taken_at")).collect()
    found: dict[str, int] = {}
    for row in runs:
        run, taken_at = row[TAKEN_BY], row["_taken_at"] or 0
        by_heartbeat = None if run in failed else gone(run)
        if run in failed or by_heartbeat or (by_heartbeat is None and taken_at <= now_ms - ADOPT_AFTER_MS):
            found[run] = taken_at
    return found


def mark(
    session: SparkSession,
    table: str,
    back: DataFrame,
    run_id: str,
    runs: list[str],
    now_ms: int,
    policy: RetryPolicy,
    taken_at_ms: int | None = None,
) -> None:
    """Ends the runs' taken letters in one MERGE: the letters of ``back``'s entries (put back or re-added)
    are redriven at ``now_ms``, in ``run_id``'s name (taken at ``taken_at_ms`` when given: an adopter
    marking a stopped run's put-back gives that run's take); the others are freed again (they stay dead,
    for a later run to try)."""
    letters_taken = F.col(f"{TARGET}.{TAKEN_BY}").isin(runs) & F.col(f"{TARGET}.{REDRIVEN_AT}").isNull()
    redriven = back.select(*ENTRY_KEY).withColumn("_back", F.lit(True))
    source = _taken_rows(session, table, runs).join(redriven, ENTRY_KEY, "left")
    condition = _same_entry() & letters_taken
    went_back = F.col("s._back").isNotNull()
    values = {
        TAKEN_BY: F.when(went_back, F.lit(run_id)),
        TAKEN_AT: F.when(
            went_back,
            F.col(f"{TARGET}.{TAKEN_AT}") if taken_at_ms is None else F.timestamp_millis(F.lit(taken_at_ms)),
        ),
        REDRIVEN_AT: F.when(went_back, F.timestamp_millis(F.lit(now_ms))),
    }
    _update(session, table, source, condition, values, f"REDRIVE MARK {run_id}", policy)


def _taken_rows(session: SparkSession, table: str, runs: list[str]) -> DataFrame:
    """The entries whose letters the runs took and have not marked, read from the table as it is now."""
    return taken_by(session.read.format("delta").load(table), runs).select(*ENTRY_KEY).distinct()


def _same_entry() -> Column:
    """A letter of the source's entry (merge_into names the source ``s``)."""
    return (
        (F.col(f"{TARGET}.{C.STREAM}") == F.col(f"s.{C.STREAM}"))
        & (F.col(f"{TARGET}.{C.GROUP}") == F.col(f"s.{C.GROUP}"))
        & (F.col(f"{TARGET}.id") == F.col("s.id"))
    )


def _update(
    session: SparkSession,
    table: str,
    source: DataFrame,
    condition: Column,
    values: dict[str, Column],
    operation: str,
    policy: RetryPolicy,
) -> None:
    """One MERGE that updates the matched letters (re-run from its source after a lost race)."""

    def merge(_: int) -> None:
        with committing(session):
            session.conf.set(_USER_METADATA, operation)
            try:
                merge_into(session, table, source, condition).whenMatched().update(values).merge()
            finally:
                session.conf.unset(_USER_METADATA)

    run_with_retries(merge, policy, operation)

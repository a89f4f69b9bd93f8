"""A recovery run's dead letters: copy the poison entries out, find the copies to take back, withdraw them.

Copy first, acknowledge second (the claim commit acknowledges the copies still exactly as copied): a
crash between the two leaves the entry pending, so the next run copies it again (a duplicate dead
letter) but no entry is ever lost. A copy whose entry changed before the acknowledgement is withdrawn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.integers import LLONG_MAX
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.engine.merge_commit import committed_version
from streamclaim_spark.engine.retries import run_with_retries
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.claims.selection import pending_with_fields
from streamclaim_spark.fleet.claims.staleness import is_stale
from streamclaim_spark.fleet.recovery.plan import COPY_ID, COPY_KEY, OWNER_KEY, entries_of, pending_of, with_owner_key
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.columns import id_text, stored_id_columns
from streamclaim_spark.state.delta_io import MERGE_TARGET as TARGET
from streamclaim_spark.state.delta_io import committing, is_delta_table, merge_into
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.nack_zone import nacked_at_ms
from streamclaim_spark.state.schema import kind_in
from streamclaim_spark.state.snapshot import Snapshot
from streamclaim_spark.state.tables import ensure_dead_letter_table, table_path

# The run's log lines name the job, not the module that writes them (docs/RECOVERY.md shows them).
log = logging.getLogger("streamclaim_spark.fleet.recovery")

# The reasons a dead letter carries (``reason``; the second with its count and the run's max_deliveries).
NACKED_FATAL = "XNACK FATAL"
MAX_DELIVERIES_EXCEEDED = "max-deliveries exceeded"

_GIVEN_REASON = "_given_reason"
_PAIR_SCHEMA = StructType([StructField(C.STREAM, StringType()), StructField(C.GROUP, StringType())])


@dataclass(frozen=True)
class Copies:
    """What ``copy_dead_letters`` appended: how many copies each group got, and how many in all were of
    entries given up on with XNACK FATAL (the others exceeded ``max_deliveries``)."""

    counts: dict[Pair, int] = field(default_factory=dict)
    fatal: int = 0

    def reasons(self) -> dict[str, int]:
        """The copies counted by reason (reasons without copies left out)."""
        exceeded = sum(self.counts.values()) - self.fatal
        return {reason: n for reason, n in ((NACKED_FATAL, self.fatal), (MAX_DELIVERIES_EXCEEDED, exceeded)) if n}


def copy_dead_letters(
    runner: Runner, path: str, snapshot: Snapshot, pairs: list[Pair], rules: GroupRules, now: int, run_id: str
) -> Copies:
    """Appends every poison entry of the groups that dead-letter (by their rules), as ``snapshot`` shows it,
    to the store's ``dead_letters``.

    The poison filter comes first, so Delta skips every file whose delivery counts stay within
    ``max_deliveries`` (the lowest of the rules': usually all of them) before anything is joined; the count
    by group and reason is one query.
    """
    letting = rules.where(lambda rule: rule.dead_letter, pairs)
    if not letting:
        return Copies()
    count = F.col(C.DELIVERY_COUNT)
    condition = rules.column(
        lambda rule: is_stale(now, rule.min_idle_ms, rule.backoff) & (count > F.lit(rule.max_deliveries)), letting
    )
    if len(rules.grouped(letting)) > 1:  # the CASE reads columns per row: a literal bound still skips files
        condition = (count > F.lit(min(rules.rule(pair).max_deliveries for pair in letting))) & condition
    poison = pending_of(snapshot, letting).where(condition)
    fatal = F.sum(F.when(given_up(), 1).otherwise(0)).alias("fatal")
    tallies = poison.groupBy(C.STREAM, C.GROUP).agg(F.count(F.lit(1)).alias("count"), fatal).collect()
    counts = {(row[C.STREAM], row[C.GROUP]): row["count"] for row in tallies}
    if not counts:
        return Copies()
    entries = entries_of(snapshot, list(counts)).select(C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
    # The reason is taken on the PEL rows, where the rules' partitions can be read.
    given = given_reasons(runner.session(), path, poison)
    with_reason = given.withColumn("reason", rules.column(lambda rule: reason(rule.max_deliveries), letting))
    with_reason = with_reason.drop(_GIVEN_REASON)
    rows = pending_with_fields(with_reason, entries, [C.STREAM, C.ID_MS, C.ID_SEQ], extra=["reason"]).select(
        F.lit(run_id).alias("run_id"), F.timestamp_millis(F.lit(now)).alias("dead_lettered_at"), "*"
    )
    session = runner.session()
    table = ensure_dead_letter_table(session, path)
    # mergeSchema: a dead-letter table made before a column was added (reason) gains it; older rows hold null.
    (
        rows.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("userMetadata", f"DEAD LETTER {run_id}")
        .save(table)
    )
    log.info(
        "dead letters copied: %d entries of %d group(s) (dead_letters version %d)",
        sum(counts.values()),
        len(counts),
        committed_version(session),
        extra=C.PROGRESS,
    )
    return Copies(counts, sum(row["fatal"] for row in tallies))


def reason(max_deliveries: int) -> Column:
    """Why a poison row is dead-lettered: its consumer gave up on it (``given_up``; with the reason it gave
    to ``StreamStore.give_up``, if any: ``given_reasons``), or it was delivered more than ``max_deliveries`` times."""
    count = F.col(C.DELIVERY_COUNT)
    exceeded = F.format_string(f"{MAX_DELIVERIES_EXCEEDED} (%d > %d)", count, F.lit(max_deliveries))
    fatal = F.concat(F.lit(NACKED_FATAL), F.coalesce(F.concat(F.lit(": "), F.col(_GIVEN_REASON)), F.lit("")))
    return F.when(given_up(), fatal).otherwise(exceeded)


def given_reasons(session: SparkSession, path: str, poison: DataFrame) -> DataFrame:
    """``poison`` with _GIVEN_REASON: for an entry given up on, the newest reason ``StreamStore.give_up``
    wrote for it at or after the XNACK its row holds (its NACK-zone time says when); else null."""
    table = table_path(path, C.GIVE_UP_REASONS_TABLE_DIR)
    if not is_delta_table(session, table):
        return poison.withColumn(_GIVEN_REASON, F.lit(None).cast(StringType()))
    ms, seq = stored_id_columns(F.col("id"))
    reasons = (
        session.read.format("delta")
        .load(table)
        .select(
            C.STREAM,
            C.GROUP,
            ms.alias(C.ID_MS),
            seq.alias(C.ID_SEQ),
            F.col("reason").alias(_GIVEN_REASON),
            "given_up_at",
        )
    )
    nacked_ms = nacked_at_ms(F.col(C.DELIVERY_TIME_MS))
    key = [C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ]  # a PEL row's: one row per entry and group
    matches = (
        poison.where(given_up())
        .select(*key, nacked_ms.alias("_nacked_ms"))
        .join(reasons, key)
        .where(F.unix_millis(F.col("given_up_at")) >= F.col("_nacked_ms"))
        .withColumn("_newest", F.row_number().over(Window.partitionBy(*key).orderBy(F.col("given_up_at").desc())))
        .where(F.col("_newest") == 1)
        .select(*key, _GIVEN_REASON)
    )
    return poison.join(matches, key, "left")


def given_up() -> Column:
    """Whether a pending row's consumer gave up on it: XNACK FATAL sets the delivery count to 2^63 - 1."""
    return F.col(C.DELIVERY_COUNT) == F.lit(LLONG_MAX)


def reasons_of(runner: Runner, path: str, run_id: str) -> dict[str, int]:
    """How many of the run's dead letters (its withdrawn copies are gone) died of each reason: one query,
    which only a run that withdrew copies needs (otherwise ``Copies.reasons`` is exact)."""
    table = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    copies = runner.session().read.format("delta").load(table).where(F.col("run_id") == F.lit(run_id))
    kinds = copies.groupBy(F.when(given_up(), NACKED_FATAL).otherwise(MAX_DELIVERIES_EXCEEDED).alias("kind")).count()
    return {row["kind"]: row["count"] for row in kinds.collect()}


def run_copies(runner: Runner, path: str, run_id: str) -> DataFrame:
    """This run's dead letters, keyed as ``plan.classify`` joins them."""
    table = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    copies = runner.session().read.format("delta").load(table).where(F.col("run_id") == F.lit(run_id))
    return copies.select(C.STREAM, C.GROUP, F.col("id").alias(COPY_ID), C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS)


def pairs_only(session: SparkSession, frame: DataFrame, pairs: Iterable[Pair]) -> DataFrame:
    """``frame``'s rows of the given (stream, group) pairs."""
    wanted = json_frame(session, [{C.STREAM: key, C.GROUP: group} for key, group in pairs], _PAIR_SCHEMA)
    return frame.join(F.broadcast(wanted), [C.STREAM, C.GROUP], "left_semi")


def unmatched_copies(runner: Runner, copies: DataFrame, pairs: list[Pair], read_version: int) -> DataFrame:
    """The groups' copies whose entry the round found changed (acknowledged or claimed by others)."""
    partitions = [group_partition(*pair) for pair in pairs]
    pending = (
        runner.table_at(read_version)
        .where(kind_in(partitions, C.KIND_PENDING))
        .select(
            C.STREAM, C.GROUP, id_text(C.ID_MS, C.ID_SEQ).alias(COPY_ID), C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS
        )
    )
    unmatched = with_owner_key(pairs_only(runner.session(), copies, pairs))
    return unmatched.join(with_owner_key(pending).drop(C.OWNER), COPY_KEY, "left_anti").drop(OWNER_KEY)


def withdraw_copies(runner: Runner, path: str, run_id: str, frames: list[DataFrame]) -> None:
    """Deletes this run's copies of entries it did not acknowledge (they are still, or again, in use)."""
    unmatched = frames[0]
    for frame in frames[1:]:
        unmatched = unmatched.unionByName(frame)
    unmatched = unmatched.select(C.STREAM, C.GROUP, COPY_ID).distinct()
    sample = [f"{row[C.STREAM]}/{row[C.GROUP]} {row[COPY_ID]}" for row in unmatched.limit(10).collect()]
    log.warning(
        "dead-lettered entries changed before the acknowledgement; withdrawing their copies: %s", ", ".join(sample)
    )
    table = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    condition = (
        (F.col(f"{TARGET}.run_id") == F.lit(run_id))
        & (F.col(f"{TARGET}.{C.STREAM}") == F.col(f"s.{C.STREAM}"))
        & (F.col(f"{TARGET}.{C.GROUP}") == F.col(f"s.{C.GROUP}"))
        & (F.col(f"{TARGET}.id") == F.col(f"s.{COPY_ID}"))
    )

    def delete(_: int) -> None:
        session = runner.session()
        with committing(session):
            session.conf.set("spark.databricks.delta.commitInfo.userMetadata", f"DEAD LETTER WITHDRAW {run_id}")
            merge_into(session, table, unmatched, condition).whenMatched().delete().merge()

    run_with_retries(delete, runner.retry_policy, "DEAD LETTER WITHDRAW")

"""The Spark form of a plan's commit: one guarded Delta MERGE, or one in-place UPDATE; and its version read back.

``transaction.commit_plan`` takes this form where a plan cannot commit as a transaction of files
(file_commit.py): on Spark Connect, for frames of source rows, for an in-place update, for writes
reaching more rows than the driver rewrites, and where the placement forces Spark.

Every partition of the state table has one head row (a stream's or a group's) with a ``version``.
A command reads a snapshot, decides, and commits one MERGE that (1) checks that every head it decided
on still has the version it read, aborting through ``raise_error`` otherwise, and (2) applies its
writes. Delta's optimistic concurrency covers the window between the MERGE's own read and its commit;
the guard covers the window between the command's read and the MERGE's start. A command that loses
either way is re-run from a fresh snapshot with jittered exponential backoff (retries.py). The MERGE's
source rows, and what each asks of it, are built in merge_source.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.partitions import bucket_of, buckets_of
from streamclaim_spark.core.plan import Plan, is_heads_in_bulk
from streamclaim_spark.engine.file_removals import removal_deletes
from streamclaim_spark.engine.merge_source import (
    CLAIM_CUTOFF,
    CLAIM_FORCE,
    CLAIM_JUST_ID,
    CLAIM_LIVE,
    CLAIM_RETRY,
    CLAIM_STEPS,
    OP_CLAIM,
    OP_DELETE,
    OP_EXPECT,
    OP_GUARD,
    local_source,
    source_frame,
    source_rows,
)
from streamclaim_spark.errors import InvalidArgumentError, NothingCommittedError
from streamclaim_spark.state.columns import id_between, stored_id
from streamclaim_spark.state.commit_settings import apply_settings, commit_settings
from streamclaim_spark.state.conflicts import STALE_SNAPSHOT_MARKER
from streamclaim_spark.state.delta_io import AUTO_COMPACTION_OPERATION, commit_info, merge_into, update_in_place
from streamclaim_spark.state.delta_io import MERGE_TARGET as TARGET
from streamclaim_spark.state.schema import COLUMN_NAMES, bucket_column

# A row never moves: its partition (hence its bucket) is part of its key.
_VALUE_COLUMNS = tuple(name for name in COLUMN_NAMES if name not in C.KEY_COLUMNS and name != C.BUCKET)
_LAST_COMMIT_VERSION = "spark.databricks.delta.lastCommitVersionInSession"
_RAISE_STALE = f"raise_error('{STALE_SNAPSHOT_MARKER}')"


# Delivery count written by a claim win: RETRYCOUNT, else unchanged with JUSTID, else one more per step.
# A FORCE insert starts from Redis' fresh NACK count of 1.
_CLAIMED_COUNT = (
    f"CASE WHEN s.{CLAIM_RETRY} IS NOT NULL THEN s.{CLAIM_RETRY} "
    f"WHEN s.{CLAIM_JUST_ID} THEN {TARGET}.{C.DELIVERY_COUNT} ELSE {TARGET}.{C.DELIVERY_COUNT} + s.{CLAIM_STEPS} END"
)
_FORCED_COUNT = (
    f"CASE WHEN s.{CLAIM_RETRY} IS NOT NULL THEN s.{CLAIM_RETRY} "
    f"WHEN s.{CLAIM_JUST_ID} THEN 1 ELSE 1 + s.{CLAIM_STEPS} END"
)
_IS_IDLE = f"(s.{CLAIM_CUTOFF} IS NULL OR {TARGET}.{C.DELIVERY_TIME_MS} <= s.{CLAIM_CUTOFF})"
_CLAIM_SET: dict[str, str | Column] = {
    C.OWNER: f"s.{C.OWNER}",
    C.DELIVERY_TIME_MS: f"s.{C.DELIVERY_TIME_MS}",
    C.DELIVERY_COUNT: _CLAIMED_COUNT,
    C.TXN: f"s.{C.TXN}",
}


@dataclass(frozen=True)
class InPlaceUpdate:
    """Rows rewritten where they lie by one Delta UPDATE: no source, no join (a bulk claim's fast path).

    ``condition`` selects the rows; it must carry the bucket and partition filters and every predicate
    the decision relied on (e.g. the idle cutoff), so the commit holds whatever changed since.
    ``assignments`` gives columns new values as expressions over the row itself; a guard is an
    assignment that ``raise_error``s with ``STALE_SNAPSHOT_MARKER`` when a head's version moved.
    """

    condition: Column
    assignments: dict[str, Column]


def commit_update(spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int) -> int:
    """Commits ``plan``'s in-place update (``Plan.update``, an ``InPlaceUpdate``) as one Delta UPDATE;
    returns its version."""
    if plan.writes or plan.frames or plan.appends or plan.removals:
        raise InvalidArgumentError("a plan commits either rows (one MERGE) or one in-place update, not both")
    spark.conf.unset(_LAST_COMMIT_VERSION)
    apply_settings(spark, commit_settings(operation, small=False, rows_per_file=rows_per_file))
    update: InPlaceUpdate = plan.update
    update_in_place(spark, table_path, update.condition, dict(update.assignments))
    return own_commit_version(spark, table_path, operation)


def commit_merge(spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int) -> int:
    """Commits ``plan``'s writes, frames, appends and removals as one guarded MERGE; returns its version.
    Raises ``NothingCommittedError`` when Delta committed nothing."""
    # Cleared first, so a MERGE that changes nothing (Delta then skips the commit) is told apart.
    spark.conf.unset(_LAST_COMMIT_VERSION)
    if plan.rewrites:
        raise InvalidArgumentError("rows rewritten in place (Plan.rewrites) commit only as files, on a classic session")
    # Appended rows the session cannot commit as files are inserted by the MERGE (nothing matches them),
    # removed rows deleted by key (the MERGE reports no count for them: ``Removal.removed`` stays None).
    frames = [
        *plan.frames,
        *(source_frame(_frame(spark, rows)) for rows in plan.appends),
        *(removal_deletes(removal) for removal in plan.removals),
    ]
    heads_in_bulk = is_heads_in_bulk(plan)
    small = not frames and not heads_in_bulk
    if plan.writes:
        frames.insert(0, local_source(spark, source_rows(plan.writes)))
    source = frames[0]
    for frame in frames[1:]:
        source = source.unionByName(frame, allowMissingColumns=True)
    # Every row's bucket follows from its partition and kind, whoever built the row.
    source = source.withColumn(C.BUCKET, bucket_column(F.col(C.PARTITION_ID), F.col(C.ROW_KIND)))
    buckets = ", ".join(f"'{bucket}'" for bucket in merge_buckets(plan))
    # The bucket literals let Delta prune directories and see, in its conflict check, that commands on
    # other buckets cannot interfere with this one; the partition literals let it skip files by statistics,
    # except for heads in bulk: thousands of partitions lie in every head file, so their literals skip
    # none and cost their parsing and a test per row in both of the MERGE's passes.
    named = ""
    if not heads_in_bulk:
        partitions = ", ".join(f"'{partition}'" for partition in sorted(plan.partitions))
        named = f"AND {TARGET}.{C.PARTITION_ID} IN ({partitions}) "
    on = (
        f"{TARGET}.{C.BUCKET} IN ({buckets}) {named}"
        f"AND {TARGET}.{C.PARTITION_ID} = s.{C.PARTITION_ID} "
        f"AND {TARGET}.{C.ROW_KIND} = s.{C.ROW_KIND} AND {TARGET}.{C.ID_MS} <=> s.{C.ID_MS} "
        f"AND {TARGET}.{C.ID_SEQ} <=> s.{C.ID_SEQ} AND {TARGET}.{C.CONSUMER} <=> s.{C.CONSUMER}"
    )
    condition = F.expr(on)
    for bound in [*(id_bounds(plan.writes) if small else []), *plan.bounds]:
        condition = condition & bound
    settings = commit_settings(operation, small=small, rows_per_file=rows_per_file, pinned=plan.frames_pinned)
    apply_settings(spark, settings)
    with _one_shuffle_partition(spark, small):
        _merge(spark, table_path, source, condition)
    return own_commit_version(spark, table_path, operation)


def _frame(spark: SparkSession, rows: DataFrame | pa.Table) -> DataFrame:
    """An append's rows as a DataFrame (``Plan.add_append`` takes Arrow tables built on the driver too)."""
    return spark.createDataFrame(rows) if isinstance(rows, pa.Table) else rows


def merge_buckets(plan: Plan) -> list[str]:
    """The buckets a plan's MERGE reads and may rewrite: each write's own, and every bucket of the
    partitions its frames write (their rows may be of any kind).

    A command that changes only heads and consumers (XGROUP CREATE, CREATECONSUMER) names only ``h``
    buckets, so its MERGE never reads an entry or PEL file, let alone rewrites one.
    """
    buckets = {bucket_of(write.partition, str(write.row[C.ROW_KIND])) for write in plan.writes}
    buckets.update(buckets_of(plan.frame_partitions))
    return sorted(buckets)


@contextlib.contextmanager
def _one_shuffle_partition(spark: SparkSession, small: bool) -> Iterator[None]:
    """A small plan's MERGE joins in one shuffle partition, the session's own setting put back after it.

    The join's output is written in join-key order, so one task writes the rows of the files it
    rewrites back ID-ordered, in files capped at ``rows_per_file``. Over several tasks each wrote a
    file spanning the whole rewritten range, which every later command on that range rewrote again and
    no ordered read could skip (10M PEL: an XAUTOCLAIM COUNT 1000 copied 298,998 rows, then 98,998).
    """
    if not small:
        yield
        return
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "1")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _merge(spark: SparkSession, table_path: str, source: DataFrame, condition: Column) -> None:
    """The MERGE of every plan: guards, deletes, claims, updates and inserts by the source's op flags."""
    (
        merge_into(spark, table_path, source, condition)
        .whenMatched(F.expr(f"s.{OP_GUARD} AND NOT ({TARGET}.{C.VERSION} <=> s.{OP_EXPECT})"))
        .update(_columns({C.VERSION: f"CAST({_RAISE_STALE} AS BIGINT)"}))
        .whenMatched(F.expr(f"s.{OP_DELETE} OR (s.{OP_CLAIM} AND NOT s.{CLAIM_LIVE})"))
        .delete()
        .whenMatched(F.expr(f"s.{OP_CLAIM} AND {_IS_IDLE}"))
        .update(_columns(_CLAIM_SET))
        .whenMatched(F.expr(f"NOT s.{OP_CLAIM}"))
        .update(_columns({name: f"s.`{name}`" for name in _VALUE_COLUMNS}))
        .whenNotMatched(F.expr(f"s.{OP_GUARD} AND s.{OP_EXPECT} IS NOT NULL"))
        .insert(_columns({C.PARTITION_ID: f"CAST({_RAISE_STALE} AS STRING)"}))
        .whenNotMatched(F.expr(f"s.{OP_CLAIM} AND s.{CLAIM_FORCE} AND s.{CLAIM_LIVE}"))
        .insert(_columns({**{name: f"s.`{name}`" for name in COLUMN_NAMES}, C.DELIVERY_COUNT: _FORCED_COUNT}))
        .whenNotMatched(F.expr(f"NOT s.{OP_DELETE} AND NOT s.{OP_CLAIM}"))
        .insert(_columns({name: f"s.`{name}`" for name in COLUMN_NAMES}))
        .merge()
    )


def id_bounds(writes: Iterable[Write]) -> list[Column]:
    """Target-only ON conditions that confine entry and pending rows to the ID range the writes touch.

    A target row of those kinds outside the range matches no source row anyway, so the conditions
    change no outcome; they let Delta skip, by the files' min/max statistics, every file of a big PEL
    or stream whose IDs lie elsewhere. ``<``/``>`` rather than ``<>`` because Delta's data skipping
    understands range comparisons; Column literals because stored IDs reach -2^63, which SQL text
    would parse as a decimal.
    """
    kind = F.col(f"{TARGET}.{C.ROW_KIND}")
    bounds = []
    for row_kind in (C.KIND_ENTRY, C.KIND_PENDING):
        ids = sorted(stored_id(w.row) for w in writes if w.row.get(C.ROW_KIND) == row_kind)
        if ids:
            in_range = id_between(ids[0], ids[-1], table=TARGET)
            bounds.append((kind < F.lit(row_kind)) | (kind > F.lit(row_kind)) | in_range)
    return bounds


def _columns(expressions: Mapping[str, str | Column]) -> dict[str, Column]:
    """A MERGE clause's values as Columns (``mergeInto`` takes Columns); ours are mostly SQL strings."""
    return {name: F.expr(value) if isinstance(value, str) else value for name, value in expressions.items()}


def committed_version(spark: SparkSession) -> int:
    """The version of the last commit made through ``spark`` (a session-local Delta setting)."""
    value = spark.conf.get(_LAST_COMMIT_VERSION, None)
    if value is None:
        raise NothingCommittedError("Delta did not report the version of a commit just made")
    return int(value)


# How far back from the session's last version a commit's own version may lie: auto compaction's commit,
# and commits of other writers that landed between the two, come after it.
_OWN_COMMIT_LOOKBACK = 16


def own_commit_version(spark: SparkSession, table_path: str, operation: str) -> int:
    """The version of the commit this thread just made as ``operation`` (its user metadata).

    Delta's auto compaction runs right after a commit, in the same call and session, and its OPTIMIZE
    commit carries the same user metadata (a session setting); the session's last version is then the
    compaction's, whose metrics are not the commit's. So the versions are walked back to the newest
    commit with this user metadata that is not an OPTIMIZE: one log file read when no compaction ran.
    """
    last = committed_version(spark)
    for version in range(last, max(-1, last - _OWN_COMMIT_LOOKBACK), -1):
        info = commit_info(spark, table_path, version)
        if info.get("userMetadata") == operation and info.get("operation") != AUTO_COMPACTION_OPERATION:
            return version
    raise NothingCommittedError(
        f"no commit of {operation!r} among versions {max(0, last - _OWN_COMMIT_LOOKBACK + 1)}..{last}"
    )

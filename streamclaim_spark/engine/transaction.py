"""Commits a command's plan as one Delta transaction, in the form the placement and the plan allow.

On a classic session (``placement``'s ``Work.COMMIT``), a plan of row writes alone, or whose bulk rows
are new by construction (``Plan.appends``), removed by ID (``Plan.removals``) or changed in place
(``Plan.rewrites``), commits as one transaction of files (file_commit.py): the MERGE's clauses applied
on the driver to the few files the writes reach (written_rows.py). Otherwise, and for writes reaching
more rows than the driver rewrites, one guarded MERGE or in-place UPDATE commits it (merge_commit.py).
Both forms make the same guarantee: a head that moved since the command's snapshot makes it lose.
What a commit did is read back here (``rows_changed``) for callers that check it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyspark.sql import SparkSession

from streamclaim_spark.core.plan import Plan
from streamclaim_spark.engine.file_commit import FILES_OPERATION, MergeInstead, commit_files, commits_as_files
from streamclaim_spark.engine.merge_commit import commit_merge, commit_update
from streamclaim_spark.state.delta_io import commit_info, committing


@dataclass(frozen=True)
class PendingCommit:
    """A plan decided and about to commit, as a ``before_plan_commit`` hook sees it."""

    path: str
    operation: str


# Called with each plan about to commit (decided on its snapshot, nothing written yet), in the committing
# thread: a seam for tests that make two writers meet there (streamclaim_spark.testing.commit_gate), so
# both are inside their transactions at once. Empty outside such a test.
_BEFORE_PLAN_COMMIT: list[Callable[[PendingCommit], None]] = []


@contextlib.contextmanager
def before_plan_commit(hook: Callable[[PendingCommit], None]) -> Iterator[None]:
    """Runs ``hook`` before every ``commit_plan`` of the process while the block runs."""
    _BEFORE_PLAN_COMMIT.append(hook)
    try:
        yield
    finally:
        _BEFORE_PLAN_COMMIT.remove(hook)


def commit_plan(spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int = 0) -> int | None:
    """Commits ``plan`` as one transaction of files where ``commits_as_files`` holds, else (or when its
    writes reach files too big for the driver) as one MERGE, or one UPDATE for a plan with an ``update``
    (merge_commit.py); returns its version, None when the plan changes no row.

    ``spark`` must be the calling thread's own session: the commit's user metadata and the version it
    created travel through session-local settings. ``rows_per_file`` caps the rows of each data file
    the commit writes (0: no cap). Raises ``NothingCommittedError`` when Delta committed nothing.
    """
    for hook in _BEFORE_PLAN_COMMIT:
        hook(PendingCommit(table_path, operation))
    with committing(spark):
        return _commit_plan(spark, table_path, plan, operation, rows_per_file)


def _commit_plan(spark: SparkSession, table_path: str, plan: Plan, operation: str, rows_per_file: int) -> int | None:
    if commits_as_files(spark, plan):
        version = commit_files(spark, table_path, plan, operation, rows_per_file)
        if not isinstance(version, MergeInstead):
            return version
        # writes reaching big files: the MERGE joins them in Spark
    if plan.update is not None:
        return commit_update(spark, table_path, plan, operation, rows_per_file)
    return commit_merge(spark, table_path, plan, operation, rows_per_file)


def commit_metrics(spark: SparkSession, table_path: str, version: int) -> dict[str, int]:
    """The operation metrics Delta wrote into commit ``version`` (e.g. a MERGE's numTargetRowsDeleted).

    Read from the commit's own log file (``commit_info``: no Spark job on a classic session), so a caller
    can check what a commit did, not only what it decided before committing.
    """
    metrics = commit_info(spark, table_path, version).get("operationMetrics", {})
    return {name: int(value) for name, value in metrics.items()}


@dataclass(frozen=True)
class RowsChanged:
    """The rows one MERGE or UPDATE deleted, updated and inserted, by its own metrics."""

    deleted: int
    updated: int
    inserted: int


def rows_changed(spark: SparkSession, table_path: str, version: int) -> RowsChanged | None:
    """What commit ``version`` did to rows (a MERGE's metrics, or an UPDATE's ``numUpdatedRows``; on Spark
    Connect an update in place is a MERGE), for a caller to check against what it decided; None for a
    commit of files (file_commit.py), whose metrics count the files and rows written, copies included:
    its guarded heads make it apply exactly what was decided."""
    info = commit_info(spark, table_path, version)
    if info.get("operation") == FILES_OPERATION:
        return None
    metrics = {name: int(value) for name, value in info.get("operationMetrics", {}).items()}
    return RowsChanged(
        deleted=metrics.get("numTargetRowsDeleted", 0),
        updated=metrics.get("numUpdatedRows", metrics.get("numTargetRowsUpdated", 0)),
        inserted=metrics.get("numTargetRowsInserted", 0),
    )

"""The rows a batch of commands holds in memory, and how the commit's MERGE treats each write to them.

``state`` keeps loaded partitions as plain dicts keyed by the state table's key columns; these helpers
build and read those dicts and replay a claim or a bulk delete exactly as ``transaction.commit_plan``'s
MERGE clauses would apply it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import (
    Write,
)
from streamclaim_spark.core.partitions import bucket_of
from streamclaim_spark.engine.merge_source import OP_DELETE
from streamclaim_spark.errors import BatchPlanError
from streamclaim_spark.state.schema import COLUMN_NAMES

Row = dict[str, Any]
Key = tuple[Any, ...]
# A partition's identity for guards: (stream, group or None).
Owner = tuple[str, str | None]

IDENTITY = (*C.KEY_COLUMNS, C.STREAM, C.GROUP)


def row_key(row: Mapping[str, Any]) -> Key:
    return tuple(row.get(column) for column in C.KEY_COLUMNS)


def full_row(row: Mapping[str, Any]) -> Row:
    """A state row with every column, as the MERGE writes it (absent columns are null)."""
    return {name: row.get(name) for name in COLUMN_NAMES if name != C.BUCKET}


def row_id(row: Mapping[str, Any]) -> tuple[int, int]:
    return row[C.ID_MS], row[C.ID_SEQ]


def bucketed(row: Row) -> Row:
    """The row with its Delta partition column, so bucket filters keep it."""
    return {**row, C.BUCKET: bucket_of(row[C.PARTITION_ID], row[C.ROW_KIND])}


def claimed_row(current: Row | None, write: Write) -> Row | None:
    """What the commit's MERGE makes of a claim write (transaction.commit_plan's claim clauses)."""
    claim = write.claim
    assert claim is not None
    if current is None:
        if not (claim.force and claim.live):
            return None
        count = claim.retry_count if claim.retry_count is not None else 1 if claim.just_id else 1 + claim.steps
        return {
            **full_row(write.row),
            C.OWNER: claim.owner,
            C.DELIVERY_TIME_MS: claim.delivery_time,
            C.DELIVERY_COUNT: count,
        }
    if not claim.live:
        return None
    if claim.cutoff is not None and current[C.DELIVERY_TIME_MS] > claim.cutoff:
        return current
    if claim.retry_count is not None:
        count = claim.retry_count
    elif claim.just_id:
        count = current[C.DELIVERY_COUNT]
    else:
        count = current[C.DELIVERY_COUNT] + claim.steps
    return {
        **current,
        C.OWNER: claim.owner,
        C.DELIVERY_TIME_MS: claim.delivery_time,
        C.DELIVERY_COUNT: count,
        C.TXN: write.row.get(C.TXN),
    }


def frame_deletes(frame: DataFrame) -> list[Write]:
    """A command's bulk delete (a MERGE source frame) as row deletes: the batch reads the rows it names."""
    rows = frame.select(*IDENTITY, OP_DELETE).collect()
    if not all(row[OP_DELETE] for row in rows):
        raise BatchPlanError("a command's bulk rewrite cannot run inside a batch of commands; run it on its own")
    return [Write({column: row[column] for column in IDENTITY}, delete=True) for row in rows]

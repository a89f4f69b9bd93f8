"""The MERGE source: state rows plus what the commit's MERGE does with each (write, delete, guard, claim).

Every write path (commands, batches, bulk, claims, recovery) builds its rows here, by ``source_rows`` for
a command's few writes or ``source_of`` for a frame, so ``transaction.commit_plan``'s one MERGE reads
one schema (``SOURCE_SCHEMA``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.write_rules import last_write_per_key
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.schema import COLUMN_NAMES, STATE_SCHEMA

# The MERGE source: a state row plus what to do with it.
OP_DELETE = "_delete"
OP_GUARD = "_guard"
OP_EXPECT = "_expect"
# Claim columns (model.Claim): set on PEL rows that the MERGE claims under its own conditions.
OP_CLAIM = "_claim"
CLAIM_LIVE = "_live"
CLAIM_CUTOFF = "_cutoff"
CLAIM_STEPS = "_steps"
CLAIM_RETRY = "_retry"
CLAIM_JUST_ID = "_just_id"
CLAIM_FORCE = "_force"
SOURCE_SCHEMA = StructType(
    [
        *STATE_SCHEMA.fields,
        StructField(OP_DELETE, BooleanType(), nullable=False),
        StructField(OP_GUARD, BooleanType(), nullable=False),
        StructField(OP_EXPECT, LongType()),
        StructField(OP_CLAIM, BooleanType(), nullable=False),
        StructField(CLAIM_LIVE, BooleanType()),
        StructField(CLAIM_CUTOFF, LongType()),
        StructField(CLAIM_STEPS, LongType()),
        StructField(CLAIM_RETRY, LongType()),
        StructField(CLAIM_JUST_ID, BooleanType()),
        StructField(CLAIM_FORCE, BooleanType()),
    ]
)
_CLAIM_COLUMNS = (CLAIM_LIVE, CLAIM_CUTOFF, CLAIM_STEPS, CLAIM_RETRY, CLAIM_JUST_ID, CLAIM_FORCE)


def source_rows(writes: Iterable[Write]) -> list[tuple[Any, ...]]:
    """The MERGE source rows for ``writes``; the last write to a key wins, as in a sequential program."""
    return [_source_row(write) for write in last_write_per_key(list(writes))]


def local_source(spark: SparkSession, rows: Sequence[tuple[Any, ...]]) -> DataFrame:
    """The MERGE source for ``rows`` (SOURCE_SCHEMA tuples), built in the JVM (json_frame)."""
    return json_frame(spark, [dict(zip(SOURCE_SCHEMA.names, row, strict=True)) for row in rows], SOURCE_SCHEMA)


def _source_row(write: Write) -> tuple[Any, ...]:
    claim = write.claim
    row = dict(write.row)
    claim_values: tuple[Any, ...] = (None,) * len(_CLAIM_COLUMNS)
    if claim is not None:
        # The row carries what a win writes; the MERGE's conditions decide whether it wins.
        row.update({C.OWNER: claim.owner, C.DELIVERY_TIME_MS: claim.delivery_time})
        claim_values = (
            claim.live,
            claim.cutoff,
            claim.steps,
            claim.retry_count,
            claim.just_id,
            claim.force,
        )
    return (
        *(row.get(name) for name in COLUMN_NAMES),
        write.delete,
        write.guard,
        write.expect_version,
        claim is not None,
        *claim_values,
    )


# The columns a MERGE matches a source row to its target row on: all a delete needs to carry.
MATCH_KEYS = (C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ, C.CONSUMER)


def source_frame_for_deletes(rows: DataFrame) -> DataFrame:
    """Turns state-table rows (e.g. a filtered snapshot) into MERGE source rows that delete them.

    Only the match keys are kept: a bulk delete's source is materialized and shuffled by the MERGE,
    and a million PEL rows with every state column cost seconds more to move.
    """
    return source_frame(rows.select(*MATCH_KEYS), delete=True)


def source_frame(rows: DataFrame, delete: bool = False) -> DataFrame:
    """Turns state-table rows into MERGE source rows that write them (or delete them)."""
    return source_of(rows, operations={OP_DELETE: F.lit(delete)})


# Operation columns a source row leaves out: no delete, guard or claim; the claim's parameters null.
_FALSE_BY_DEFAULT = (OP_DELETE, OP_GUARD, OP_CLAIM)


def source_of(
    rows: DataFrame, values: Mapping[str, Column] | None = None, operations: Mapping[str, Column] | None = None
) -> DataFrame:
    """MERGE source rows: the one builder every write path (commands, bulk, claims, recovery) uses.

    Each state column comes from ``values`` when given there, else from ``rows`` when it has the column,
    else null; each operation column (``OP_*``, ``CLAIM_*``) from ``operations``, else no delete, guard or
    claim. Columns ``rows`` already holds are selected as they are, so the plan of a plain write is unchanged.
    """
    values = values or {}
    operations = operations or {}
    present = set(rows.columns)
    state = [
        values[f.name].cast(f.dataType).alias(f.name)
        if f.name in values
        else F.col(f.name)
        if f.name in present
        else F.lit(None).cast(f.dataType).alias(f.name)
        for f in STATE_SCHEMA.fields
    ]
    ops = [
        operations.get(name, F.lit(False if name in _FALSE_BY_DEFAULT else None))
        .cast(SOURCE_SCHEMA[name].dataType)
        .alias(name)
        for name in SOURCE_SCHEMA.names[len(STATE_SCHEMA.names) :]
    ]
    return rows.select(*state, *ops)

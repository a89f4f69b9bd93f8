"""The schemas of the recovery job's companion tables: dead letters, the run logs, give-up reasons.

The state table's own schema is schema.py; tables.py creates every table from these.
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType, TimestampType

from streamclaim_spark.core import constants as C
from streamclaim_spark.state.schema import FIELD_PAIR

# One row per entry the recovery job dead-lettered: the entry as it was when its delivery count ran out.
DEAD_LETTER_SCHEMA = StructType(
    [
        StructField("run_id", StringType(), nullable=False),  # the recovery run that copied it
        StructField("dead_lettered_at", TimestampType(), nullable=False),
        StructField(C.STREAM, StringType(), nullable=False),
        StructField(C.GROUP, StringType(), nullable=False),
        StructField("id", StringType(), nullable=False),  # "ms-seq"
        StructField(C.OWNER, StringType()),  # the last consumer that owned it
        StructField(C.DELIVERY_COUNT, LongType()),
        StructField(C.DELIVERY_TIME_MS, LongType()),  # its last delivery, Unix ms
        StructField(C.FIELDS, ArrayType(FIELD_PAIR)),  # null when the stream entry had been deleted
        # Why: "max-deliveries exceeded (12 > 10)", or "XNACK FATAL" for an entry its consumer gave up on;
        # null in rows copied before the column existed (the next copy adds it: mergeSchema).
        StructField("reason", StringType()),
        # The redrive run that took this letter to put its entry back and when (set before the put-back),
        # and when the entry was back in its group (set after it): all null while it is dead (fleet/redrive/).
        StructField("redrive_run_id", StringType()),
        StructField("redrive_taken_at", TimestampType()),
        StructField("redriven_at", TimestampType()),
    ]
)
# The columns a redrive adds to a dead-letter table made before them (ensure_redrive_columns).
REDRIVE_COLUMNS = {"redrive_run_id": "STRING", "redrive_taken_at": "TIMESTAMP", "redriven_at": "TIMESTAMP"}

# What one recovery run did to one consumer group.
# Delta cannot enforce NOT NULL inside arrays, so these fields are nullable.
RECOVERY_GROUP_SCHEMA = StructType(
    [
        StructField(C.STREAM, StringType()),
        StructField(C.GROUP, StringType()),
        StructField("scanned", LongType()),  # pending entries examined
        StructField("stale", LongType()),  # of those, idle at least min_idle
        StructField("claimed", LongType()),
        StructField("purged", LongType()),  # pending entries whose stream entry was deleted
        StructField("dead_lettered", LongType()),
        StructField("dead_letters_withdrawn", LongType()),  # copies undone: entry changed meanwhile
        StructField("conflicts_retried", LongType()),  # commits re-run after losing a race
        StructField("owners", ArrayType(StringType())),  # consumers the entries were claimed to
    ]
)

# One row per recovery run (dry runs change nothing and write none).
RECOVERY_RUNS_SCHEMA = StructType(
    [
        StructField("run_id", StringType(), nullable=False),
        StructField("started_at", TimestampType(), nullable=False),
        StructField("ended_at", TimestampType(), nullable=False),
        StructField("status", StringType(), nullable=False),  # "succeeded" or "failed"
        StructField("error", StringType()),
        StructField("min_idle_ms", LongType(), nullable=False),
        StructField("assign", StringType(), nullable=False),
        StructField("max_deliveries", LongType()),  # null when dead-lettering was off
        StructField("scanned", LongType(), nullable=False),
        StructField("claimed", LongType(), nullable=False),
        StructField("dead_lettered", LongType(), nullable=False),
        StructField("conflicts_retried", LongType(), nullable=False),
        StructField("groups", ArrayType(RECOVERY_GROUP_SCHEMA), nullable=False),
        # "multi-writer", or "single-writer" when the store was opened on that promise (docs/DEPLOY.md);
        # null in rows written before the column existed.
        StructField("writer_mode", StringType()),
        # The backoff schedule as written (core/backoff.py); null without one, and in older rows.
        StructField("backoff", StringType()),
    ]
)

# One row per redrive run (dry runs change nothing and write none); the counts are entries, not letters.
REDRIVE_RUNS_SCHEMA = StructType(
    [
        StructField("run_id", StringType(), nullable=False),
        StructField("started_at", TimestampType(), nullable=False),
        StructField("ended_at", TimestampType(), nullable=False),
        StructField("status", StringType(), nullable=False),  # "succeeded" or "failed"
        StructField("error", StringType()),
        StructField("streams", ArrayType(StringType()), nullable=False),
        StructField("groups", ArrayType(StringType()), nullable=False),
        StructField("where", StringType()),
        StructField("reset_count", BooleanType(), nullable=False),
        StructField("max_redrives", LongType()),
        StructField("limit", LongType()),
        StructField("to_stream", StringType()),
        StructField("redriven", LongType(), nullable=False),  # back in their group's PEL
        StructField("re_added", LongType(), nullable=False),  # entry gone: a new entry of to_stream
        StructField("entry_gone", LongType(), nullable=False),  # entry gone, no to_stream: stay dead
        StructField("group_gone", LongType(), nullable=False),  # their group was destroyed: stay dead
        StructField("already_pending", LongType(), nullable=False),  # pending again meanwhile: stay dead
        StructField("capped", LongType(), nullable=False),  # redriven max_redrives times: stay dead
        StructField("adopted", LongType(), nullable=False),  # of a run that stopped half-way
        StructField("remaining", LongType(), nullable=False),  # left for a later run by limit
    ]
)

# One row per StreamStore.give_up call's entry: the reason its consumer gave up on it (XNACK FATAL), which
# the entry's dead letter carries when the recovery job copies it (only a reason written at or after the
# XNACK that its pending row holds: a later XNACK FATAL without one does not inherit it).
GIVE_UP_REASONS_SCHEMA = StructType(
    [
        StructField(C.STREAM, StringType(), nullable=False),
        StructField(C.GROUP, StringType(), nullable=False),
        StructField("id", StringType(), nullable=False),  # "ms-seq"
        StructField("reason", StringType(), nullable=False),
        StructField("given_up_at", TimestampType(), nullable=False),
    ]
)

"""The state table's schema and partition identifiers.

One Delta table holds every row of every stream: stream heads, entries, group heads, consumers and
pending entries (the PEL). A stream's head and entries share one partition; each consumer group has a
partition of its own, so commands on different groups or streams never conflict in Delta's checks.
"""

from __future__ import annotations

import hashlib

from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamclaim_spark import _constants as C

FIELD_PAIR = StructType(
    [
        StructField("field", StringType()),
        StructField("value", StringType()),
    ]
)

# Stream IDs are unsigned 64-bit in Redis; they are stored shifted by 2**63 (ids.to_stored) so that
# signed Spark ordering equals Redis ordering. The SQL views render them back as "ms-seq" strings.
STATE_SCHEMA = StructType(
    [
        StructField(C.PARTITION_ID, StringType(), nullable=False),
        StructField(C.ROW_KIND, StringType(), nullable=False),
        StructField(C.STREAM, StringType(), nullable=False),
        StructField(C.GROUP, StringType()),
        StructField(C.ID_MS, LongType()),  # entry and pending rows: the entry ID
        StructField(C.ID_SEQ, LongType()),
        StructField(C.CONSUMER, StringType()),  # consumer rows: the consumer's name
        StructField(C.FIELDS, ArrayType(FIELD_PAIR)),  # entry rows, in XADD order
        StructField(C.OWNER, StringType()),  # pending rows: the consumer that owns the entry
        StructField(C.DELIVERY_TIME_MS, LongType()),  # pending rows: last delivery, Unix ms
        StructField(C.DELIVERY_COUNT, LongType()),  # pending rows
        StructField(C.SEEN_TIME_MS, LongType()),  # consumer rows: last attempted interaction
        StructField(C.ACTIVE_TIME_MS, LongType()),  # consumer rows: last successful read/claim, -1 never
        StructField(C.LAST_MS, LongType()),  # stream head: last generated ID; group head: last delivered ID
        StructField(C.LAST_SEQ, LongType()),
        StructField(C.ENTRIES_READ, LongType()),  # group head, -1 = unknown
        StructField(C.ENTRIES_ADDED, LongType()),  # stream head, lifetime appends
        StructField(C.ENTRY_COUNT, LongType()),  # stream head, live entries (XLEN)
        StructField(C.FIRST_MS, LongType()),  # stream head, recorded-first-entry-id
        StructField(C.FIRST_SEQ, LongType()),
        StructField(C.MAX_DELETED_MS, LongType()),  # stream head, max-deleted-entry-id (XDEL only)
        StructField(C.MAX_DELETED_SEQ, LongType()),
        StructField(C.GROUP_NAMES, ArrayType(StringType())),  # stream head
        StructField(C.VERSION, LongType()),  # head rows: bumped by every write to the partition
        StructField(C.TXN, StringType()),  # token of the command that last wrote the row
    ]
)

COLUMN_NAMES = tuple(field.name for field in STATE_SCHEMA.fields)


def stream_partition(stream: str) -> str:
    """Partition holding the stream's head row and its entries.

    Names are hashed because Redis names may be empty or arbitrarily long, which Hive-style
    partition directories cannot represent (an empty value would read back as null).
    """
    return "s" + _digest(stream.encode())


def group_partition(stream: str, group: str) -> str:
    """Partition holding a consumer group's head row, its consumers and its pending entries."""
    stream_bytes = stream.encode()
    # Length-prefix the stream name so ("ab", "c") and ("a", "bc") never share a partition.
    return "g" + _digest(len(stream_bytes).to_bytes(8, "big") + stream_bytes + group.encode())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]

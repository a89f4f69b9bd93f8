"""The state table's schema, partition identifiers and buckets.

One Delta table holds every row of every stream: stream heads, entries, group heads, consumers and
pending entries (the PEL). A stream's head and entries share one logical partition (``partition_id``);
each consumer group has one of its own, whose head row serialises the group's commands.

On disk the table is partitioned by ``bucket``, the first ``BUCKET_HEX_CHARS`` hex digits of the
partition's digest (with its kind letter): 16 stream buckets and 16 group buckets, whatever the number
of streams and groups, and beside each an ``h`` bucket for its heads and consumers. One directory per
group made a fleet of 10,000 groups 20,000 directories of tiny files, and a recovery commit over all of
them wrote 20,000 files; heads sharing files with entries and PEL rows made every commit that bumped a
head copy up to 100,000 of them (docs/DESIGN.md, "Layout"). Commands on different groups of one bucket
can conflict in Delta's partition-level check; they re-run, as after any lost race.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.partitions import (
    ALL_KINDS,
    APART_KINDS,
    APART_PREFIX,
    BUCKET_HEX_CHARS,
    bucket_of,
    buckets_of,
    group_partition,
    stream_partition,
)
from streamclaim_spark.state.columns import id_between

__all__ = [
    "ALL_KINDS",
    "APART_KINDS",
    "BUCKET_HEX_CHARS",
    "COLUMN_NAMES",
    "FIELD_PAIR",
    "STATE_SCHEMA",
    "bucket_column",
    "bucket_of",
    "buckets_of",
    "group_partition",
    "in_partitions",
    "kind_in",
    "stream_partition",
]

# An entry's field/value pair: bytes, as Redis streams are binary-safe (SQL: CAST(value AS STRING)).
FIELD_PAIR = StructType(
    [
        StructField("field", BinaryType()),
        StructField("value", BinaryType()),
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
        # consumer rows: entries owned; group head: PEL size; exact while counted_version = version
        StructField(C.PENDING_COUNT, LongType()),
        StructField(C.LAST_MS, LongType()),  # stream head: last generated ID; group head: last delivered ID
        StructField(C.LAST_SEQ, LongType()),
        StructField(C.ENTRIES_READ, LongType()),  # group head, -1 = unknown
        StructField(C.ENTRIES_ADDED, LongType()),  # stream head, lifetime appends
        StructField(C.ENTRY_COUNT, LongType()),  # stream head, live entries (XLEN)
        StructField(C.FIRST_MS, LongType()),  # stream head, recorded-first-entry-id
        StructField(C.FIRST_SEQ, LongType()),
        StructField(C.MAX_DELETED_MS, LongType()),  # stream head, max-deleted-entry-id (XDEL only)
        StructField(C.MAX_DELETED_SEQ, LongType()),
        # stream head: an entry a PEL row may name was deleted (XDEL, trims, ACKDEL, an imported PEL);
        # never cleared while the PEL may hold such rows; null (written before the column) reads as true
        StructField(C.SOME_DELETED, BooleanType()),
        StructField(C.GROUP_NAMES, ArrayType(StringType())),  # stream head
        StructField(C.VERSION, LongType()),  # head rows: bumped by every write to the partition
        StructField(C.COUNTED_VERSION, LongType()),  # group head: the version its kept counts are exact at
        StructField(C.TXN, StringType()),  # token of the command that last wrote the row
        StructField(C.BUCKET, StringType(), nullable=False),  # Delta partition: bucket_of(partition_id, row_kind)
    ]
)

COLUMN_NAMES = tuple(field.name for field in STATE_SCHEMA.fields)


def bucket_column(partition_id: Column, row_kind: Column) -> Column:
    """``bucket_of`` as a Spark expression."""
    bucket = F.substring(partition_id, 1, 1 + BUCKET_HEX_CHARS)
    return F.when(row_kind.isin(*APART_KINDS), F.concat(F.lit(APART_PREFIX), bucket)).otherwise(bucket)


def in_partitions(partitions: str | Iterable[str], table: str = "", kinds: Iterable[str] = ALL_KINDS) -> Column:
    """Rows of the given logical partition(s), with the filter on the buckets that hold their rows of
    ``kinds`` (default: every kind) that lets Delta prune directories; the kinds themselves are not tested."""
    wanted = [partitions] if isinstance(partitions, str) else sorted(set(partitions))
    prefix = f"{table}." if table else ""
    buckets = buckets_of(wanted, kinds)
    # One SQL expression, one py4j call: Column.isin makes one py4j call per value (~3 s for 10,000
    # groups, several times per recovery run). Partition IDs and buckets are hex digests: safe to quote.
    return F.expr(f"{prefix}{C.BUCKET} IN ({_quoted(buckets)}) AND {prefix}{C.PARTITION_ID} IN ({_quoted(wanted)})")


def kind_in(partitions: str | Iterable[str], kind: str) -> Column:
    """Rows of ``kind`` in the given partition(s): in the buckets of that kind only, and the kind tested,
    which Delta's statistics skip files by."""
    return in_partitions(partitions, kinds=[kind]) & (F.col(C.ROW_KIND) == kind)


# Past this many partitions a query names only their buckets and lets a join select the rows: testing
# each row against thousands of partition IDs costs more than the rows it drops, and a fleet's partitions
# lie in every file, so their IDs skip none (CHANGELOG.md, "Fleet building").
NAMED_PARTITIONS_MAX = 64


def pruned_to(partitions: Iterable[str], table: str = "", kinds: Iterable[str] = ALL_KINDS) -> Column:
    """A filter for a query whose join keeps only rows of ``partitions``: ``in_partitions`` for a few,
    their buckets of ``kinds`` alone (directory pruning) for more than ``NAMED_PARTITIONS_MAX``."""
    wanted = sorted(set(partitions))
    if len(wanted) <= NAMED_PARTITIONS_MAX:
        return in_partitions(wanted, table, kinds)
    return in_buckets(wanted, table, kinds)


def file_condition(query: FileQuery) -> Column:
    """The filter a commit of files records as its read for ``query``: Delta's conflict check tests
    other commits' files against it (``FileQuery.may_hold`` picks the same files on the driver)."""
    named = in_partitions if query.every_partition_named else pruned_to
    condition = named(query.partitions, kinds=query.kinds)
    if query.low is not None and query.high is not None:
        condition = condition & id_between(query.low, query.high)
    return condition


def in_buckets(partitions: Iterable[str], table: str = "", kinds: Iterable[str] = ALL_KINDS) -> Column:
    """Rows of the buckets that hold ``partitions``' rows of ``kinds``, whatever their partition: those
    partitions' rows exactly when no other partition lies in those buckets (Snapshot.rows_of_kind)."""
    prefix = f"{table}." if table else ""
    return F.expr(f"{prefix}{C.BUCKET} IN ({_quoted(buckets_of(partitions, kinds))})")


# A row's key but its ID: a head row (no consumer) or a consumer row (rows_with_keys).
ROW_KEY_SCHEMA = StructType(
    [
        StructField(C.PARTITION_ID, StringType(), nullable=False),
        StructField(C.ROW_KIND, StringType(), nullable=False),
        StructField(C.CONSUMER, StringType()),
    ]
)


def rows_with_keys(rows: DataFrame, keys: DataFrame) -> DataFrame:
    """The ``rows`` whose (partition, kind, consumer) is among ``keys`` (ROW_KEY_SCHEMA), by a broadcast
    semi-join: one plan for any number of keys, where IN lists of thousands are tested row by row."""
    t, k = rows.alias("t"), F.broadcast(keys).alias("k")
    matches = (
        (F.col(f"t.{C.PARTITION_ID}") == F.col(f"k.{C.PARTITION_ID}"))
        & (F.col(f"t.{C.ROW_KIND}") == F.col(f"k.{C.ROW_KIND}"))
        & F.col(f"t.{C.CONSUMER}").eqNullSafe(F.col(f"k.{C.CONSUMER}"))
    )
    return t.join(k, matches, "left_semi")


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)

"""Kept pending counts checked against a recount of the PEL: one Spark job for every group of a snapshot.

A group head whose ``counted_version`` equals its ``version`` claims that its ``pending_count`` (the
PEL's size) and each of its consumers' ``pending_count`` are exact (core/count_rules.py). Nothing else
checks that claim: a writer with a bug, or a table edited by hand, would leave XPENDING's summary and
XINFO answering wrong numbers. ``check_counts`` recounts every PEL row of the snapshot per group and
owner in one aggregation (a fleet has thousands of groups and millions of PEL rows: never a query per
group), joins it with the head and consumer rows of the groups that claim exact counts, and collects
the groups where some number differs, each with every count it has, so that a repair
(fleet/maintenance/verify.py) can write them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import BUCKET_HEX_CHARS, bucket_of, group_partition
from streamclaim_spark.state.columns import by_bytes
from streamclaim_spark.state.snapshot import Snapshot

# Columns of the comparison's rows besides the state table's own.
KEPT = "kept"
COUNTED = "counted"
HAS_ROW = "has_row"
IS_KEPT = "is_kept"
IS_GROUP = "is_group"
NACKED = "nacked"


@dataclass(frozen=True)
class CountMismatch:
    """One kept count that differs from the recount: a consumer's (``consumer``), or the group's PEL
    size (``consumer`` None). ``kept`` is None where the group claims exact counts but keeps none for
    this owner: its consumer row's count is null, or the PEL holds entries of an owner with no row."""

    stream: str
    group: str
    consumer: str | None
    kept: int | None
    counted: int

    def to_json(self) -> dict[str, object]:
        return {
            C.STREAM: self.stream,
            C.GROUP: self.group,
            "consumer": self.consumer,
            "kept": self.kept,
            "counted": self.counted,
        }

    def describe(self) -> str:
        what = "the group's pending entries" if self.consumer is None else f"consumer {self.consumer!r}"
        return f"{self.stream}/{self.group}: {what}: kept {self.kept}, counted {self.counted}"


@dataclass(frozen=True)
class ConsumerCount:
    """A consumer row of a group with a wrong count, as a repair writes it back (its times unchanged),
    or, with ``has_row`` False, an owner of PEL rows that has no consumer row."""

    name: str
    seen_time: int | None
    active_time: int | None
    kept: int | None
    counted: int
    has_row: bool


@dataclass(frozen=True)
class WrongGroup:
    """A group whose kept counts differ somewhere from the recount: its head's kept PEL size and the
    recount's, and every consumer and owner with either count (matching ones included)."""

    stream: str
    group: str
    kept: int | None
    counted: int
    consumers: tuple[ConsumerCount, ...]
    nacked: int  # PEL entries with no owner (XNACK): in the group's size, no consumer's

    @property
    def partition(self) -> str:
        return group_partition(self.stream, self.group)

    def mismatches(self) -> list[CountMismatch]:
        found = [CountMismatch(self.stream, self.group, None, self.kept, self.counted)]
        found = [m for m in found if m.kept != m.counted]
        found += [
            CountMismatch(self.stream, self.group, c.name, c.kept, c.counted)
            for c in self.consumers
            if c.kept != c.counted
        ]
        return found

    def owners(self) -> dict[str | None, int]:
        """The recount per owner (None: the XNACKed entries), owners with none left out."""
        counted: dict[str | None, int] = {c.name: c.counted for c in self.consumers if c.counted}
        if self.nacked:
            counted[None] = self.nacked
        return counted


@dataclass(frozen=True)
class CountCheck:
    """What ``check_counts`` found at one table version: how many groups claim exact counts (checked)
    and how many leave them to a recount (not checked), and the groups whose kept counts are wrong."""

    version: int | None
    checked: int
    uncounted: int
    wrong: tuple[WrongGroup, ...] = field(default=())

    @property
    def mismatches(self) -> list[CountMismatch]:
        return [mismatch for group in self.wrong for mismatch in group.mismatches()]


def check_counts(snapshot: Snapshot, partitions: Sequence[str] | None = None) -> CountCheck:
    """Compares every kept count of ``snapshot`` (only the groups of ``partitions`` when given) with a
    recount of the PEL rows. Three Spark jobs whatever the number of groups: the heads counted by
    whether they claim exact counts; the PEL rows of the group buckets counted per (group, owner), read
    once and pinned (a row per owner, not per entry); the comparison, collecting the wrong groups' rows."""
    rows = snapshot.frame()
    heads = _heads(rows, snapshot, partitions)
    tally = {bool(row[IS_KEPT]): int(row["count"]) for row in heads.groupBy(IS_KEPT).count().collect()}
    kept = heads.where(F.col(IS_KEPT)).drop(IS_KEPT)
    pel = (
        rows.where(_in_group_buckets(C.KIND_PENDING) & (F.col(C.ROW_KIND) == C.KIND_PENDING))
        .groupBy(C.PARTITION_ID, C.OWNER)
        .agg(F.count(F.lit(1)).alias(COUNTED))
        .join(kept.select(C.PARTITION_ID), C.PARTITION_ID, "left_semi")
        .localCheckpoint(eager=True)  # the comparison uses it twice, and collects from it twice
    )
    compared = _compared(rows, kept, pel)
    wrong_partitions = compared.where(~F.col(KEPT).eqNullSafe(F.col(COUNTED))).select(C.PARTITION_ID).distinct()
    found = compared.join(wrong_partitions, C.PARTITION_ID, "left_semi").collect()
    return CountCheck(snapshot.version, tally.get(True, 0), tally.get(False, 0), _wrong_groups(found))


def _heads(rows: DataFrame, snapshot: Snapshot, partitions: Sequence[str] | None) -> DataFrame:
    """The group heads (of ``partitions``), each with its kept PEL size and whether it claims it exact."""
    heads = rows.where(_in_group_buckets(C.KIND_GROUP) & (F.col(C.ROW_KIND) == C.KIND_GROUP))
    if partitions is not None:
        # A join, not an IN list: a recovery run selects thousands of groups.
        wanted = snapshot.spark.createDataFrame([(p,) for p in sorted(set(partitions))], f"{C.PARTITION_ID} string")
        heads = heads.join(F.broadcast(wanted), C.PARTITION_ID, "left_semi")
    claimed = F.col(C.PENDING_COUNT).isNotNull() & F.col(C.COUNTED_VERSION).eqNullSafe(F.col(C.VERSION))
    return heads.select(C.PARTITION_ID, C.STREAM, C.GROUP, F.col(C.PENDING_COUNT).alias(KEPT), claimed.alias(IS_KEPT))


def _compared(rows: DataFrame, kept: DataFrame, pel: DataFrame) -> DataFrame:
    """One row per kept group (``is_group``: its PEL size, and its XNACKed entries in ``nacked``) and per
    consumer or owner of one, with the kept count and the recount side by side."""
    consumers = (
        rows.where(_in_group_buckets(C.KIND_CONSUMER) & (F.col(C.ROW_KIND) == C.KIND_CONSUMER))
        .join(kept.select(C.PARTITION_ID), C.PARTITION_ID, "left_semi")
        .select(
            C.PARTITION_ID,
            C.CONSUMER,
            C.SEEN_TIME_MS,
            C.ACTIVE_TIME_MS,
            F.col(C.PENDING_COUNT).alias(KEPT),
            F.lit(True).alias(HAS_ROW),
        )
    )
    owned = pel.where(F.col(C.OWNER).isNotNull()).withColumnRenamed(C.OWNER, C.CONSUMER)
    per_owner = (
        consumers.join(owned, [C.PARTITION_ID, C.CONSUMER], "full_outer")
        .join(kept.select(C.PARTITION_ID, C.STREAM, C.GROUP), C.PARTITION_ID)
        .select(
            C.PARTITION_ID,
            C.STREAM,
            C.GROUP,
            C.CONSUMER,
            F.lit(False).alias(IS_GROUP),
            C.SEEN_TIME_MS,
            C.ACTIVE_TIME_MS,
            KEPT,
            F.coalesce(F.col(COUNTED), F.lit(0)).alias(COUNTED),
            F.coalesce(F.col(HAS_ROW), F.lit(False)).alias(HAS_ROW),
            F.lit(0).cast("long").alias(NACKED),
        )
    )
    nacked = F.sum(F.when(F.col(C.OWNER).isNull(), F.col(COUNTED)).otherwise(0))
    totals = pel.groupBy(C.PARTITION_ID).agg(F.sum(COUNTED).alias(COUNTED), nacked.alias(NACKED))
    per_group = kept.join(totals, C.PARTITION_ID, "left").select(
        C.PARTITION_ID,
        C.STREAM,
        C.GROUP,
        F.lit(None).cast("string").alias(C.CONSUMER),
        F.lit(True).alias(IS_GROUP),
        F.lit(None).cast("long").alias(C.SEEN_TIME_MS),
        F.lit(None).cast("long").alias(C.ACTIVE_TIME_MS),
        KEPT,
        F.coalesce(F.col(COUNTED), F.lit(0)).cast("long").alias(COUNTED),
        F.lit(True).alias(HAS_ROW),
        F.coalesce(F.col(NACKED), F.lit(0)).cast("long").alias(NACKED),
    )
    return per_group.unionByName(per_owner)


def _wrong_groups(found: Sequence[Row]) -> tuple[WrongGroup, ...]:
    """The collected rows of the groups with a wrong count, one ``WrongGroup`` each, in name order."""
    by_partition: dict[str, list[Row]] = {}
    for row in found:
        by_partition.setdefault(row[C.PARTITION_ID], []).append(row)
    groups = []
    for rows in by_partition.values():
        head = next(row for row in rows if row[IS_GROUP])
        consumers = [
            ConsumerCount(r[C.CONSUMER], r[C.SEEN_TIME_MS], r[C.ACTIVE_TIME_MS], r[KEPT], r[COUNTED], r[HAS_ROW])
            for r in rows
            if not r[IS_GROUP]
        ]
        consumers.sort(key=lambda consumer: by_bytes(consumer.name))
        groups.append(
            WrongGroup(head[C.STREAM], head[C.GROUP], head[KEPT], head[COUNTED], tuple(consumers), head[NACKED])
        )
    return tuple(sorted(groups, key=lambda g: (by_bytes(g.stream), by_bytes(g.group))))


def _in_group_buckets(kind: str) -> Column:
    """Rows in the buckets that hold groups' rows of ``kind``: Delta prunes every stream's files."""
    digits = ("".join(chars) for chars in product("0123456789abcdef", repeat=BUCKET_HEX_CHARS))
    buckets = sorted(bucket_of("g" + digit, kind) for digit in digits)  # "g": partitions.group_partition
    return F.col(C.BUCKET).isin(*buckets)

"""Reads of a group's kept pending counts (core/count_rules.py keeps them): XINFO's and XPENDING's.

Each answers from the group head and consumer rows, a few small rows in the ``h`` files, where the head
says its counts are exact (``GroupMeta.counts_kept``), and None elsewhere: the caller then counts the PEL
as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pyspark.sql import SparkSession

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import ConsumerMeta, GroupMeta
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.state.pel_ends import pel_ends_at


class Snapshot(Protocol):
    """What these reads take of ``state.snapshot.Snapshot``: its table, heads and consumers."""

    spark: SparkSession
    table_path: str
    version: int | None

    def reads_stored_rows(self) -> bool: ...

    def group(self, key: str, name: str) -> GroupMeta | None: ...

    def consumers(self, key: str, group: str) -> list[ConsumerMeta]: ...


def owner_counts(snapshot: Snapshot, key: str, group: str) -> dict[str, int] | None:
    """Pending entries per owner as the group's consumer rows keep them (owners with none absent)."""
    head = snapshot.group(key, group)
    if head is None or not head.counts_kept:
        return None
    consumers = snapshot.consumers(key, group)
    if any(consumer.pending_count is None for consumer in consumers):
        return None
    return {c.name: int(c.pending_count) for c in consumers if c.pending_count}


def summary(
    snapshot: Snapshot, key: str, group: str
) -> tuple[int, StreamId | None, StreamId | None, dict[str, int]] | None:
    """XPENDING's summary from the kept counts and the PEL's two ends (state/pel_ends.py); None also
    where the ends need a query."""
    head = snapshot.group(key, group)
    if head is None or not head.counts_kept or not snapshot.reads_stored_rows():
        return None
    if head.pending_count == 0:
        return 0, None, None, {}
    owners = owner_counts(snapshot, key, group)
    ends = pel_ends_at(snapshot.spark, snapshot.table_path, snapshot.version, key, group_partition(key, group))
    if owners is None or ends is None:
        return None
    return int(head.pending_count or 0), ends[0], ends[1], owners


def group_counts(snapshot: Snapshot, key: str, groups: Sequence[str]) -> dict[str, tuple[int, int]] | None:
    """(consumers, pending entries) per group (XINFO GROUPS): the kept PEL sizes and the consumer rows
    counted; None unless every group keeps its counts."""
    heads = [snapshot.group(key, name) for name in groups]
    kept = [head for head in heads if head is not None and head.counts_kept]
    if len(kept) != len(groups):
        return None
    return {head.name: (len(snapshot.consumers(key, head.name)), int(head.pending_count or 0)) for head in kept}

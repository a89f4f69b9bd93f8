"""Partition identifiers and buckets of the state table, as plain strings (no Spark).

A stream's head and entries share one logical partition (``partition_id``); each consumer group has one
of its own. On disk the table is partitioned by ``bucket``: the partition's kind letter and the first
``BUCKET_HEX_CHARS`` hex digits of its digest, and for heads and consumers the prefix ``h`` before
that, so the few small rows a command changes never share a data file with entries or pending rows
(schema.py has the table; docs/DESIGN.md, "Layout").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from streamclaim_spark.core import constants as C

# Hex digits of a partition's digest that make its bucket: 16 buckets per kind (stream, group).
BUCKET_HEX_CHARS = 1
# The row kinds that lie apart from entries and pending rows, in the ``h`` buckets: one per stream or
# group, or one per consumer, and rewritten by nearly every command.
APART_KINDS = (C.KIND_STREAM, C.KIND_GROUP, C.KIND_CONSUMER)
APART_PREFIX = "h"
ALL_KINDS = (C.KIND_STREAM, C.KIND_ENTRY, C.KIND_GROUP, C.KIND_CONSUMER, C.KIND_PENDING)


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


def is_group_partition(partition_id: str) -> bool:
    """True for a group's partition (``group_partition``), False for a stream's."""
    return partition_id.startswith("g")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def bucket_of(partition_id: str, row_kind: str) -> str:
    """The Delta partition (bucket) that holds ``partition_id``'s rows of ``row_kind``: its kind letter
    and first digit(s), after ``h`` for heads and consumers."""
    bucket = partition_id[: 1 + BUCKET_HEX_CHARS]
    return APART_PREFIX + bucket if row_kind in APART_KINDS else bucket


def buckets_of(partitions: Iterable[str], kinds: Iterable[str] = ALL_KINDS) -> list[str]:
    """The buckets that can hold rows of ``kinds`` in ``partitions``, sorted."""
    wanted = set(kinds)
    return sorted({bucket_of(partition, kind) for partition in partitions for kind in wanted})


def shares_buckets(partitions: Iterable[str], every_partition: Iterable[str], kind: str) -> bool:
    """True when a partition of ``every_partition`` other than ``partitions`` keeps its rows of ``kind``
    in one of their buckets: a filter on those buckets alone would take its rows too."""
    wanted = set(partitions)
    buckets = {bucket_of(partition, kind) for partition in wanted}
    return any(partition not in wanted and bucket_of(partition, kind) in buckets for partition in every_partition)

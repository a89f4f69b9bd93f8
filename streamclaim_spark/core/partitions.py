"""Partition identifiers and buckets of the state table, as plain strings (no Spark).

A stream's head and entries share one logical partition (``partition_id``); each consumer group has one
of its own. On disk the table is partitioned by ``bucket``: the partition's kind letter and the first
``BUCKET_HEX_CHARS`` hex digits of its digest (schema.py has the table; docs/DESIGN.md, "Layout").
"""

from __future__ import annotations

import hashlib

# Hex digits of a partition's digest that make its bucket: 16 buckets per kind (stream, group).
BUCKET_HEX_CHARS = 1


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


def bucket_of(partition_id: str) -> str:
    """The Delta partition (bucket) that holds ``partition_id``'s rows: its kind letter and first digit(s)."""
    return partition_id[: 1 + BUCKET_HEX_CHARS]

"""Test helpers: a group's PEL and a stream's entry IDs read straight from the state table into Python.

These read the Delta table rather than going through a command, so the tests check what the commits
really stored, independently of the reply logic under test.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.state.columns import stored_id
from streamclaim_spark.state.delta_io import latest_version


@dataclass(frozen=True)
class PelRow:
    """One pending row as stored: entry ID ("ms-seq"), owner, delivery time and count, writing txn."""

    id: str
    owner: str
    delivery_time_ms: int
    delivery_count: int
    txn: str


def table(store: StreamStore, version: int | None = None) -> DataFrame:
    """The state table at ``version`` (default: the newest version, looked up now)."""
    if version is None:
        version = current_version(store)
    return store.table_at(version)


def current_version(store: StreamStore) -> int:
    """The state table's newest Delta version."""
    return latest_version(store.session(), store.state_path)


def pel_rows(store: StreamStore, key: str, group: str, version: int | None = None) -> list[PelRow]:
    """Every pending row of ``group`` on ``key``, in ID order, duplicates kept (so tests can detect them)."""
    rows = (
        table(store, version)
        .where((F.col(C.PARTITION_ID) == group_partition(key, group)) & (F.col(C.ROW_KIND) == C.KIND_PENDING))
        .select(C.ID_MS, C.ID_SEQ, C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT, C.TXN)
        .orderBy(C.ID_MS, C.ID_SEQ)
        .collect()
    )
    return [PelRow(str(stored_id(r)), r[C.OWNER], r[C.DELIVERY_TIME_MS], r[C.DELIVERY_COUNT], r[C.TXN]) for r in rows]


def entry_ids(store: StreamStore, key: str, version: int | None = None) -> list[str]:
    """IDs ("ms-seq") of the stream's entry rows, in ID order."""
    rows = (
        table(store, version)
        .where((F.col(C.PARTITION_ID) == stream_partition(key)) & (F.col(C.ROW_KIND) == C.KIND_ENTRY))
        .select(C.ID_MS, C.ID_SEQ)
        .orderBy(C.ID_MS, C.ID_SEQ)
        .collect()
    )
    return [str(stored_id(r)) for r in rows]


def duplicates(items: list[str]) -> dict[str, int]:
    """Items that occur more than once, with their counts (empty when all are distinct)."""
    return {item: n for item, n in Counter(items).items() if n > 1}


def by_id(rows: list[PelRow]) -> dict[str, PelRow]:
    """PEL rows keyed by entry ID (callers check ``duplicates`` first)."""
    return {row.id: row for row in rows}


def rewritten_buckets(store: StreamStore, version: int) -> set[str]:
    """The buckets of the data files commit ``version`` removed (rewrote, or deleted), from its log file.

    A commit that removed no file of an ``s`` or ``g`` bucket copied no entry or PEL row, whatever it
    copied of the heads and consumers beside the rows it changed.
    """
    log_file = Path(store.path) / C.STATE_TABLE_DIR / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    return {action["remove"]["partitionValues"][C.BUCKET] for action in actions if "remove" in action}

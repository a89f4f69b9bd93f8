"""XPENDING's summary of a group's PEL: how many entries, the smallest and largest ID, the count per owner;
and XINFO's counts (per owner, ``owner_counts``; consumers and entries per group, ``group_counts``).

In a large table (the size ``file_stats`` narrows reads from) the files Delta's statistics answer are
counted from them and only the others are read (``pending_stats``); elsewhere the kept PEL files that
may hold the group's rows are read on the driver when they hold at most the placement's ``Work.PREFETCH`` rows (no
Spark job), else one aggregation reads the PEL's kind, owner and ID columns. XNACKed entries, which
have no owner, count only in the total. Where the caller could not read the stream and group heads
from their own files, they come in the same query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state import file_stats, pending_stats
from streamclaim_spark.state.columns import id_range_aggregates, stored_id
from streamclaim_spark.state.delta_io import is_connect
from streamclaim_spark.state.file_stats import table_bytes
from streamclaim_spark.state.prefetch import PrefetchedSnapshot
from streamclaim_spark.state.prefetch_rows import rows_of
from streamclaim_spark.state.schema import COLUMN_NAMES, in_partitions, kind_in

Summary = tuple[int, StreamId | None, StreamId | None, dict[str, int]]


def summarize(snapshot: PrefetchedSnapshot, key: str, group: str, heads: bool) -> tuple[Summary, list[Any]]:
    """The summary of ``group``'s PEL at the snapshot's version, and (with ``heads``) the stream and group
    head rows read in the same query, for the snapshot to remember."""
    stream_part, group_part = stream_partition(key), group_partition(key, group)
    of_key = in_partitions([stream_part, group_part]) & (F.col(C.STREAM) == key)
    wanted = kind_in(group_part, C.KIND_PENDING)
    head_kinds = kind_in(stream_part, C.KIND_STREAM) | kind_in(group_part, C.KIND_GROUP)
    head_files = [FileQuery((stream_part,), (C.KIND_STREAM,)), FileQuery((group_part,), (C.KIND_GROUP,))]
    pel_files = FileQuery((group_part,), (C.KIND_PENDING,))
    aggregates = id_range_aggregates()
    row = F.struct(*(F.col(name) for name in COLUMN_NAMES)).alias("row")
    large = (table_bytes(snapshot.spark, snapshot.table_path) or 0) >= file_stats.NARROW_FROM_BYTES
    stored = (
        None
        if large or heads
        else snapshot.stored_rows([pel_files], _DRIVER_COLUMNS, placement().rows_max(Work.PREFETCH))
    )
    if stored is not None:  # the few kept PEL files read on the driver: no Spark job
        return _summary_on_driver(stored, key, group_part), []
    from_stats = _summary_from_stats(snapshot, key, group_part) if large else None
    counts: dict[str, int] = {}
    total = 0
    parts: list[DataFrame] = []
    lowest: StreamId | None = None
    highest: StreamId | None = None
    if from_stats is not None:
        lowest, highest = min(from_stats.known, default=None), max(from_stats.known, default=None)
        for owner, n in from_stats.counted.items():
            total += n
            if owner is not None:  # XNACKed entries count in the total, under no consumer
                counts[owner] = counts.get(owner, 0) + n
        if from_stats.read is not None:
            parts.append(from_stats.read.withColumn(C.ROW_KIND, F.lit(C.KIND_PENDING)))
    elif heads and not large:
        rows = snapshot.frame_of([*head_files, pel_files]).where((wanted | head_kinds) & of_key)
        parts.append(rows.groupBy(C.ROW_KIND, C.OWNER).agg(*aggregates, F.first(row).alias("row")))
    else:
        rows = snapshot.frame_of([pel_files]).where(wanted & of_key)
        parts.append(rows.groupBy(C.ROW_KIND, C.OWNER).agg(*aggregates))
    if heads and large:
        parts.append(snapshot.frame_of(head_files).where(head_kinds & of_key).select(C.ROW_KIND, row))
    found_rows = []
    if parts:
        summary = parts[0]
        for part in parts[1:]:
            summary = summary.unionByName(part, allowMissingColumns=True)
        found_rows = summary.collect()
    head_rows = []
    for found in found_rows:
        if found[C.ROW_KIND] != C.KIND_PENDING:
            head_rows.append(found["row"])
            continue
        total += found["n"]
        if found[C.OWNER] is not None:
            counts[found[C.OWNER]] = counts.get(found[C.OWNER], 0) + found["n"]
        low, high = stored_id(found["lo"]), stored_id(found["hi"])
        lowest = low if lowest is None else min(lowest, low)
        highest = high if highest is None else max(highest, high)
    return (total, lowest, highest, counts), head_rows


# The columns a summary on the driver reads from the kept PEL files.
_DRIVER_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.OWNER, C.ID_MS, C.ID_SEQ)


def _summary_on_driver(stored: pa.Table, key: str, partition_id: str) -> Summary:
    """The summary of the group's pending rows among ``stored`` (rows of the files that may hold them)."""
    rows = rows_of(stored, key, partition_id, C.KIND_PENDING)
    if not rows.num_rows:
        return 0, None, None, {}
    order = pc.sort_indices(rows, sort_keys=[(C.ID_MS, "ascending"), (C.ID_SEQ, "ascending")])
    ends = rows.take(pa.array([order[0].as_py(), order[-1].as_py()])).to_pylist()
    return rows.num_rows, stored_id(ends[0]), stored_id(ends[1]), _owner_counts(rows)


def owner_counts(snapshot: PrefetchedSnapshot, key: str, group: str) -> dict[str, int] | None:
    """The group's pending entries per owner (XINFO CONSUMERS), counted on the driver from the kept PEL
    files that may hold them when they hold at most the placement's ``Work.PREFETCH`` rows; None where Spark counts."""
    partition_id = group_partition(key, group)
    query = FileQuery((partition_id,), (C.KIND_PENDING,))
    stored = snapshot.stored_rows(
        [query], (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.OWNER), placement().rows_max(Work.PREFETCH)
    )
    return None if stored is None else _owner_counts(rows_of(stored, key, partition_id, C.KIND_PENDING))


def group_counts(snapshot: PrefetchedSnapshot, key: str, groups: Sequence[str]) -> dict[str, tuple[int, int]] | None:
    """(consumers, pending entries) per group (XINFO GROUPS), counted on the driver as ``owner_counts``."""
    partitions = {group_partition(key, group): group for group in groups}
    query = FileQuery(tuple(sorted(partitions)), (C.KIND_CONSUMER, C.KIND_PENDING))
    stored = snapshot.stored_rows([query], (C.PARTITION_ID, C.ROW_KIND, C.STREAM), placement().rows_max(Work.PREFETCH))
    if stored is None:
        return None
    mine = stored.filter(
        pc.and_(pc.is_in(stored[C.PARTITION_ID], pa.array(list(partitions))), pc.equal(stored[C.STREAM], key))
    )
    counts = {group: [0, 0] for group in groups}
    for found in mine.group_by([C.PARTITION_ID, C.ROW_KIND]).aggregate([([], "count_all")]).to_pylist():
        kind = found[C.ROW_KIND]
        if kind in (C.KIND_CONSUMER, C.KIND_PENDING):
            counts[partitions[found[C.PARTITION_ID]]][0 if kind == C.KIND_CONSUMER else 1] = found["count_all"]
    return {group: (n[0], n[1]) for group, n in counts.items()}


def _owner_counts(rows: pa.Table) -> dict[str, int]:
    """Pending rows per owner; XNACKed rows (no owner) count in no consumer's."""
    owners = pc.value_counts(pc.drop_null(rows[C.OWNER])).to_pylist()
    return {str(owner["values"]): int(owner["counts"]) for owner in owners}


def _summary_from_stats(snapshot: PrefetchedSnapshot, key: str, partition_id: str) -> pending_stats.StatsSummary | None:
    """``pending_stats.summary_from_stats`` where it applies: a classic session, a pinned version, and
    reads that are the stored rows (a batch's reads overlay its own changes)."""
    if snapshot.version is None or is_connect(snapshot.spark) or not snapshot.reads_stored_rows():
        return None
    return pending_stats.summary_from_stats(snapshot.spark, snapshot.table_path, snapshot.version, key, partition_id)

"""Which entries a delivery takes, decided on the driver when the entries after its cursors are few.

A delivery joins the streams' entries after the lowest cursor with its targets' cursors, caps them,
counts each target's first and last ID, then writes the PEL rows: through Spark one aggregation job,
and the append's write evaluates the join again (~0.45 s and ~0.7 s of a streaming micro-batch of
1,000 entries, CHANGELOG.md, "The streaming source's batch on the driver"). When the entry files
whose statistics reach past the lowest cursor hold at most the placement's ``Work.DECIDE`` rows and are
kept on the driver, their ID columns are read by pyarrow and the same decision is made in Arrow: the
PEL rows become a local table, and no Spark job runs before the commit writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import MAX_ID, StreamId
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state.prefetch import PrefetchedSnapshot

TARGET = "_target"
UNTIL_MS, UNTIL_SEQ = "_until_ms", "_until_seq"
# A target's record: its position, stream, group, group partition, consumer, cursor and ``until`` cap.
TARGET_SCHEMA = pa.schema(
    [
        (TARGET, pa.int64()),
        (C.STREAM, pa.string()),
        (C.GROUP, pa.string()),
        (C.PARTITION_ID, pa.string()),
        (C.OWNER, pa.string()),
        (C.LAST_MS, pa.int64()),
        (C.LAST_SEQ, pa.int64()),
        (UNTIL_MS, pa.int64()),
        (UNTIL_SEQ, pa.int64()),
    ]
)
_ENTRY_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.ID_MS, C.ID_SEQ)
_PENDING_KEY = (C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ)


def delivered_on_driver(
    snapshot: PrefetchedSnapshot,
    records: Sequence[Mapping[str, object]],
    lowest: StreamId,
    count: int | None,
    total: int | None,
) -> pa.Table | None:
    """The entries each target of ``records`` delivers, as ``deliver._delivered`` chooses them (after its
    cursor, up to its cap, at most ``count`` per target and ``total`` in all, the oldest first): the
    target's columns with ``id_ms`` and ``id_seq``, ordered by target and ID. None where Spark decides:
    the files are not kept on the driver, or hold more than the placement's ``Work.DECIDE`` rows."""
    partitions = sorted({stream_partition(str(record[C.STREAM])) for record in records})
    query = FileQuery(tuple(partitions), (C.KIND_ENTRY,), lowest, MAX_ID)
    stored = snapshot.stored_rows([query], _ENTRY_COLUMNS, placement().rows_max(Work.DECIDE))
    if stored is None:
        return None
    entries = stored.filter(
        pc.and_(
            pc.equal(stored.column(C.ROW_KIND), C.KIND_ENTRY),
            pc.is_in(stored.column(C.PARTITION_ID), value_set=pa.array(partitions, pa.string())),
        )
    ).select([C.STREAM, C.ID_MS, C.ID_SEQ])
    targets = pa.Table.from_pylist([dict(record) for record in records], schema=TARGET_SCHEMA)
    joined = entries.join(targets, C.STREAM)
    ms, seq = joined.column(C.ID_MS), joined.column(C.ID_SEQ)
    after = _after(ms, seq, joined.column(C.LAST_MS), joined.column(C.LAST_SEQ))
    until_ms, until_seq = joined.column(UNTIL_MS), joined.column(UNTIL_SEQ)
    within = pc.or_kleene(pc.is_null(until_ms), pc.invert(_after(ms, seq, until_ms, until_seq)))
    delivered = joined.filter(pc.and_(after, within))
    if count is not None:
        delivered = _first_of_each_target(delivered.sort_by(_ORDER), count)
    if total is not None:
        oldest = [(C.ID_MS, "ascending"), (C.ID_SEQ, "ascending"), (TARGET, "ascending")]
        delivered = delivered.sort_by(oldest).slice(0, total)
    return delivered.sort_by(_ORDER)


_ORDER = [(TARGET, "ascending"), (C.ID_MS, "ascending"), (C.ID_SEQ, "ascending")]


def none_pending_after_on_driver(
    snapshot: PrefetchedSnapshot, records: Sequence[Mapping[str, object]], lowest: StreamId
) -> bool | None:
    """True when no PEL row of the targets' groups lies after its group's cursor (the usual case), read on
    the driver: the PEL files whose statistics reach past the lowest cursor are usually none, or the few
    a claim or XCLAIM FORCE wrote (0.2-0.4 s a delivery saved). None where Spark must look."""
    partitions = tuple(sorted({str(record[C.PARTITION_ID]) for record in records}))
    query = FileQuery(partitions, (C.KIND_PENDING,), lowest, MAX_ID)
    stored = snapshot.stored_rows([query], _PENDING_KEY, placement().rows_max(Work.DECIDE))
    if stored is None:
        return None
    cursors = pa.Table.from_pylist([dict(record) for record in records], schema=TARGET_SCHEMA)
    rows = stored.filter(pc.equal(stored.column(C.ROW_KIND), C.KIND_PENDING)).join(
        cursors.select([C.PARTITION_ID, C.LAST_MS, C.LAST_SEQ]), C.PARTITION_ID
    )
    after = _after(rows.column(C.ID_MS), rows.column(C.ID_SEQ), rows.column(C.LAST_MS), rows.column(C.LAST_SEQ))
    return not pc.any(after).as_py()


def _after(ms: pa.ChunkedArray, seq: pa.ChunkedArray, last_ms: pa.ChunkedArray, last_seq: pa.ChunkedArray) -> pa.Array:
    """Each row's ID lies after (``last_ms``, ``last_seq``)."""
    return pc.or_(pc.greater(ms, last_ms), pc.and_(pc.equal(ms, last_ms), pc.greater(seq, last_seq)))


def _first_of_each_target(rows: pa.Table, count: int) -> pa.Table:
    """The first ``count`` rows of each target in ``rows`` (ordered by target)."""
    targets = rows.column(TARGET).to_numpy()
    if not len(targets):
        return rows
    starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
    rank = np.arange(len(targets)) - np.repeat(starts, np.diff(np.r_[starts, len(targets)]))
    return rows.filter(pa.array(rank < count))


def bounds_of(delivered: pa.Table) -> list[tuple[int, int, StreamId, StreamId]]:
    """Each target's delivered count, first and last ID, from ``delivered`` ordered by target and ID
    (by column: a fleet's delivery decides 1M rows here)."""
    targets = delivered.column(TARGET).to_numpy()
    if not len(targets):
        return []
    starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
    ends = np.r_[starts[1:], len(targets)] - 1
    ms, seq = delivered.column(C.ID_MS).to_numpy(), delivered.column(C.ID_SEQ).to_numpy()
    return [
        (
            int(targets[first]),
            int(last - first + 1),
            StreamId.from_stored(int(ms[first]), int(seq[first])),
            StreamId.from_stored(int(ms[last]), int(seq[last])),
        )
        for first, last in zip(starts.tolist(), ends.tolist(), strict=True)
    ]


def pending_rows_of(delivered: pa.Table, now: int, txn: str) -> pa.Table:
    """The PEL rows the delivered entries become (``deliver._pending_rows``): owned by their target's
    consumer, delivered once, at ``now``, by transaction ``txn``."""
    rows = delivered.num_rows
    return pa.table(
        {
            C.PARTITION_ID: delivered.column(C.PARTITION_ID),
            C.ROW_KIND: pa.array([C.KIND_PENDING] * rows, pa.string()),
            C.STREAM: delivered.column(C.STREAM),
            C.GROUP: delivered.column(C.GROUP),
            C.ID_MS: delivered.column(C.ID_MS),
            C.ID_SEQ: delivered.column(C.ID_SEQ),
            C.OWNER: delivered.column(C.OWNER),
            C.DELIVERY_TIME_MS: pa.array([now] * rows, pa.int64()),
            C.DELIVERY_COUNT: pa.array([1] * rows, pa.int64()),
            C.TXN: pa.array([txn] * rows, pa.string()),
        }
    )

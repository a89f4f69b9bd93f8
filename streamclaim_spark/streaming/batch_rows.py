"""A micro-batch's rows read on the driver: its PEL rows with their entries' fields, joined in Arrow.

``partitions`` emits what a batch's offset names: the query's consumer's PEL rows in each stream's ID
range as of the batch's version, each with its entry's fields. Through Spark that is a read by time
travel (Delta's log state rebuilt for the version), a join and an Arrow collection: 1.3-2.4 s per
micro-batch of 1,000 entries (CHANGELOG.md, "The streaming source's batch on the driver"). The
version is the one the planning process has just committed, so its files are kept on the driver: the
PEL and entry files whose statistics reach the ranges are read by pyarrow and joined here. Where they
are not kept (a replay in a new process, Spark Connect, a deletion vector) the caller reads through Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.state.arrow_schema import ARROW_SCHEMA
from streamclaim_spark.state.prefetch import PrefetchedSnapshot

Ranges = Mapping[str, tuple[StreamId, StreamId]]

_PENDING_COLUMNS = (
    C.PARTITION_ID,
    C.ROW_KIND,
    C.OWNER,
    C.STREAM,
    C.ID_MS,
    C.ID_SEQ,
    C.DELIVERY_COUNT,
    C.DELIVERY_TIME_MS,
)
_ENTRY_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
_KEY = [C.STREAM, C.ID_MS, C.ID_SEQ]
_POSITION = "_position"
# Flipping a stored ID part's sign bit gives the unsigned part (stored = part - 2**63, core/ids.py).
_SIGN_BIT = pa.scalar(1 << 63, pa.uint64())


def batch_rows(snapshot: PrefetchedSnapshot, ranges: Ranges, group: str, consumer: str) -> pa.Table | None:
    """The rows a batch emits (``source._entry_rows``' columns, in no order): ``consumer``'s pending rows
    of ``group`` in ``ranges`` (each stream's exclusive low and inclusive high ID) at the snapshot's
    version, with their entries' fields (null for a deleted entry). None where the files are not kept
    on the driver."""
    pending = pending_rows(snapshot, ranges, group, consumer)
    if pending is None:
        return None
    if not pending.num_rows:
        return _joined(pending, None)
    streams = {stream: stream_partition(stream) for stream in ranges}
    entries = snapshot.stored_rows([ranges_query(ranges, C.KIND_ENTRY, stream_partition)], _ENTRY_COLUMNS, None)
    if entries is None:
        return None
    return _joined(pending, entries.filter(_in_ranges(entries, ranges, C.KIND_ENTRY, streams)))


def pending_rows(
    snapshot: PrefetchedSnapshot, ranges: Ranges, group: str, consumer: str, max_rows: int | None = None
) -> pa.Table | None:
    """``consumer``'s pending rows of ``group`` in ``ranges``, read on the driver from the files that may
    hold them (at most ``max_rows`` rows in all, when given); None where Spark must read them."""
    groups = {stream: group_partition(stream, group) for stream in ranges}
    query = ranges_query(ranges, C.KIND_PENDING, groups.__getitem__)
    pending = snapshot.stored_rows([query], _PENDING_COLUMNS, max_rows)
    if pending is None:
        return None
    return pending.filter(
        pc.and_(_in_ranges(pending, ranges, C.KIND_PENDING, groups), pc.equal(pending[C.OWNER], consumer))
    )


def ranges_query(ranges: Ranges, kind: str, partition_of: Callable[[str], str]) -> FileQuery:
    """The files that may hold rows of ``kind`` in the ranges (each stream's exclusive low and inclusive
    high ID): their streams' partitions (``partition_of``), between the lowest and the highest ID."""
    low = min(start for start, _ in ranges.values()).incr()
    high = max(end for _, end in ranges.values())
    return FileQuery(tuple(sorted({partition_of(stream) for stream in ranges})), (kind,), low, high)


def _joined(pending: pa.Table, entries: pa.Table | None) -> pa.Table:
    """Each pending row with its entry's fields: Arrow's join cannot carry a list column, so the entries'
    positions are joined and their fields taken by them."""
    if entries is not None and entries.num_rows:
        keys = entries.select(_KEY).append_column(_POSITION, pa.array(range(entries.num_rows), pa.int64()))
        joined = pending.select([*_KEY, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS]).join(keys, _KEY, join_type="left outer")
        fields = entries.column(C.FIELDS).take(joined.column(_POSITION))
    else:
        joined = pending
        fields = pa.chunked_array([pa.nulls(pending.num_rows, ARROW_SCHEMA.field(C.FIELDS).type)])
    ms, seq = joined.column(C.ID_MS).combine_chunks(), joined.column(C.ID_SEQ).combine_chunks()
    delivered_at = pc.multiply(joined.column(C.DELIVERY_TIME_MS), 1000).cast(pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            "stream": joined.column(C.STREAM),
            "id": pc.binary_join_element_wise(_unsigned_text(ms), _unsigned_text(seq), "-"),
            "fields": fields,
            "delivery_count": joined.column(C.DELIVERY_COUNT),
            "delivered_at": delivered_at,
            C.ID_MS: ms,
            C.ID_SEQ: seq,
        }
    )


def _unsigned_text(stored: pa.Array) -> pa.Array:
    """A stored (signed) ID part as its unsigned decimal text, as Redis writes an ID."""
    return pc.cast(pc.bit_wise_xor(stored.view(pa.uint64()), _SIGN_BIT), pa.string())


def _in_ranges(table: pa.Table, ranges: Ranges, kind: str, partitions: Mapping[str, str]) -> pa.ChunkedArray:
    """Rows of ``kind`` in each stream's ID range (exclusive low, inclusive high), in its partition."""
    ms, seq = table.column(C.ID_MS), table.column(C.ID_SEQ)
    spans = None
    for stream, (low, high) in sorted(ranges.items()):
        after_ms, after_seq = low.stored()
        high_ms, high_seq = high.stored()
        span = pc.and_(
            pc.equal(table.column(C.PARTITION_ID), partitions[stream]),
            pc.and_(
                pc.or_(pc.greater(ms, after_ms), pc.and_(pc.equal(ms, after_ms), pc.greater(seq, after_seq))),
                pc.or_(pc.less(ms, high_ms), pc.and_(pc.equal(ms, high_ms), pc.less_equal(seq, high_seq))),
            ),
        )
        spans = span if spans is None else pc.or_(spans, span)
    assert spans is not None
    return pc.and_(pc.equal(table.column(C.ROW_KIND), kind), spans)

"""Bulk XADD of rows already on the driver as Arrow: the Structured Streaming sink's micro-batch.

The sink's tasks hand their rows to the driver as Arrow. Made into a DataFrame again for ``append``,
a batch of 250,000 rows went back to one Spark task through the plan, was counted by a job and
written by another: 6-8 s of a 9 s batch (CHANGELOG.md, "Data files written on the driver").
Here the entries are built in Arrow, IDs and field/value pairs exactly as ``append`` gives them, and
planned as an append the commit writes on the driver. Columns whose text Arrow would render otherwise
than Spark's cast (floats, decimals, times, nested types) and a column of pairs (``fields``) take the
DataFrame path instead: ``entries_of`` returns None for them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Need
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.fleet.bulk.append import BulkAppend, check_named, check_target, place_ids

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner

_PAIR = pa.struct([pa.field("field", pa.binary()), pa.field("value", pa.binary())])


def _renders_as_spark(data_type: pa.DataType) -> bool:
    """True when Arrow's cast of ``data_type`` to text equals Spark's cast to string."""
    return bool(
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_integer(data_type)
        or pa.types.is_boolean(data_type)
    )


def entries_of(table: pa.Table, stream_column: str | None) -> pa.ListArray | None:
    """Each row's field/value pairs as ``append`` makes them with ``fields=None`` (every column but
    ``stream_column``, named after it; binary as it is, others as UTF-8 text; null as empty bytes), or
    None when some column's text would differ from Spark's."""
    names = [name for name in table.column_names if name != stream_column]
    if not names or not all(_renders_as_spark(table.schema.field(name).type) for name in names):
        return None
    rows, width = table.num_rows, len(names)
    pairs = []
    for name in names:
        column = table.column(name)
        if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
            column = pc.cast(column, pa.string())
        values = pc.fill_null(pc.cast(column, pa.binary()), b"")
        fields = pa.repeat(name.encode(), rows)
        pairs.append(pa.StructArray.from_arrays([fields, values.combine_chunks()], fields=list(_PAIR)))
    # Row-major: row r's pairs are the r-th value of each column, in column order.
    by_column = pa.concat_arrays(pairs)
    order = (np.arange(width)[None, :] * rows + np.arange(rows)[:, None]).ravel()
    offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, by_column.take(pa.array(order)))


def append_table(
    runner: Runner, key: str | None, table: pa.Table, stream_column: str | None = None
) -> BulkAppend | None:
    """Appends every row of ``table`` to its stream (``key``, or the stream ``stream_column`` names) in
    one commit, as ``append`` with ``fields=None`` would; None when ``entries_of`` cannot build the
    entries (the caller appends a DataFrame instead)."""
    check_target(key, stream_column, table.column_names, "the rows")
    fields = entries_of(table, stream_column)
    if fields is None:
        return None
    streams = (
        pa.repeat(key, table.num_rows)
        if key is not None
        else pc.cast(table.column(stream_column).combine_chunks(), pa.string())
    )
    check_named(streams.null_count, stream_column)

    def decide(ctx: Context) -> BulkAppend:
        return _decide(ctx, streams, fields, one_stream=key is not None)

    result = runner.transact("BULK APPEND", decide)
    return replace(result, version=runner.last_commit_version)


def _decide(ctx: Context, streams: pa.Array, fields: pa.ListArray, one_stream: bool) -> BulkAppend:
    """Plans the append: each stream's IDs and head, then its entry rows in input order, the streams in
    the order of their partitions (the order files are written in)."""
    if not len(streams):
        return BulkAppend(0, None, None, None)
    names = sorted(pc.unique(streams).to_pylist(), key=stream_partition)
    ctx.snapshot.prefetch(*(Need(name) for name in names))
    ranges: dict[str, tuple[int, StreamId, StreamId]] = {}
    parts: list[pa.Table] = []
    for name in names:
        positions = pc.indices_nonzero(pc.equal(streams, name)) if len(names) > 1 else None
        total = len(streams) if positions is None else len(positions)
        first, last = place_ids(ctx, name, total)
        ranges[name] = (total, first, last)
        first_ms, first_seq = first.stored()
        parts.append(
            pa.table(
                {
                    C.PARTITION_ID: pa.repeat(stream_partition(name), total),
                    C.ROW_KIND: pa.repeat(C.KIND_ENTRY, total),
                    C.STREAM: pa.repeat(name, total),
                    C.ID_MS: pa.repeat(pa.scalar(first_ms, pa.int64()), total),
                    C.ID_SEQ: pa.array(np.arange(first_seq, first_seq + total, dtype=np.int64)),
                    C.FIELDS: fields if positions is None else fields.take(positions),
                    C.TXN: pa.repeat(ctx.txn, total),
                }
            )
        )
    ctx.plan.add_append(pa.concat_tables(parts), *(stream_partition(name) for name in names), ordered=True)
    total = len(streams)
    if one_stream:
        _, first, last = ranges[names[0]]
        return BulkAppend(total, first, last, None, ranges)
    return BulkAppend(total, None, None, None, ranges)

"""FileQuery.may_hold: the files a commit lists on the driver, by bucket and statistics, never missing one."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import STATS_STRING_PREFIX, FileBounds
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import bucket_of

# Three group partitions of one bucket (the kind letter and the first digit) and one of another.
SAME_BUCKET = ("g1" + "a" * 23, "g1" + "b" * 23, "g1" + "c" * 23)
OTHER_BUCKET = "g2" + "a" * 23
PENDING_BUCKET = bucket_of(SAME_BUCKET[0], C.KIND_PENDING)


def bounds_of(rows: Sequence[tuple[str, StreamId | None]]) -> FileBounds:
    """The statistics Delta writes for a file of rows (partition ID, ID or None for a head), column by column."""
    ids = [row_id.stored() for _, row_id in rows if row_id is not None]
    partitions = [partition for partition, _ in rows]
    low: dict[str, object] = {C.PARTITION_ID: min(partitions)}
    high: dict[str, object] = {C.PARTITION_ID: max(partitions)}
    if ids:
        low |= {C.ID_MS: min(ms for ms, _ in ids), C.ID_SEQ: min(seq for _, seq in ids)}
        high |= {C.ID_MS: max(ms for ms, _ in ids), C.ID_SEQ: max(seq for _, seq in ids)}
    nulls = {C.PARTITION_ID: 0, C.ID_MS: len(rows) - len(ids), C.ID_SEQ: len(rows) - len(ids)}
    stats = {"numRecords": len(rows), "minValues": low, "maxValues": high, "nullCount": nulls}
    bounds = FileBounds.from_stats("part-0.parquet", json.dumps(stats))
    assert bounds is not None
    return bounds


def pending(partitions: tuple[str, ...], low: StreamId | None = None, high: StreamId | None = None) -> FileQuery:
    return FileQuery(partitions, (C.KIND_PENDING,), low, high, every_partition_named=True)


def test_a_file_of_another_bucket_or_of_other_partitions_is_left_out() -> None:
    rows = [(SAME_BUCKET[0], StreamId(5, 0)), (SAME_BUCKET[1], StreamId(6, 0))]
    assert pending((SAME_BUCKET[0],)).may_hold(PENDING_BUCKET, bounds_of(rows))
    assert not pending((SAME_BUCKET[0],)).may_hold(bucket_of(OTHER_BUCKET, C.KIND_PENDING), bounds_of(rows))
    assert not pending((SAME_BUCKET[2],)).may_hold(PENDING_BUCKET, bounds_of(rows))
    assert not pending((SAME_BUCKET[0],)).may_hold(bucket_of(SAME_BUCKET[0], C.KIND_GROUP), bounds_of(rows))


def test_a_file_without_statistics_or_with_cut_strings_is_listed() -> None:
    assert pending((SAME_BUCKET[2],)).may_hold(PENDING_BUCKET, None)
    long_low, long_high = "g1" + "a" * STATS_STRING_PREFIX, "g1" + "b" * STATS_STRING_PREFIX
    bounds = bounds_of([(long_low, StreamId(1, 0)), (long_high, StreamId(1, 1))])
    assert pending((SAME_BUCKET[2],)).may_hold(PENDING_BUCKET, bounds)  # past the cut, anything may be there


def test_ids_are_compared_as_ms_then_seq_at_the_edges_of_the_range() -> None:
    rows = [(SAME_BUCKET[0], StreamId(10, 5)), (SAME_BUCKET[0], StreamId(12, 3))]
    partition = (SAME_BUCKET[0],)
    # Each column apart: the file may hold IDs from (10, 3) to (12, 5), though no row has either.
    assert not pending(partition, StreamId(12, 6), StreamId(20, 0)).may_hold(PENDING_BUCKET, bounds_of(rows))
    assert pending(partition, StreamId(12, 5), StreamId(20, 0)).may_hold(PENDING_BUCKET, bounds_of(rows))
    assert not pending(partition, StreamId(1, 0), StreamId(10, 2)).may_hold(PENDING_BUCKET, bounds_of(rows))
    assert pending(partition, StreamId(1, 0), StreamId(10, 3)).may_hold(PENDING_BUCKET, bounds_of(rows))
    heads_only = bounds_of([(SAME_BUCKET[0], None)])
    assert not pending(partition, StreamId(0, 0), StreamId(99, 0)).may_hold(PENDING_BUCKET, heads_only)
    assert pending(partition).may_hold(PENDING_BUCKET, heads_only)  # no range: the partition decides


ids = st.builds(StreamId, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
rows_of_a_file = st.lists(st.tuples(st.sampled_from(SAME_BUCKET), st.one_of(st.none(), ids)), min_size=1, max_size=8)


@given(rows_of_a_file, st.sets(st.sampled_from(SAME_BUCKET), min_size=1), st.lists(ids, min_size=2, max_size=2))
def test_a_file_holding_a_row_the_query_names_is_never_left_out(
    rows: list[tuple[str, StreamId | None]], partitions: set[str], edges: list[StreamId]
) -> None:
    low, high = sorted(edges)
    query = pending(tuple(sorted(partitions)), low, high)
    named = any(partition in partitions and row_id is not None and low <= row_id <= high for partition, row_id in rows)
    if named:
        assert query.may_hold(PENDING_BUCKET, bounds_of(rows))

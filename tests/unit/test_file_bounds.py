"""FileBounds: what Delta's per-file statistics prove of every row, and never more."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import STATS_STRING_PREFIX, FileBounds
from streamclaim_spark.core.ids import StreamId


def bounds_of(ids: list[StreamId], owners: list[str | None]) -> FileBounds:
    """The bounds Delta would write for rows with these IDs and owners (each column apart)."""
    stored = [i.stored() for i in ids]
    named = [o for o in owners if o is not None]
    low: dict[str, object] = {C.ID_MS: min(s[0] for s in stored), C.ID_SEQ: min(s[1] for s in stored)}
    high: dict[str, object] = {C.ID_MS: max(s[0] for s in stored), C.ID_SEQ: max(s[1] for s in stored)}
    if named:
        low[C.OWNER], high[C.OWNER] = min(named), max(named)
    nulls = {C.ID_MS: 0, C.ID_SEQ: 0, C.OWNER: len(owners) - len(named)}
    stats = {"numRecords": len(ids), "minValues": low, "maxValues": high, "nullCount": nulls}
    bounds = FileBounds.from_stats("part-0.parquet", json.dumps(stats))
    assert bounds is not None
    return bounds


def test_a_column_is_one_value_only_with_equal_bounds_no_null_and_a_string_delta_keeps_whole() -> None:
    assert bounds_of([StreamId(1, 0)] * 2, ["alice", "alice"]).only(C.OWNER, "alice")
    assert not bounds_of([StreamId(1, 0)] * 2, ["alice", "bob"]).only(C.OWNER, "alice")
    assert not bounds_of([StreamId(1, 0)] * 2, ["alice", None]).only(C.OWNER, "alice")
    long_name = "c" * STATS_STRING_PREFIX  # Delta may have cut it: another name could share the prefix
    assert not bounds_of([StreamId(1, 0)], [long_name]).only(C.OWNER, long_name)
    assert not bounds_of([StreamId(1, 0)], ["alice"]).only(C.STREAM, "alice")  # no statistics for it


def test_a_file_without_statistics_has_no_bounds() -> None:
    assert FileBounds.from_stats("p", None) is None
    assert FileBounds.from_stats("p", "") is None
    assert FileBounds.from_stats("p", json.dumps({"minValues": {}})) is None


def test_ids_between_holds_at_the_edges_and_fails_one_past_them() -> None:
    bounds = bounds_of([StreamId(5, 3), StreamId(6, 4), StreamId(7, 9)], ["a"] * 3)
    assert bounds.ids_between(StreamId(5, 3), StreamId(7, 9))
    assert not bounds.ids_between(StreamId(5, 4), StreamId(7, 9))
    assert not bounds.ids_between(StreamId(5, 3), StreamId(7, 8))
    assert bounds.ids_between(StreamId(4, 2**64 - 1), StreamId(2**64 - 1, 2**64 - 1))


def test_ids_between_refuses_what_bounds_taken_column_by_column_cannot_show() -> None:
    # The smallest seq (0) is 6-0's, so the file may hold 5-0 as far as its statistics tell.
    bounds = bounds_of([StreamId(5, 3), StreamId(6, 0), StreamId(7, 9)], ["a"] * 3)
    assert not bounds.ids_between(StreamId(5, 3), StreamId(7, 9))
    assert bounds.ids_between(StreamId(5, 0), StreamId(7, 9))


ids = st.builds(StreamId, st.integers(0, 4), st.integers(0, 4))


@given(st.lists(ids, min_size=1, max_size=6), ids, ids)
def test_ids_between_never_vouches_for_a_file_holding_an_id_outside_the_range(
    file_ids: list[StreamId], low: StreamId, high: StreamId
) -> None:
    if bounds_of(file_ids, [None] * len(file_ids)).ids_between(low, high):
        assert all(low <= i <= high for i in file_ids)

"""Named IDs held on the driver: parsing Redis' text as Spark's parse does, bounds and membership."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamclaim_spark.core.ids import StreamId, parse_id, to_stored
from streamclaim_spark.core.integers import UINT64_MAX
from streamclaim_spark.core.named_ids import NamedIds, box_width, parse_stored

UINT64 = st.integers(min_value=0, max_value=UINT64_MAX)


def stored(*ids: str) -> NamedIds:
    parsed = [parse_id(text) for text in ids]
    return NamedIds(np.array([to_stored(i.ms) for i in parsed]), np.array([to_stored(i.seq) for i in parsed]))


def test_text_that_redis_would_not_render_as_an_id_is_left_out_of_the_parse() -> None:
    texts = [
        "1-2", "01-2", "1-02", "+1-2", "-1-2", " 1-2", "1-2 ", "1", "1-", "-", "", None, "5-6-7", "1.0-2",
        "18446744073709551615-0", "18446744073709551616-0", "0-18446744073709551615", "99999999999999999999-1",
        "100000000000000000000-1", "0-0",
    ]  # fmt: skip

    ms, seq = parse_stored(pa.chunked_array([pa.array(texts[:7]), pa.array(texts[7:])]))

    expected = [(1, 2), (UINT64_MAX, 0), (0, UINT64_MAX), (0, 0)]
    assert list(zip(ms.tolist(), seq.tolist(), strict=True)) == [(to_stored(m), to_stored(s)) for m, s in expected]


@given(st.lists(st.tuples(UINT64, UINT64), max_size=20))
def test_every_rendered_id_parses_back_to_its_stored_parts(ids: list[tuple[int, int]]) -> None:
    ms, seq = parse_stored(pa.array([f"{m}-{s}" for m, s in ids], pa.string()))

    assert ms.dtype == seq.dtype == np.int64
    assert list(zip(ms.tolist(), seq.tolist(), strict=True)) == [(to_stored(m), to_stored(s)) for m, s in ids]


def test_named_ids_know_their_lowest_and_highest_id_and_their_sequence_range() -> None:
    named = stored("7-3", "5-9", "5-2", "7-1", "5-9")

    assert (named.low, named.high, named.seq_range, len(named)) == (StreamId(5, 2), StreamId(7, 3), (1, 9), 5)
    assert named.width == 9


def test_membership_takes_only_named_ids_not_ids_whose_packed_key_would_collide() -> None:
    # The box is ms 5..6 x seq 2..9 (width 8): 6-1 lies outside it though (6 - 5) * 8 + (1 - 2) = 7 is
    # the key of 5-9, and 4-9 / 7-2 lie outside its milliseconds.
    named = stored("5-2", "5-9", "6-4")

    rows = stored("5-2", "6-1", "5-9", "4-9", "7-2", "6-4", "5-3")
    found = named.contains(rows.ms, rows.seq)

    assert found is not None
    assert found.tolist() == [True, False, True, False, False, True, False]


def test_ids_spread_over_too_large_a_box_are_not_packed() -> None:
    named = stored("0-0", "18446744073709551615-18446744073709551615")

    assert named.width is None
    assert named.contains(named.ms, named.seq) is None
    assert box_width(StreamId(0, 0), StreamId(2**31, 0), (0, 2**31)) is None
    assert box_width(StreamId(0, 0), StreamId(2**30, 0), (0, 2**31 - 1)) == 2**31


def test_named_ids_need_at_least_one_id() -> None:
    with pytest.raises(ValueError, match="one or more IDs"):
        NamedIds(np.array([], dtype=np.int64), np.array([], dtype=np.int64))

"""StreamId, the ID parsing modes and the Delta encoding; pinned values checked against redis-server 7.0.15."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamclaim_spark.core.ids import (
    MAX_ID,
    STORED_OFFSET,
    ZERO_ID,
    StreamId,
    from_stored,
    parse_id,
    parse_range_end,
    parse_range_start,
    parse_xadd_id,
    to_stored,
)
from streamclaim_spark.core.integers import LLONG_MAX, LLONG_MIN, UINT64_MAX
from streamclaim_spark.errors import INVALID_END_ID, INVALID_START_ID, INVALID_STREAM_ID, ReplyError

M = UINT64_MAX

uint64 = st.integers(min_value=0, max_value=UINT64_MAX)
stream_ids = st.builds(StreamId, uint64, uint64)


# --- StreamId ---------------------------------------------------------------------------------------------------


def test_str_is_ms_dash_seq() -> None:
    assert str(StreamId(1526919030474, 55)) == "1526919030474-55"
    assert str(MAX_ID) == "18446744073709551615-18446744073709551615"
    assert str(ZERO_ID) == "0-0"


def test_only_zero_id_is_zero() -> None:
    assert ZERO_ID.is_zero
    assert not StreamId(0, 1).is_zero
    assert not StreamId(1, 0).is_zero


def test_ordering_is_numeric_on_ms_then_seq_not_textual() -> None:
    ids = [StreamId(10, 0), StreamId(9, 99), StreamId(9, 100), ZERO_ID, MAX_ID, StreamId(0, M)]
    assert sorted(ids) == [ZERO_ID, StreamId(0, M), StreamId(9, 99), StreamId(9, 100), StreamId(10, 0), MAX_ID]
    assert str(StreamId(10, 0)) < str(StreamId(9, 99))  # why IDs must never be compared as strings


@pytest.mark.parametrize(("ms", "seq"), [(-1, 0), (0, -1), (M + 1, 0), (0, M + 1)])
def test_parts_outside_uint64_are_rejected(ms: int, seq: int) -> None:
    with pytest.raises(ValueError, match="must be in"):
        StreamId(ms, seq)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (ZERO_ID, StreamId(0, 1)),
        (StreamId(5, 7), StreamId(5, 8)),
        (StreamId(5, M), StreamId(6, 0)),
        (StreamId(M, M - 1), MAX_ID),
    ],
)
def test_incr_and_decr_step_by_one_with_carry(before: StreamId, after: StreamId) -> None:
    assert before.incr() == after
    assert after.decr() == before


def test_incr_of_the_maximum_overflows() -> None:
    with pytest.raises(OverflowError):
        MAX_ID.incr()


def test_decr_of_zero_overflows() -> None:
    with pytest.raises(OverflowError):
        ZERO_ID.decr()


@given(stream_ids)
def test_incr_is_the_immediate_successor(stream_id: StreamId) -> None:
    if stream_id == MAX_ID:
        return
    following = stream_id.incr()
    assert following > stream_id
    assert following.decr() == stream_id


# --- parse_id -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1526919030474-55", StreamId(1526919030474, 55)),
        ("0-0", ZERO_ID),
        ("18446744073709551615-18446744073709551615", MAX_ID),
        ("5", StreamId(5, 0)),
        ("05", StreamId(5, 0)),
        ("+5", StreamId(5, 0)),
        (" 5", StreamId(5, 0)),
        ("\t6", StreamId(6, 0)),
        ("1--01", StreamId(1, M)),
        ("1--05", StreamId(1, M - 4)),
        ("1--0", StreamId(1, 0)),
        ("1--18446744073709551615", StreamId(1, 1)),
        ("1-+2", StreamId(1, 2)),
        ("1- 3", StreamId(1, 3)),
        ("1-  +7", StreamId(1, 7)),
        ("1-9223372036854775808", StreamId(1, 9223372036854775808)),
        ("0" * 58 + "9", StreamId(9, 0)),
    ],
)
def test_parse_id_accepts_redis_lenient_numbers(text: str, expected: StreamId) -> None:
    assert parse_id(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "-5",
        "5-",
        "5-x",
        "1-2-3",
        "abc",
        "--",
        "",
        "5 ",
        "-0",
        "-05",
        "1--1",
        "1--9223372036854775808",
        "1-+ 7",
        "1-0x10",
        "1-٣",
        "\xa05",
        "18446744073709551616",
        "1-18446744073709551616",
        "(5",
        "(",
        "*",
        "5-*",
        "*-1",
    ],
)
def test_parse_id_rejects_malformed_ids_with_redis_text(text: str) -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse_id(text)
    assert str(excinfo.value) == "ERR Invalid stream ID specified as stream command argument"
    assert str(excinfo.value) == INVALID_STREAM_ID


def test_parse_id_accepts_127_bytes_and_rejects_128() -> None:
    assert parse_id("1-" + "0" * 124 + "1") == StreamId(1, 1)
    with pytest.raises(ReplyError) as excinfo:
        parse_id("1-" + "0" * 125 + "1")
    assert str(excinfo.value) == INVALID_STREAM_ID


def test_parse_id_measures_length_in_utf8_bytes() -> None:
    # Redis stops reading at the NUL, but the 128-byte limit is checked on the whole argument first.
    assert parse_id("5\x00" + "é" * 62) == StreamId(5, 0)
    with pytest.raises(ReplyError):
        parse_id("5\x00" + "é" * 63)


@pytest.mark.parametrize("text", ["-", "+"])
def test_strict_mode_rejects_dash_and_plus(text: str) -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse_id(text, strict=True)
    assert str(excinfo.value) == INVALID_STREAM_ID


def test_non_strict_mode_maps_dash_and_plus_to_the_extremes() -> None:
    assert parse_id("-", strict=False) == ZERO_ID
    assert parse_id("+", strict=False) == MAX_ID


@pytest.mark.parametrize("text", ["- ", " -", "+ ", "-0", "(-", "(+"])
def test_only_a_bare_dash_or_plus_is_special(text: str) -> None:
    with pytest.raises(ReplyError):
        parse_id(text, strict=False)


def test_missing_seq_fills_in_only_when_there_is_no_dash() -> None:
    assert parse_id("5", missing_seq=M) == StreamId(5, M)
    assert parse_id("5-3", missing_seq=M) == StreamId(5, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5\x00-3", StreamId(5, 0)),
        ("5\x00abc", StreamId(5, 0)),
        ("5-3\x00x", StreamId(5, 3)),
    ],
)
def test_parse_id_ignores_everything_after_a_nul_like_redis(text: str, expected: StreamId) -> None:
    assert parse_id(text) == expected


@pytest.mark.parametrize("text", ["\x005", "5-\x00", "-\x00abc", "+\x00abc"])
def test_a_nul_can_still_leave_an_invalid_id(text: str) -> None:
    with pytest.raises(ReplyError):
        parse_id(text)


def test_a_nul_after_dash_or_plus_still_means_the_extremes_when_not_strict() -> None:
    assert parse_id("-\x00x", strict=False) == ZERO_ID
    assert parse_id("+\x00", strict=False) == MAX_ID


@given(stream_ids)
def test_parse_id_reads_back_any_id_it_prints(stream_id: StreamId) -> None:
    assert str(parse_id(str(stream_id))) == str(stream_id)
    assert parse_id(str(stream_id)) == stream_id


# --- parse_xadd_id ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1-2", (StreamId(1, 2), True)),
        ("7", (StreamId(7, 0), True)),
        ("0", (ZERO_ID, True)),
        ("7-*", (StreamId(7, 0), False)),
        ("0-*", (ZERO_ID, False)),
        ("05-*", (StreamId(5, 0), False)),
        ("5-*\x00x", (StreamId(5, 0), False)),
        ("1--01", (StreamId(1, M), True)),
    ],
)
def test_xadd_id_accepts_complete_ids_and_ms_star(text: str, expected: tuple[StreamId, bool]) -> None:
    assert parse_xadd_id(text) == expected


@pytest.mark.parametrize("text", ["*", "-", "+", "-*", "*-*", "5-**", "5-*x", "5-* ", "5- *", "(5", "5-"])
def test_xadd_id_rejects_other_forms(text: str) -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse_xadd_id(text)
    assert str(excinfo.value) == INVALID_STREAM_ID


# --- range bounds -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-", ZERO_ID),
        ("+", MAX_ID),
        ("5", StreamId(5, 0)),
        ("5-3", StreamId(5, 3)),
        (" 42", StreamId(42, 0)),
        ("(5", StreamId(5, 1)),
        ("(5-3", StreamId(5, 4)),
        ("(0-0", StreamId(0, 1)),
        ("(0", StreamId(0, 1)),
        ("(5-18446744073709551615", StreamId(6, 0)),
        ("(18446744073709551615", StreamId(M, 1)),
        ("( 42", StreamId(42, 1)),
        ("(+42", StreamId(42, 1)),
    ],
)
def test_range_start_defaults_seq_to_zero_and_steps_past_an_exclusive_bound(text: str, expected: StreamId) -> None:
    assert parse_range_start(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-", ZERO_ID),
        ("+", MAX_ID),
        ("5", StreamId(5, M)),
        ("5-3", StreamId(5, 3)),
        ("+42", StreamId(42, M)),
        ("(5", StreamId(5, 18446744073709551614)),
        ("(5-3", StreamId(5, 2)),
        ("(5-0", StreamId(4, M)),
        ("(0", StreamId(0, M - 1)),
        ("(18446744073709551615-18446744073709551615", StreamId(M, M - 1)),
    ],
)
def test_range_end_defaults_seq_to_max_before_stepping_back_from_an_exclusive_bound(
    text: str, expected: StreamId
) -> None:
    assert parse_range_end(text) == expected


def test_exclusive_start_at_the_maximum_is_an_invalid_start() -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse_range_start("(18446744073709551615-18446744073709551615")
    assert str(excinfo.value) == "ERR invalid start ID for the interval"
    assert str(excinfo.value) == INVALID_START_ID


def test_exclusive_end_at_zero_is_an_invalid_end() -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse_range_end("(0-0")
    assert str(excinfo.value) == "ERR invalid end ID for the interval"
    assert str(excinfo.value) == INVALID_END_ID


@pytest.mark.parametrize("parse", [parse_range_start, parse_range_end])
@pytest.mark.parametrize("text", ["(-", "(+", "(", "((42", "(-0", "(42-", "(5-x", "- ", "+ ", "5-", "abc", "(-\x00"])
def test_range_bounds_reject_malformed_ids_with_the_generic_text(parse: Callable[[str], StreamId], text: str) -> None:
    with pytest.raises(ReplyError) as excinfo:
        parse(text)
    assert str(excinfo.value) == INVALID_STREAM_ID


def _xrange(ids: list[StreamId], start: str, end: str) -> list[str]:
    """What ``XRANGE key start end`` returns for a stream holding ``ids``."""
    lower, upper = parse_range_start(start), parse_range_end(end)
    return [str(i) for i in sorted(ids) if lower <= i <= upper]


VIPSTREAM = [
    StreamId(0, 1),
    StreamId(0, M),
    StreamId(1, 0),
    StreamId(42, 0),
    StreamId(42, 42),
    StreamId(M, M - 1),
    MAX_ID,
]
ALL = [str(i) for i in VIPSTREAM]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("(0-0", "+", ALL),
        ("-", "(18446744073709551615-18446744073709551615", ALL[:6]),
        ("(0-1", "+", ALL[1:]),
        ("-", "(0-1", []),
        ("(0", "+", ALL),
        ("-", "(0", ["0-1"]),
        ("-", "(1", ["0-1", "0-18446744073709551615", "1-0"]),
        ("(42", "42", ["42-42"]),
        ("42", "(42", ["42-0", "42-42"]),
        ("( 42", "+", ALL[4:]),
        ("(18446744073709551615", "+", ALL[5:]),
        ("(18446744073709551615", "(18446744073709551615", ["18446744073709551615-18446744073709551614"]),
        ("+", "-", []),
        (" 42", "+42", ["42-0", "42-42"]),
        ("-\x00x", "+\x00", ALL),
    ],
)
def test_exclusive_ranges_select_what_redis_xrange_returns(start: str, end: str, expected: list[str]) -> None:
    assert _xrange(VIPSTREAM, start, end) == expected


# --- Delta encoding -----------------------------------------------------------------------------------------------


def test_stored_values_are_pinned() -> None:
    assert STORED_OFFSET == 2**63
    assert ZERO_ID.stored() == (LLONG_MIN, LLONG_MIN)
    assert MAX_ID.stored() == (LLONG_MAX, LLONG_MAX)
    assert StreamId(2**63, 1).stored() == (0, LLONG_MIN + 1)
    assert StreamId(1526919030474, 55).stored() == (-9223370509935745334, -9223372036854775753)
    assert StreamId.from_stored(0, LLONG_MIN + 1) == StreamId(2**63, 1)


@pytest.mark.parametrize("value", [-1, UINT64_MAX + 1])
def test_to_stored_rejects_values_outside_uint64(value: int) -> None:
    with pytest.raises(ValueError, match="must be in"):
        to_stored(value)


@pytest.mark.parametrize("stored", [LLONG_MIN - 1, LLONG_MAX + 1])
def test_from_stored_rejects_values_outside_int64(stored: int) -> None:
    with pytest.raises(ValueError, match="must be in"):
        from_stored(stored)


@given(uint64)
def test_stored_part_round_trips_and_fits_a_long(value: int) -> None:
    stored = to_stored(value)
    assert LLONG_MIN <= stored <= LLONG_MAX
    assert from_stored(stored) == value


@given(stream_ids, stream_ids)
def test_stored_pairs_round_trip_and_keep_the_id_order(left: StreamId, right: StreamId) -> None:
    assert StreamId.from_stored(*left.stored()) == left
    assert (left < right) == (left.stored() < right.stored())
    assert (left == right) == (left.stored() == right.stored())

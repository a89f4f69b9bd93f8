"""Pinned values for Redis' string2ll / string2ull re-implementations (checked against redis-server 7.0.15)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamclaim_spark.core.integers import LLONG_MAX, LLONG_MIN, UINT64_MAX, parse_ll, parse_ull


def test_constants_are_the_c_limits() -> None:
    assert LLONG_MIN == -9223372036854775808
    assert LLONG_MAX == 9223372036854775807
    assert UINT64_MAX == 18446744073709551615


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("7", 7),
        ("-7", -7),
        ("100", 100),
        ("9223372036854775807", LLONG_MAX),
        ("-9223372036854775808", LLONG_MIN),
    ],
)
def test_parse_ll_accepts_canonical_decimals(text: str, expected: int) -> None:
    assert parse_ll(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-",
        "+5",
        "007",
        "00",
        "-0",
        "-07",
        " 5",
        "5 ",
        "5\x00",
        "1e3",
        "0x10",
        "5.0",
        "٣",  # an Arabic-Indic digit: str.isdigit() says yes, Redis says no
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "1" * 5000,
    ],
)
def test_parse_ll_rejects_everything_else(text: str) -> None:
    assert parse_ll(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("5", 5),
        ("05", 5),
        ("+5", 5),
        (" 5", 5),
        ("\t\n\v\f\r 5", 5),
        ("  +7", 7),
        ("-0", 0),
        ("-05", UINT64_MAX - 4),
        ("-01", UINT64_MAX),
        ("-00", 0),
        ("-9223372036854775809", 9223372036854775807),
        ("-18446744073709551615", 1),
        ("9223372036854775808", 9223372036854775808),
        ("18446744073709551615", UINT64_MAX),
        ("0" * 5000 + "1", 1),
        ("5\x00junk", 5),
    ],
)
def test_parse_ull_accepts_what_strtoull_accepts(text: str, expected: int) -> None:
    assert parse_ull(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-",
        "+",
        " ",
        "5 ",
        "+ 5",
        "+-1",
        "-+1",
        "--1",
        "0x10",
        "abc",
        "\xa05",  # a no-break space is not C isspace()
        "\x005",
        "-5",
        "-1",
        "-9223372036854775808",
        "18446744073709551616",
        "-18446744073709551616",
        "9" * 5000,
    ],
)
def test_parse_ull_rejects_negatives_from_string2ll_leftovers_and_overflow(text: str) -> None:
    assert parse_ull(text) is None


@given(st.integers(min_value=LLONG_MIN, max_value=LLONG_MAX))
def test_parse_ll_reads_back_any_long_it_prints(value: int) -> None:
    assert parse_ll(str(value)) == value


@given(st.integers(min_value=0, max_value=UINT64_MAX))
def test_parse_ull_reads_back_any_unsigned_it_prints(value: int) -> None:
    assert parse_ull(str(value)) == value

"""Where an ordered read with a limit may stop, from the files' row counts and ID ranges (file_stats.narrowed)."""

from __future__ import annotations

from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId
from streamclaim_spark.core.model import Scan
from streamclaim_spark.state.file_stats import FileRange, narrowed


def _file(rows: int, low: int, high: int) -> FileRange:
    return FileRange(rows, StreamId(1, low), StreamId(1, high))


# Three ID-ordered files of 100 rows, and one a MERGE wrote over the whole range.
ORDERED = [_file(100, 0, 99), _file(100, 100, 199), _file(100, 200, 299)]
WIDE = _file(100, 5, 295)


def test_an_ascending_read_stops_where_the_first_files_hold_the_limit() -> None:
    assert narrowed(Scan(ZERO_ID, MAX_ID, 10), ORDERED) == Scan(ZERO_ID, StreamId(1, 99), 10)
    assert narrowed(Scan(ZERO_ID, MAX_ID, 150), ORDERED) == Scan(ZERO_ID, StreamId(1, 199), 150)


def test_a_descending_read_stops_where_the_last_files_hold_the_limit() -> None:
    scan = Scan(ZERO_ID, MAX_ID, 10, reverse=True)
    assert narrowed(scan, ORDERED) == Scan(StreamId(1, 200), MAX_ID, 10, reverse=True)


def test_a_file_spanning_the_range_is_read_but_does_not_count_toward_the_limit() -> None:
    assert narrowed(Scan(ZERO_ID, MAX_ID, 150), [WIDE, *ORDERED]) == Scan(ZERO_ID, StreamId(1, 199), 150)


def test_a_file_reaching_below_the_range_start_does_not_count() -> None:
    # From 50 on, the first file holds at most 50 rows of the range: only the second file counts.
    assert narrowed(Scan(StreamId(1, 50), MAX_ID, 10), ORDERED) == Scan(StreamId(1, 50), StreamId(1, 199), 10)


def test_no_bound_without_a_limit_or_when_every_file_is_needed() -> None:
    assert narrowed(Scan(ZERO_ID, MAX_ID), ORDERED) is None
    assert narrowed(Scan(ZERO_ID, MAX_ID, 301), ORDERED) is None
    assert narrowed(Scan(ZERO_ID, StreamId(1, 99), 10), ORDERED) is None  # the bound would be the scan's own
    assert narrowed(Scan(ZERO_ID, MAX_ID, 10), []) is None

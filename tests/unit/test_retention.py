"""History retention as Delta spells it, its floor, and the mark a streaming batch leaves in its commit."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.reader_marks import ReaderMark, operation_mark, reader_mark
from streamclaim_spark.core.retention import (
    DELTA_FILE_RETENTION_MS,
    check_retention,
    delta_interval,
    describe_ms,
    file_retention_ms,
    interval_ms,
)
from streamclaim_spark.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 7 days", 7 * 86_400_000),
        ("interval 1 week", 7 * 86_400_000),
        ("INTERVAL 2 hours 30 minutes", 9_000_000),
        ("interval 60000 milliseconds", 60_000),
        ("interval 90 seconds", 90_000),
    ],
)
def test_delta_intervals_read_as_milliseconds(text: str, ms: int) -> None:
    assert interval_ms(text) == ms


def test_a_retention_written_as_delta_interval_reads_back_the_same() -> None:
    assert delta_interval(123_456) == "interval 123456 milliseconds"
    assert interval_ms(delta_interval(123_456)) == 123_456


def test_text_that_is_not_an_interval_is_refused_with_an_example() -> None:
    with pytest.raises(
        InvalidArgumentError, match=r"^'7 dayz' is not an interval Delta writes, e.g. 'interval 7 days'$"
    ):
        interval_ms("7 dayz")


def test_a_table_without_the_property_keeps_deltas_seven_days() -> None:
    assert file_retention_ms({}) == DELTA_FILE_RETENTION_MS
    assert file_retention_ms({"delta.deletedFileRetentionDuration": "interval 1 hours"}) == 3_600_000


def test_a_retention_under_a_minute_is_refused_naming_the_setting() -> None:
    check_retention(60_000, "--retain")
    with pytest.raises(InvalidArgumentError) as refused:
        check_retention(59_999, "--retain / store.history_retention")
    assert str(refused.value) == (
        "--retain / store.history_retention = 59999 ms is shorter than 60 s, the least history a store that is "
        "being written can keep: a writer still on an older version would find the files it reads gone; give "
        '--retain / store.history_retention of "1m" or more'
    )


def test_durations_are_described_in_their_largest_whole_unit() -> None:
    assert [describe_ms(ms) for ms in (7 * 86_400_000, 7_200_000, 60_000, 90_000, 1_500, 0)] == [
        "7d",
        "2h",
        "1m",
        "90s",
        "1500ms",
        "0ms",
    ]


def test_a_batch_commit_names_its_query_and_other_commits_name_none() -> None:
    mark = ReaderMark("billing team", 'q "1"')
    assert mark.operation() == 'STREAM BATCH {"group": "billing team", "consumer": "q \\"1\\""}'
    assert reader_mark(mark.operation() + " 9f2c") == mark
    assert operation_mark(mark.operation()) == mark
    assert reader_mark("STREAM BATCH 9f2c") is None  # a batch committed before the mark
    assert reader_mark("XADD 9f2c") is None
    assert reader_mark(None) is None

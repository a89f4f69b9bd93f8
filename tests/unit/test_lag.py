"""Entries-read and lag as Redis 7.0 computes them (the parity suite checks them against the server)."""

from __future__ import annotations

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.lag import entries_read_after_delivery, estimate_entries_read, lag, range_has_tombstones
from streamclaim_spark.core.model import GroupMeta, StreamMeta


def stream(**kwargs: object) -> StreamMeta:
    defaults: dict[str, object] = {"key": "s"}
    return StreamMeta(**{**defaults, **kwargs})  # type: ignore[arg-type]


def test_a_never_used_stream_has_lag_zero() -> None:
    assert lag(stream(), GroupMeta("s", "g")) == 0


def test_lag_counts_undelivered_entries_when_entries_read_is_known() -> None:
    s = stream(last_id=StreamId(5, 0), entries_added=5, length=5, first_id=StreamId(1, 0))
    assert lag(s, GroupMeta("s", "g", StreamId(2, 0), entries_read=2)) == 3


def test_a_tombstone_ahead_of_the_group_makes_lag_unknown() -> None:
    s = stream(
        last_id=StreamId(5, 0), entries_added=5, length=4, first_id=StreamId(1, 0), max_deleted_id=StreamId(3, 0)
    )
    assert range_has_tombstones(s, StreamId(2, 0))
    assert lag(s, GroupMeta("s", "g", StreamId(2, 0), entries_read=2)) is None


def test_a_tombstone_before_the_first_entry_does_not_count() -> None:
    s = stream(
        last_id=StreamId(5, 0), entries_added=5, length=3, first_id=StreamId(3, 0), max_deleted_id=StreamId(2, 0)
    )
    assert not range_has_tombstones(s, StreamId(0, 0))


def test_estimates_are_exact_at_the_first_and_last_entry_and_unknown_in_between() -> None:
    s = stream(last_id=StreamId(9, 0), entries_added=10, length=6, first_id=StreamId(4, 0))
    assert estimate_entries_read(s, StreamId(9, 0)) == 10
    assert estimate_entries_read(s, StreamId(4, 0)) == 5
    assert estimate_entries_read(s, StreamId(1, 0)) == 4
    assert estimate_entries_read(s, StreamId(6, 0)) == -1
    assert estimate_entries_read(s, StreamId(10, 0)) == -1


def test_delivery_increments_a_known_counter_and_estimates_an_unknown_one() -> None:
    s = stream(last_id=StreamId(3, 0), entries_added=3, length=3, first_id=StreamId(1, 0))
    known = GroupMeta("s", "g", StreamId(1, 0), entries_read=1)
    unknown = GroupMeta("s", "g", StreamId(0, 0))
    assert entries_read_after_delivery(s, known, StreamId(2, 0)) == 2
    assert entries_read_after_delivery(s, unknown, StreamId(3, 0)) == 3

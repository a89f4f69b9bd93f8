"""Backoff schedules (core/backoff.py): how they are written, which step a delivery count takes, what is refused."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.backoff import Backoff, parse_backoff
from streamclaim_spark.errors import InvalidConfigValueError

MIN = 60_000
FIX = (
    'write the steps by delivery count, e.g. "1m,5m,30m,2h" (the last repeats), or a doubling range such as "10s..10m"'
)


def test_a_list_gives_each_delivery_count_its_step_and_the_last_step_repeats() -> None:
    backoff = parse_backoff("1m, 5m,30m,2h")

    assert backoff == Backoff((MIN, 5 * MIN, 30 * MIN, 120 * MIN), "1m, 5m,30m,2h")
    # A count of 0 (claimed with RETRYCOUNT 0) takes the first step, as a first delivery does.
    assert [backoff.wait_ms(count) for count in range(7)] == [MIN, MIN, 5 * MIN, 30 * MIN] + [120 * MIN] * 3


def test_a_range_doubles_from_its_start_and_ends_at_its_end() -> None:
    assert parse_backoff("10s..10m").steps_ms == (10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000)
    assert parse_backoff("1m..1m").steps_ms == (MIN,)


def test_a_toml_list_of_durations_is_a_schedule_too() -> None:
    assert parse_backoff(["30s", 60_000]) == Backoff((30_000, MIN), "30s,60000")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", f"is not a backoff schedule; {FIX}"),
        (5, f"is not a backoff schedule; {FIX}"),
        (
            "1m,,2m",
            "has a step '' that is not a duration; write a whole number with a unit, e.g. \"250ms\", "
            '"90s", "5m", "2h", "1d", or an integer of milliseconds',
        ),
        ("5m,1m", f"has a step shorter than the one before it (60000 ms after 300000 ms); {FIX}"),
        ("0s..1m", f"a doubling range must start above 0 and end at or after its start (got 0 ms..60000 ms); {FIX}"),
        (
            "10m..1m",
            f"a doubling range must start above 0 and end at or after its start (got 600000 ms..60000 ms); {FIX}",
        ),
        (",".join(["1s"] * 65), f"must have 1 to 64 steps; {FIX}"),
    ],
)
def test_a_schedule_that_cannot_be_meant_is_refused_with_the_fix(value: object, message: str) -> None:
    with pytest.raises(InvalidConfigValueError) as error:
        parse_backoff(value)

    assert str(error.value) == message

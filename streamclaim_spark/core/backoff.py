"""Backoff: how long an entry that keeps failing waits before the recovery job claims it again.

A schedule maps an entry's delivery count to the idle time it must reach before it counts as stale.
``"1m,5m,30m,2h"`` waits a minute after the first delivery, five after the second, thirty after the third
and two hours after every later one (the last step repeats), as NATS' ``BackOff`` list does;
``"10s..10m"`` starts at ten seconds and doubles with each delivery up to ten minutes, as Pub/Sub's
exponential retry policy does. The run's ``min_idle`` stays the floor: an entry is stale once it has been
idle for the larger of ``min_idle`` and its step (docs/RECOVERY.md, "Backoff"). Nothing here touches Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamclaim_spark.core.durations import DURATION_FIX, parse_duration_ms
from streamclaim_spark.errors import InvalidConfigValueError

# More steps than any schedule needs (a doubling from 1 ms passes a day in 27); a longer list is a mistake.
MAX_STEPS = 64
_FIX = (
    'write the steps by delivery count, e.g. "1m,5m,30m,2h" (the last repeats), or a doubling range such as "10s..10m"'
)


@dataclass(frozen=True)
class Backoff:
    """A backoff schedule: ``steps_ms[n - 1]`` is the idle time an entry delivered ``n`` times must reach.

    Counts past the last step take the last step; a count of 0 (an entry claimed with ``RETRYCOUNT 0``)
    takes the first. ``text`` is the schedule as the user wrote it (reports, ``recovery_runs``).
    """

    steps_ms: tuple[int, ...]
    text: str

    def __post_init__(self) -> None:
        if not self.steps_ms or len(self.steps_ms) > MAX_STEPS:
            raise InvalidConfigValueError(f"must have 1 to {MAX_STEPS} steps; {_FIX}")
        if any(step < 0 for step in self.steps_ms):
            raise InvalidConfigValueError(f"steps must not be negative; {_FIX}")
        for earlier, later in zip(self.steps_ms, self.steps_ms[1:], strict=False):
            if later < earlier:
                raise InvalidConfigValueError(
                    f"has a step shorter than the one before it ({later} ms after {earlier} ms); {_FIX}"
                )

    def wait_ms(self, delivery_count: int) -> int:
        """The idle time an entry delivered ``delivery_count`` times must reach before it is stale."""
        return self.steps_ms[min(max(delivery_count, 1), len(self.steps_ms)) - 1]

    @property
    def shortest_ms(self) -> int:
        return self.steps_ms[0]


def parse_backoff(value: Any) -> Backoff:
    """A schedule from ``"1m,5m,30m,2h"``, a doubling range ``"10s..10m"``, or a TOML list of durations."""
    if isinstance(value, list) and value:
        return Backoff(tuple(_step(item) for item in value), ",".join(str(item) for item in value))
    if not isinstance(value, str) or not value.strip():
        raise InvalidConfigValueError(f"is not a backoff schedule; {_FIX}")
    text = value.strip()
    if ".." in text:
        first, _, last = text.partition("..")
        return Backoff(_doubling(_step(first), _step(last)), text)
    return Backoff(tuple(_step(part) for part in text.split(",")), text)


def _step(text: Any) -> int:
    try:
        return parse_duration_ms(text.strip() if isinstance(text, str) else text)
    except InvalidConfigValueError:
        raise InvalidConfigValueError(f"has a step {text!r} that is not a duration; {DURATION_FIX}") from None


def _doubling(first_ms: int, last_ms: int) -> tuple[int, ...]:
    """``first_ms``, twice that, four times, ... up to ``last_ms``, which ends the schedule."""
    if first_ms <= 0 or last_ms < first_ms:
        raise InvalidConfigValueError(
            f"a doubling range must start above 0 and end at or after its start (got {first_ms} ms..{last_ms} ms); "
            f"{_FIX}"
        )
    steps = [first_ms]
    while steps[-1] < last_ms:
        steps.append(min(steps[-1] * 2, last_ms))
    return tuple(steps)

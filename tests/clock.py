"""A store clock the tests move by hand, so staleness never depends on sleeping."""

from __future__ import annotations


class ManualClock:
    """Returns ``now`` (Unix ms) until the test sets it; shared safely by every thread using a store."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

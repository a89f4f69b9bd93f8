"""Re-runs commands that lose a commit race, with jittered exponential backoff (docs/DESIGN.md).

A command that loses either way ``transaction.commit_plan`` can lose (Delta's own conflict check, or the
guard's stale-snapshot abort: ``conflicts.is_lost_race``) is re-run from a fresh snapshot, up to the
policy's number of attempts.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from streamclaim_spark.errors import ConflictRetriesExhaustedError, InvalidArgumentError
from streamclaim_spark.state.conflicts import is_lost_race

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a command re-runs after losing a commit race.

    Args:
        max_attempts: Attempts in all, first one included (default 64).
        base_delay_s: Backoff before the second attempt; doubles per attempt (default 0.05 s).
        max_delay_s: Cap on one backoff (default 2 s). Each delay is jittered uniformly in [0.5, 1.5)x.
    """

    max_attempts: int = 64
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts={self.max_attempts} must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise InvalidArgumentError("base_delay_s and max_delay_s must not be negative")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        bounded = min(self.max_delay_s, self.base_delay_s * float(2 ** (attempt - 1)))
        return bounded * random.uniform(0.5, 1.5)


T = TypeVar("T")


def reraising_lost_race(attempt: Callable[[int], T]) -> Callable[[int], T]:
    """``attempt`` with an inner one-attempt command's exhausted retries re-raised as the race itself, so
    an outer ``run_with_retries`` re-runs the whole attempt (a claim whose commit is one command)."""

    def unwrapped(number: int) -> T:
        try:
            return attempt(number)
        except ConflictRetriesExhaustedError as error:
            if error.last_race is not None:
                raise error.last_race from None
            raise

    return unwrapped


def run_with_retries(attempt_once: Callable[[int], T], policy: RetryPolicy, what: str) -> tuple[T, int]:
    """Calls ``attempt_once(attempt)`` until it does not lose a race; returns its result and attempts."""
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return attempt_once(attempt), attempt
        except Exception as error:
            if not is_lost_race(error):
                raise
            if attempt == policy.max_attempts:
                raise ConflictRetriesExhaustedError(
                    f"{what}: lost the commit race {attempt} times; raise RetryPolicy.max_attempts "
                    "or reduce the number of concurrent writers on the same stream or group"
                ) from error
            delay = policy.delay(attempt)
            log.info(
                "%s lost a commit race (%s); attempt %d again in %.3f s", what, type(error).__name__, attempt + 1, delay
            )
            time.sleep(delay)
    raise AssertionError("unreachable")

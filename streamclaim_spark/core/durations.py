"""Durations as conf/ and the flags spell them: ``"250ms"``, ``"90s"``, ``"5m"``, ``"2h"``, ``"1d"``, or milliseconds.

Nothing here touches Spark.
"""

from __future__ import annotations

import re
from typing import Any

from streamclaim_spark.errors import InvalidConfigValueError

_DURATION_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
DURATION_FIX = 'write a whole number with a unit, e.g. "250ms", "90s", "5m", "2h", "1d", or an integer of milliseconds'


def parse_duration_ms(value: Any) -> int:
    """Milliseconds from an integer (ms) or a string with a unit: ``"250ms"``, ``"90s"``, ``"5m"``, ``"2h"``."""
    if type(value) is int and value >= 0:
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match:
        return int(match.group(1)) * _DURATION_UNITS_MS[match.group(2) or "ms"]
    problem = "must not be negative" if type(value) is int else "is not a duration"
    raise InvalidConfigValueError(f"{problem}; {DURATION_FIX}")

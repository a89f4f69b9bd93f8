"""How long a store keeps history: durations as Delta's table properties spell them, and the floor.

A store's history retention is how long files a commit replaced stay on disk (for time travel and for
readers still on an older version) and how long the Delta log keeps commits. It is stored on each table
as ``delta.deletedFileRetentionDuration`` and ``delta.logRetentionDuration`` (docs/DESIGN.md, "History
through time travel"), written by ``streamclaim-maintain`` when the user sets it. Nothing here touches Spark.
"""

from __future__ import annotations

import re

from streamclaim_spark.errors import InvalidArgumentError

FILE_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
RETENTION_PROPERTIES = (FILE_RETENTION_PROPERTY, LOG_RETENTION_PROPERTY)

DAY_MS = 86_400_000
# Delta's defaults when a table sets neither property: 7 days of replaced files, 30 days of log.
DELTA_FILE_RETENTION_MS = 7 * DAY_MS
DELTA_LOG_RETENTION_MS = 30 * DAY_MS
# The least a store that is being written may keep: a writer reads a version, then commits on it, and a
# file a later commit replaced must outlive that writer's transaction (a fleet recovery round of 10,000
# groups holds one for ~30 s).
MIN_RETENTION_MS = 60_000

_UNIT_MS = {
    "millisecond": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
}
_PART = re.compile(r"(-?\d+)\s*(millisecond|second|minute|hour|day|week)s?", re.IGNORECASE)


def delta_interval(retention_ms: int) -> str:
    """``retention_ms`` as the interval text Delta's retention properties take."""
    return f"interval {retention_ms} milliseconds"


def interval_ms(text: str) -> int:
    """Milliseconds of a Delta interval property (``interval 7 days``, ``interval 1 week 2 hours``)."""
    body = text.strip()
    if body.lower().startswith("interval"):
        body = body[len("interval") :]
    parts = _PART.findall(body)
    if not parts or _PART.sub("", body).strip():
        raise InvalidArgumentError(f"{text!r} is not an interval Delta writes, e.g. 'interval 7 days'")
    return sum(int(amount) * _UNIT_MS[unit.lower()] for amount, unit in parts)


def file_retention_ms(properties: dict[str, str]) -> int:
    """How long a table keeps replaced files: its property, or Delta's 7 days."""
    value = properties.get(FILE_RETENTION_PROPERTY)
    return DELTA_FILE_RETENTION_MS if value is None else interval_ms(value)


def check_retention(retention_ms: int, setting: str) -> None:
    """Refuses a retention below ``MIN_RETENTION_MS``, naming the ``setting`` it came from."""
    if retention_ms < MIN_RETENTION_MS:
        raise InvalidArgumentError(
            f"{setting} = {retention_ms} ms is shorter than {MIN_RETENTION_MS // 1000} s, the least history a "
            "store that is being written can keep: a writer still on an older version would find the files "
            f'it reads gone; give {setting} of "1m" or more'
        )


def describe_ms(duration_ms: int) -> str:
    """``duration_ms`` in the largest unit that divides it: ``7d``, ``90s``, ``1500ms``."""
    for unit, size in (("d", DAY_MS), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if duration_ms and duration_ms % size == 0:
            return f"{duration_ms // size}{unit}"
    return f"{duration_ms}ms"

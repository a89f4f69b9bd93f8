"""What Delta's statistics say of every row of one data file, exactly: the test a removal runs to drop a
file it empties without opening it.

Delta writes with each data file its row count and, per column, the smallest and largest value and
the number of nulls. Those can prove that every row of the file has one value in a column (smallest
= largest, no null), or an ID in a range; they never prove it wrongly, provided a string is shorter
than the prefix Delta keeps of it (a longer one may have been cut, and two values then look equal).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId

# Delta keeps the first 32 characters of a string in its statistics: only a shorter value is exact.
STATS_STRING_PREFIX = 32


@dataclass(frozen=True)
class FileBounds:
    """One data file's statistics: ``rows``, and per column its ``low`` and ``high`` values and ``nulls``."""

    path: str
    rows: int
    low: Mapping[str, Any]
    high: Mapping[str, Any]
    nulls: Mapping[str, int]

    @classmethod
    def from_stats(cls, path: str, stats: str | None) -> FileBounds | None:
        """The bounds in an ``AddFile``'s statistics (Delta's JSON), or None when it has none."""
        if not stats:
            return None
        parsed = json.loads(stats)
        if "numRecords" not in parsed:
            return None
        return cls(
            path,
            int(parsed["numRecords"]),
            parsed.get("minValues", {}),
            parsed.get("maxValues", {}),
            parsed.get("nullCount", {}),
        )

    def only(self, column: str, value: Any) -> bool:
        """True when every row holds ``value`` in ``column``."""
        if self.nulls.get(column) != 0:
            return False
        if isinstance(value, str) and len(value) >= STATS_STRING_PREFIX:
            return False
        return bool(self.low.get(column) == value and self.high.get(column) == value)

    def ids_between(self, low: StreamId, high: StreamId) -> bool:
        """True when every row's ID lies in [``low``, ``high``]. Each part of a row's ID is at least that
        part's smallest value and at most its largest, so (smallest ms, smallest seq) is no larger than
        any row's ID and (largest ms, largest seq) no smaller, in the order tuples compare in."""
        if self.nulls.get(C.ID_MS) != 0 or self.nulls.get(C.ID_SEQ) != 0:
            return False
        ids = self.id_range()
        return ids is not None and ids[0] >= low.stored() and ids[1] <= high.stored()

    def may_hold_one_of(self, column: str, values: Sequence[str]) -> bool:
        """False only when no row can hold one of ``values`` (sorted strings) in ``column``: each lies
        outside the column's smallest and largest value. True when the bounds are unknown or may be cut."""
        low, high = self.low.get(column), self.high.get(column)
        if not isinstance(low, str) or not isinstance(high, str):
            return self.nulls.get(column) != self.rows  # no bounds: unknown, unless every value is null
        if len(low) >= STATS_STRING_PREFIX or len(high) >= STATS_STRING_PREFIX:
            return True
        position = bisect_left(values, low)
        return position < len(values) and values[position] <= high

    def may_hold_ids(self, low: StreamId, high: StreamId) -> bool:
        """False only when no row's ID can lie in [``low``, ``high``]: the file's smallest possible ID
        (``ids_between``) is above ``high`` or its largest below ``low``, or no row has an ID."""
        if self.nulls.get(C.ID_MS) == self.rows:
            return False
        ids = self.id_range()
        return ids is None or (ids[1] >= low.stored() and ids[0] <= high.stored())

    def id_range(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """(smallest ms, smallest seq) and (largest ms, largest seq) as stored: no row's ID lies below the
        first or above the second. None when the statistics lack either."""
        smallest, largest = _stored_id(self.low), _stored_id(self.high)
        return None if smallest is None or largest is None else (smallest, largest)


def _stored_id(values: Mapping[str, Any]) -> tuple[int, int] | None:
    ms, seq = values.get(C.ID_MS), values.get(C.ID_SEQ)
    return (ms, seq) if isinstance(ms, int) and isinstance(seq, int) else None

"""IDs a bulk removal names, held on the driver as stored ID parts, and which rows of a file they name.

A bulk XACK of 1M IDs used Spark twice before its commit: an aggregate for the IDs' range (the IDs'
text parsed by Spark) and a join of the IDs with the PEL files' rows to count what each file loses.
Collected as text and parsed here by pyarrow, held as two int64 arrays (16 bytes an ID), the range
is a min and a max, and a file's rows are matched against the IDs by one vectorized membership test
(CHANGELOG.md, "Named IDs on the driver").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core.ids import STORED_OFFSET, StreamId, from_stored
from streamclaim_spark.core.integers import UINT64_MAX

# Packed keys stay below this, so that no product or sum of the packing overflows an int64 (or a bigint).
PACKED_KEYS_MAX = 2**62


def box_width(low: StreamId, high: StreamId, seq_range: tuple[int, int]) -> int | None:
    """How many sequence numbers one millisecond spans in the box of IDs from ``low`` to ``high`` with
    sequence numbers in ``seq_range``, when every ID of the box can be numbered by one 62-bit key
    (``(ms - low.ms) * width + (seq - seq_low)``); None when the box holds too many IDs."""
    width = seq_range[1] - seq_range[0] + 1
    return width if (high.ms - low.ms + 1) * width <= PACKED_KEYS_MAX else None


# An ID as Redis renders one: two unsigned decimal numbers without sign, space or leading zero.
_CANONICAL_ID = r"^(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})$"
_UINT64_MAX_TEXT = str(UINT64_MAX)


def parse_stored(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The IDs among ``texts`` (Redis' text, ``"1700000000000-5"``) as stored ID parts (two int64 arrays),
    in order; text that is not an ID as Redis renders one (``state.columns.stored_id_columns``' rule:
    leading zeros, a sign or space, a missing sequence, a part past 2**64 - 1) and nulls are left out."""
    valid = pc.fill_null(pc.match_substring_regex(texts, _CANONICAL_ID), False)
    parts = pc.split_pattern(pc.filter(texts, valid), "-", max_splits=1)
    ms, seq = pc.list_element(parts, 0), pc.list_element(parts, 1)
    fits = pc.and_(_fits(ms), _fits(seq))
    return _to_stored(pc.filter(ms, fits)), _to_stored(pc.filter(seq, fits))


def _fits(digits: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Which canonical decimal texts are at most 2**64 - 1: fewer than 20 digits, or 20 at most its text
    (texts of one length compare as their numbers)."""
    return pc.or_(pc.less(pc.utf8_length(digits), 20), pc.less_equal(digits, _UINT64_MAX_TEXT))


def _to_stored(digits: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Unsigned decimal text to stored ID parts: ``value - 2**63`` as an int64 (the top bit flipped)."""
    unsigned = np.asarray(pc.cast(digits, pa.uint64()).to_numpy(zero_copy_only=False), dtype=np.uint64)
    stored: np.ndarray = (unsigned ^ np.uint64(STORED_OFFSET)).view(np.int64)
    return stored


@dataclass(frozen=True)
class NamedIds:
    """Stored IDs (signed ``id_ms``, ``id_seq``, as the state table holds them), duplicates allowed, none
    null, at least one."""

    ms: np.ndarray
    seq: np.ndarray

    def __post_init__(self) -> None:
        if len(self.ms) == 0 or len(self.ms) != len(self.seq):
            raise ValueError("NamedIds needs one or more IDs, as many ms parts as seq parts")

    def __len__(self) -> int:
        return len(self.ms)

    @cached_property
    def low(self) -> StreamId:
        """The smallest ID."""
        ms_low = self._box[0]
        return StreamId.from_stored(ms_low, int(self.seq[self.ms == ms_low].min()))

    @cached_property
    def high(self) -> StreamId:
        """The largest ID."""
        ms_high = self._box[1]
        return StreamId.from_stored(ms_high, int(self.seq[self.ms == ms_high].max()))

    @property
    def seq_range(self) -> tuple[int, int]:
        """The smallest and largest sequence number (unsigned, as ``StreamId.seq``)."""
        return from_stored(self._box[2]), from_stored(self._box[3])

    @cached_property
    def width(self) -> int | None:
        """``box_width`` of these IDs' box, or None when it is too large to pack."""
        return box_width(self.low, self.high, self.seq_range)

    def contains(self, ms: np.ndarray, seq: np.ndarray) -> np.ndarray | None:
        """Which of the stored IDs ``(ms[i], seq[i])`` are among these (a boolean array), or None when
        these IDs' box is too large to pack into one key (the caller matches them another way)."""
        if self.width is None:
            return None
        ms_low, ms_high, seq_low, seq_high = self._box
        inside = (ms >= ms_low) & (ms <= ms_high) & (seq >= seq_low) & (seq <= seq_high)
        found = np.zeros(len(ms), dtype=bool)
        # Only IDs inside the box are packed: outside it the differences could overflow, and none is named.
        found[inside] = np.isin(self._packed(ms[inside], seq[inside]), self._keys)
        return found

    @cached_property
    def _keys(self) -> np.ndarray:
        return self._packed(self.ms, self.seq)

    def _packed(self, ms: np.ndarray, seq: np.ndarray) -> np.ndarray:
        assert self.width is not None
        packed: np.ndarray = (ms - self._box[0]) * np.int64(self.width) + (seq - self._box[2])
        return packed

    @cached_property
    def _box(self) -> tuple[int, int, int, int]:
        """The stored parts' bounds: lowest and highest ms, lowest and highest seq."""
        return int(self.ms.min()), int(self.ms.max()), int(self.seq.min()), int(self.seq.max())

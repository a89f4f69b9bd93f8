"""Stream IDs: the ``StreamId`` value, Redis' parsing modes for ID arguments, and the Delta column encoding.

Parsing follows ``streamGenericParseIDOrReply`` and ``streamParseIntervalIDOrReply`` in ``t_stream.c``,
leniencies included, so every ID argument is accepted or rejected exactly as a Redis server would.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamclaim_spark.core.integers import LLONG_MAX, LLONG_MIN, UINT64_MAX, parse_ull
from streamclaim_spark.errors import (
    INVALID_END_ID,
    INVALID_START_ID,
    INVALID_STREAM_ID,
    InvalidArgumentError,
    ReplyError,
    c_string,
)

# Spark and Delta only have signed 64-bit longs. Shifting each unsigned half down by 2**63 keeps the
# order, so Delta can sort, compare and skip files on the stored columns directly.
STORED_OFFSET = 2**63

# Redis copies the argument into a char[128] buffer, so 127 bytes is the longest ID it will look at.
_MAX_ID_BYTES = 127


@dataclass(frozen=True, order=True, slots=True)
class StreamId:
    """A stream entry ID: milliseconds and sequence number, both unsigned 64-bit, ordered by (ms, seq).

    Constructing one with a part outside [0, UINT64_MAX] raises ValueError, so every instance is an ID
    Redis could hold.

    Example:
        >>> str(StreamId(1700000000000, 3))
        '1700000000000-3'
    """

    ms: int
    seq: int

    def __post_init__(self) -> None:
        if not (0 <= self.ms <= UINT64_MAX and 0 <= self.seq <= UINT64_MAX):
            raise InvalidArgumentError(f"stream ID parts must be in [0, {UINT64_MAX}], got ms={self.ms} seq={self.seq}")

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"

    @property
    def is_zero(self) -> bool:
        """True for ``0-0``, which Redis uses as "no ID" (empty stream, no first entry, end of a scan)."""
        return self.ms == 0 and self.seq == 0

    def incr(self) -> StreamId:
        """The next ID, carrying into ms when seq is at its maximum (Redis' ``streamIncrID``).

        Raises:
            OverflowError: When this is the largest ID, which has no successor.
        """
        if self.seq < UINT64_MAX:
            return StreamId(self.ms, self.seq + 1)
        if self.ms < UINT64_MAX:
            return StreamId(self.ms + 1, 0)
        raise OverflowError(f"{self} is the largest stream ID")

    def decr(self) -> StreamId:
        """The previous ID, borrowing from ms when seq is 0 (Redis' ``streamDecrID``).

        Raises:
            OverflowError: When this is ``0-0``, which has no predecessor.
        """
        if self.seq > 0:
            return StreamId(self.ms, self.seq - 1)
        if self.ms > 0:
            return StreamId(self.ms - 1, UINT64_MAX)
        raise OverflowError(f"{self} is the smallest stream ID")

    def stored(self) -> tuple[int, int]:
        """The ``(id_ms, id_seq)`` pair as written to Delta: signed longs whose order is the ID order."""
        return to_stored(self.ms), to_stored(self.seq)

    @classmethod
    def from_stored(cls, ms: int, seq: int) -> StreamId:
        """Rebuild an ID from the signed ``(id_ms, id_seq)`` columns written by ``stored()``."""
        # The names below resolve to the module-level function, not to this classmethod.
        return cls(from_stored(ms), from_stored(seq))


ZERO_ID = StreamId(0, 0)
MAX_ID = StreamId(UINT64_MAX, UINT64_MAX)


def to_stored(value: int) -> int:
    """Map an unsigned 64-bit ID part to a signed long so that signed order equals unsigned order.

    Raises:
        ValueError: When ``value`` is outside [0, UINT64_MAX].
    """
    if not 0 <= value <= UINT64_MAX:
        raise InvalidArgumentError(f"stream ID part must be in [0, {UINT64_MAX}], got {value}")
    return value - STORED_OFFSET


def from_stored(stored: int) -> int:
    """Inverse of ``to_stored``: a stored signed long back to the unsigned ID part.

    Raises:
        ValueError: When ``stored`` is outside the signed 64-bit range.
    """
    if not LLONG_MIN <= stored <= LLONG_MAX:
        raise InvalidArgumentError(f"stored ID part must be in [{LLONG_MIN}, {LLONG_MAX}], got {stored}")
    return stored + STORED_OFFSET


def parse_id(text: str, *, strict: bool = True, missing_seq: int = 0) -> StreamId:
    """Parse an ID argument: ``<ms>-<seq>`` or ``<ms>``, plus ``-``/``+`` when not strict.

    Strict mode is what XACK, XCLAIM, XGROUP CREATE, XREADGROUP and MINID use; non-strict mode (XGROUP SETID
    and the non-exclusive range bounds) reads ``-`` as ``0-0`` and ``+`` as the maximum ID. The text is split
    at its first ``-`` and each half goes through ``parse_ull``, so ``05``, ``+5`` and `` 5`` are accepted.

    Args:
        text: The argument as the client sent it.
        strict: Reject ``-`` and ``+`` (default True).
        missing_seq: The seq used when the text has no ``-`` (default 0; range ends use UINT64_MAX).

    Returns:
        The parsed ID.

    Raises:
        ReplyError: ``ERR Invalid stream ID specified as stream command argument``.

    Example:
        >>> parse_id("1526919030474", missing_seq=UINT64_MAX)
        StreamId(ms=1526919030474, seq=18446744073709551615)
    """
    stream_id, _ = _parse_id(text, strict=strict, missing_seq=missing_seq, allow_auto_seq=False)
    return stream_id


def parse_xadd_id(text: str) -> tuple[StreamId, bool]:
    """Parse XADD's explicit ID: strict, and ``<ms>-*`` is also allowed.

    Returns:
        ``(id, True)`` for a complete ID, or ``(StreamId(ms, 0), False)`` for ``<ms>-*``, whose sequence
        number XADD still has to generate from the stream's last ID.

    Raises:
        ReplyError: ``ERR Invalid stream ID specified as stream command argument``.
    """
    return _parse_id(text, strict=True, missing_seq=0, allow_auto_seq=True)


def parse_range_start(text: str) -> StreamId:
    """Parse a range's lower bound into the first ID it includes (XRANGE, XREVRANGE, XPENDING, XAUTOCLAIM).

    ``(<id>`` makes the bound exclusive: the rest is parsed strictly, a missing seq is 0, and the result is
    the next ID, so ``(5`` starts at ``5-1``. Anything else is a non-strict ID.

    Raises:
        ReplyError: The invalid-ID error, or ``ERR invalid start ID for the interval`` when an exclusive
            bound is the maximum ID.
    """
    if _is_exclusive(text):
        try:
            return parse_id(text[1:], strict=True, missing_seq=0).incr()
        except OverflowError:
            raise ReplyError(INVALID_START_ID) from None
    return parse_id(text, strict=False, missing_seq=0)


def parse_range_end(text: str) -> StreamId:
    """Parse a range's upper bound into the last ID it includes (XRANGE, XREVRANGE, XPENDING).

    A missing seq is UINT64_MAX, applied before an exclusive ``(`` is honoured, so ``(5`` ends at
    ``5-18446744073709551614`` (only ``5-18446744073709551615`` is excluded). Anything else is a
    non-strict ID.

    Raises:
        ReplyError: The invalid-ID error, or ``ERR invalid end ID for the interval`` when an exclusive
            bound is ``0-0``.
    """
    if _is_exclusive(text):
        try:
            return parse_id(text[1:], strict=True, missing_seq=UINT64_MAX).decr()
        except OverflowError:
            raise ReplyError(INVALID_END_ID) from None
    return parse_id(text, strict=False, missing_seq=UINT64_MAX)


def _is_exclusive(text: str) -> bool:
    """A ``(`` prefix marks an exclusive bound, except for a bare ``(``, which is just an invalid ID."""
    return len(text) > 1 and text[0] == "("


def _parse_id(text: str, *, strict: bool, missing_seq: int, allow_auto_seq: bool) -> tuple[StreamId, bool]:
    """``streamGenericParseIDOrReply``: the ID and whether its seq was given (False only for ``<ms>-*``)."""
    # Redis measures the argument in bytes; a client sends a str as UTF-8.
    if len(text) > _MAX_ID_BYTES or len(text.encode("utf-8", "surrogatepass")) > _MAX_ID_BYTES:
        raise ReplyError(INVALID_STREAM_ID)
    # After the length check Redis handles the copy as a C string, so everything from a NUL on is ignored:
    # "5\x00-3" is 5-0 and "-\x00x" is "-".
    text = c_string(text)
    if text in ("-", "+"):
        if strict:
            raise ReplyError(INVALID_STREAM_ID)
        return (ZERO_ID if text == "-" else MAX_ID), True
    ms_text, dash, seq_text = text.partition("-")
    ms = parse_ull(ms_text)
    if ms is None:
        raise ReplyError(INVALID_STREAM_ID)
    if not dash:
        return StreamId(ms, missing_seq), True
    if allow_auto_seq and seq_text == "*":
        return StreamId(ms, 0), False
    seq = parse_ull(seq_text)
    if seq is None:
        raise ReplyError(INVALID_STREAM_ID)
    return StreamId(ms, seq), True

"""Redis' decimal integer parsers, reproduced bit for bit.

``parse_ll`` is ``string2ll`` (every integer argument: COUNT, BLOCK, IDLE ...) and ``parse_ull`` is
``string2ull`` (each half of a stream ID), including its lenient ``strtoull`` fallback.
"""

from __future__ import annotations

from streamclaim_spark.errors import c_string

LLONG_MIN = -(2**63)
LLONG_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1

# string2ll rejects inputs of LONG_STR_SIZE (21) bytes or more before looking at them; no valid
# signed 64-bit decimal is that long, and the cap also keeps int() far from Python's digit limit.
_LONG_STR_SIZE = 21
# C isspace() in the "C" locale, which is what strtoull skips before the number.
_C_SPACE = frozenset(" \t\n\v\f\r")


def parse_ll(text: str) -> int | None:
    """Parse a strict signed 64-bit decimal, as Redis' ``string2ll`` does.

    Accepts an optional leading ``-`` and ASCII digits without leading zeros (``0`` alone is fine); rejects
    ``+``, whitespace, ``-0``, the empty string and anything outside [LLONG_MIN, LLONG_MAX]. The whole
    string counts: Redis passes the argument's full length, so an embedded NUL makes it invalid.

    Args:
        text: The argument as the client sent it.

    Returns:
        The value, or None when Redis would reply with its integer error.
    """
    if not text or len(text) >= _LONG_STR_SIZE:
        return None
    if text == "0":
        return 0
    negative = text[0] == "-"
    digits = text[1:] if negative else text
    if not _is_ascii_digits(digits) or digits[0] == "0":
        return None
    value = -int(digits) if negative else int(digits)
    return value if LLONG_MIN <= value <= LLONG_MAX else None


def parse_ull(text: str) -> int | None:
    """Parse an unsigned 64-bit decimal, as Redis' ``string2ull`` does.

    The strict ``string2ll`` is tried first and a negative result there is a failure (``-5`` is invalid).
    Anything ``string2ll`` rejects goes to C ``strtoull(s, &end, 10)``, which skips leading whitespace,
    takes one ``+`` or ``-`` (a ``-`` negates modulo 2**64), allows leading zeros, and fails on overflow;
    the whole string must be consumed. So ``05``, ``+5`` and `` 5`` are 5, ``-05`` is 2**64 - 5 and
    ``5 `` is invalid. The text is a C string here, so it ends at the first NUL.

    Args:
        text: One number of a stream ID.

    Returns:
        The value in [0, UINT64_MAX], or None when Redis would reject the stream ID.
    """
    text = c_string(text)
    strict = parse_ll(text)
    if strict is not None:
        return strict if strict >= 0 else None
    return _strtoull_whole(text)


def _strtoull_whole(text: str) -> int | None:
    """C ``strtoull(text, &end, 10)`` that must consume all of ``text``; None on ERANGE or leftovers."""
    start = 0
    while start < len(text) and text[start] in _C_SPACE:
        start += 1
    negative = False
    if start < len(text) and text[start] in "+-":
        negative = text[start] == "-"
        start += 1
    digits = text[start:]
    if not _is_ascii_digits(digits):
        # No digits at all (strtoull leaves end at the start) or trailing non-digits: not consumed.
        return None
    # Leading zeros are legal and unbounded; drop them before int() so huge inputs stay cheap.
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(UINT64_MAX)):
        return None
    magnitude = int(significant)
    if magnitude > UINT64_MAX:
        return None
    # strtoull negates in unsigned arithmetic, so "-1" would be UINT64_MAX (string2ll catches that one first).
    return (-magnitude) % 2**64 if negative else magnitude


def _is_ascii_digits(text: str) -> bool:
    """True when ``text`` is non-empty and only ``0``-``9`` (str.isdigit alone also accepts e.g. Arabic digits)."""
    return text.isascii() and text.isdigit()

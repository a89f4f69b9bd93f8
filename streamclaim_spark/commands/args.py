"""Small helpers shared by the argument parsers: keyword matching and Redis integer errors."""

from __future__ import annotations

from collections.abc import Sequence

from streamclaim_spark.errors import NOT_AN_INTEGER, ReplyError, unknown_subcommand, wrong_arity
from streamclaim_spark.integers import parse_ll


def c_str(token: str) -> str:
    """The token as C string functions see it: Redis compares keywords only up to the first NUL."""
    return token.split("\x00", 1)[0]


def is_word(token: str, word: str) -> bool:
    """Redis matches option names case-insensitively (strcasecmp, so up to the first NUL)."""
    return c_str(token).lower() == word.lower()


def is_token(token: str, special: str) -> bool:
    """Exact match of a special token such as ``*``, ``$`` or ``>`` (C comparison, up to the first NUL)."""
    return c_str(token) == special


def int_arg(token: str, error: str = NOT_AN_INTEGER) -> int:
    """A strict signed 64-bit integer argument, or the given Redis error."""
    value = parse_ll(token)
    if value is None:
        raise ReplyError(error)
    return value


def check_arity(argv: Sequence[str], arity: int, fullname: str) -> None:
    """Redis' command-table arity check: positive = exact, negative = at least."""
    count = len(argv)
    if (arity > 0 and count != arity) or (arity < 0 and count < -arity):
        raise wrong_arity(fullname)


def check_subcommand(argv: Sequence[str], arities: dict[str, int]) -> str:
    """Redis' container dispatch (XGROUP, XINFO, CLIENT, COMMAND ...): the unknown-subcommand error, then
    the subcommand's own arity; returns the subcommand lower-cased."""
    sub = argv[1].lower()
    if sub not in arities:
        raise unknown_subcommand(argv[1], argv[0].upper())
    check_arity(argv, arities[sub], f"{argv[0].lower()}|{sub}")
    return sub

"""Small helpers shared by the argument parsers: keyword matching, Redis integer errors, and the
line between text arguments (names, IDs, options) and payload arguments (field names and values)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamclaim_spark.core.integers import parse_ll
from streamclaim_spark.errors import (
    NOT_AN_INTEGER,
    ArgumentTypeError,
    ReplyError,
    c_string,
    lone_surrogates_argument,
    not_utf8_argument,
    unknown_subcommand,
    wrong_arity,
)


def is_text(token: str) -> bool:
    """True when ``token`` is well-formed text: no lone surrogate (``decode_argv`` turns each byte
    of a non-UTF-8 argument into one)."""
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def require_text(argv: Sequence[str], end: int | None = None) -> None:
    """Refuses a non-UTF-8 argument among ``argv[:end]``: key, group and consumer names live in string
    columns and partition digests, so they stay UTF-8 text; only field names and values may be bytes."""
    for position, token in enumerate(argv[:end]):
        if not is_text(token):
            raise not_utf8_argument(position)


def payload_bytes(token: str) -> bytes:
    """A field name or value argument as the exact bytes the client sent (see ``decode_argv``)."""
    return token.encode("utf-8", "surrogateescape")


def is_word(token: str, word: str) -> bool:
    """Redis matches option names case-insensitively (strcasecmp, so up to the first NUL)."""
    return c_string(token).lower() == word.lower()


def is_token(token: str, special: str) -> bool:
    """Exact match of a special token such as ``*``, ``$`` or ``>`` (C comparison, up to the first NUL)."""
    return c_string(token) == special


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


def check_subcommand(argv: Sequence[str], arities: Mapping[str, int]) -> str:
    """Redis' container dispatch (XGROUP, XINFO, CLIENT, COMMAND ...): the unknown-subcommand error, then
    the subcommand's own arity; returns the subcommand lower-cased."""
    sub = argv[1].lower()
    if sub not in arities:
        raise unknown_subcommand(argv[1], argv[0].upper())
    check_arity(argv, arities[sub], f"{argv[0].lower()}|{sub}")
    return sub


def decode_argv(argv: Sequence[str | bytes]) -> list[str]:
    """Turns a client's argv into text tokens, keeping every byte of every argument.

    UTF-8 bytes become ``str``; other bytes are decoded with ``surrogateescape``, so each byte that is
    not UTF-8 becomes one lone surrogate that ``payload_bytes`` turns back into that byte. Names, IDs
    and options must be text (``commands.args.require_text`` refuses the rest); field names and values
    may be any bytes. A ``str`` argument with lone surrogates of its own is refused here: it has no
    bytes to stand for.
    """
    decoded = []
    for position, value in enumerate(argv):
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8", "surrogateescape")
        elif not isinstance(value, str):
            raise ArgumentTypeError(f"argv[{position}]: expected str or bytes, got {type(value).__name__}")
        elif not is_text(value):
            raise lone_surrogates_argument(position)
        decoded.append(value)
    return decoded

"""The package's one exception family, and the exact error texts Redis sends.

Every exception the package raises on purpose is a ``StreamclaimError``; the ones a Redis server would
send are ``ReplyError``, whose ``str()`` is the full error line, code included (``ERR syntax error``,
``NOGROUP No such key 's' or consumer group 'g'``), as redis-py's ``ResponseError`` sits below its
``RedisError``. Others keep a second, built-in base (``ValueError`` for bad input, ``RuntimeError`` for a
failed run) so callers that catch those keep working. The constants and builders below are the only place
Redis' error texts are spelled.
"""

from __future__ import annotations


class StreamclaimError(Exception):
    """The root of every exception streamclaim_spark raises on purpose."""


class ReplyError(StreamclaimError):
    """Raised when a command fails the way a Redis server would fail it.

    ``str(error)`` is the error line without the leading ``-``; ``error.code`` is its first word.
    """

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    @property
    def code(self) -> str:
        """The error code: the first word of the line (``ERR``, ``NOGROUP``, ``BUSYGROUP`` ...)."""
        return self.line.split(" ", 1)[0]

    def __str__(self) -> str:
        return self.line

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplyError) and other.line == self.line

    def __hash__(self) -> int:
        return hash(self.line)


SYNTAX = "ERR syntax error"
NOT_AN_INTEGER = "ERR value is not an integer or out of range"
INVALID_STREAM_ID = "ERR Invalid stream ID specified as stream command argument"
INVALID_START_ID = "ERR invalid start ID for the interval"
INVALID_END_ID = "ERR invalid end ID for the interval"
NO_SUCH_KEY = "ERR no such key"
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
# What Redis unblocks a blocked XREADGROUP with when its stream is deleted, or its group destroyed.
UNBLOCKED_STREAM_DELETED = "UNBLOCKED the stream key no longer exists"
NOGROUP_BLOCKED_GROUP_DESTROYED = "NOGROUP the consumer group this client was blocked on no longer exists"
EXECABORT = "EXECABORT Transaction discarded because of previous errors."
MULTI_NESTED = "ERR MULTI calls can not be nested"
EXEC_WITHOUT_MULTI = "ERR EXEC without MULTI"
DISCARD_WITHOUT_MULTI = "ERR DISCARD without MULTI"
WATCH_INSIDE_MULTI = "ERR WATCH inside MULTI is not allowed"
XGROUP_KEY_REQUIRED = (
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the "
    "MKSTREAM option to create an empty stream automatically."
)

# XADD, XTRIM and XSETID.
ERR_MAXLEN_AND_MINID = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
ERR_MAXLEN_NEGATIVE = "ERR The MAXLEN argument must be >= 0."
ERR_LIMIT_NEGATIVE = "ERR The LIMIT argument must be >= 0."
ERR_LIMIT_WITHOUT_STRATEGY = "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
ERR_LIMIT_WITHOUT_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
ERR_XTRIM_NO_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
ERR_XADD_ZERO_ID = "ERR The ID specified in XADD must be greater than 0-0"
ERR_XADD_ID_TOO_SMALL = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
ERR_ELEMENTS_TOO_LARGE = "ERR Elements are too large to be stored"
ERR_XADD_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ERR_XSETID_SMALLER_THAN_PROVIDED_MAX_DELETED = (
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
)
ERR_XSETID_SMALLER_THAN_TOP = "ERR The ID specified in XSETID is smaller than the target stream top item"
ERR_XSETID_ENTRIES_ADDED_SMALL = "ERR The entries_added specified in XSETID is smaller than the target stream length"
ERR_ENTRIES_ADDED_NEGATIVE = "ERR entries_added must be positive"


# How much of a client's argument Redis quotes in an error line (``%.128s``).
_SHOWN_MAX = 128


def wrong_arity(fullname: str) -> ReplyError:
    """``ERR wrong number of arguments for 'xadd' command`` (fullname is lowercase, ``xgroup|create``)."""
    return ReplyError(f"ERR wrong number of arguments for '{fullname}' command")


def unknown_command(name: str, args: list[str]) -> ReplyError:
    """The error Redis gives for a command name it does not know."""
    # Redis quotes each argument and follows it with a space (so the line ends in a space), and stops
    # adding arguments once 128 characters are shown, cutting the last one to fit; names over 128 are cut.
    shown = ""
    for arg in args:
        if len(shown) >= _SHOWN_MAX:
            break
        shown += f"'{arg[: _SHOWN_MAX - len(shown)]}' "
    return ReplyError(f"ERR unknown command '{name[:_SHOWN_MAX]}', with args beginning with: {shown}")


def unknown_subcommand(subcommand: str, container: str) -> ReplyError:
    """``ERR unknown subcommand 'foo'. Try XGROUP HELP.``"""
    return ReplyError(f"ERR unknown subcommand '{subcommand[:_SHOWN_MAX]}'. Try {container} HELP.")


def subcommand_syntax(subcommand: str, container: str) -> ReplyError:
    """The XGROUP/XINFO option error, naming the subcommand as the client typed it."""
    return ReplyError(f"ERR unknown subcommand or wrong number of arguments for '{subcommand}'. Try {container} HELP.")


def nogroup_key_or_group(key: str, group: str) -> ReplyError:
    """NOGROUP text used by XPENDING, XCLAIM and XAUTOCLAIM."""
    return ReplyError(f"NOGROUP No such key '{_c_string(key)}' or consumer group '{_c_string(group)}'")


def nogroup_xreadgroup(key: str, group: str) -> ReplyError:
    """NOGROUP text used by XREADGROUP."""
    return ReplyError(
        f"NOGROUP No such key '{_c_string(key)}' or consumer group '{_c_string(group)}' in XREADGROUP with GROUP option"
    )


def nogroup_for_key_name(key: str, group: str) -> ReplyError:
    """NOGROUP text used by XGROUP subcommands and XINFO CONSUMERS."""
    return ReplyError(f"NOGROUP No such consumer group '{_c_string(group)}' for key name '{_c_string(key)}'")


def _c_string(text: str) -> str:
    """Redis formats names with %s, so an embedded NUL ends the name."""
    return text.split("\x00", 1)[0]

"""The package's one exception family, and the exact error texts Redis sends.

Every exception the package raises on purpose is a ``StreamclaimError`` defined here and exported from
the package root; the ones a Redis server would send are ``ReplyError``, whose ``str()`` is the full
error line, code included (``ERR syntax error``, ``NOGROUP No such key 's' or consumer group 'g'``), as
redis-py's ``ResponseError`` sits below its ``RedisError``. Others keep a second, built-in base
(``ValueError`` for bad input, ``RuntimeError`` for a failed run, as redis-py's
``LockError(RedisError, ValueError)``) so callers that catch those keep working. The constants and
builders below are the only place Redis' error texts are spelled.
"""

from __future__ import annotations

from typing import Any


class StreamclaimError(Exception):
    """The root of every exception streamclaim_spark raises on purpose."""


class ClassicSessionRequiredError(StreamclaimError, TypeError):
    """Raised at once for a surface that needs the driver's JVM when given a Spark Connect session.

    The message names the surface, why it needs a classic session, and what to use on Connect.
    """


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


class InvalidArgumentError(StreamclaimError, ValueError):
    """Raised when an argument outside Redis' surface is invalid (a bulk path's DataFrame, a selection, a
    limit); the message names the argument, what it got and the fix. Nothing has been written."""


class ArgumentTypeError(StreamclaimError, TypeError):
    """Raised when a value has a type the call cannot take: an argv element neither ``str`` nor ``bytes``,
    a reply or a DataFrame cell of a type with no RESP or JSON form."""


class OptionError(StreamclaimError, ValueError):
    """A ``streamclaim`` source or sink option is missing or malformed; the message names it and the fix."""


class StoreLayoutError(StreamclaimError, RuntimeError):
    """Raised when a store's state table has an older layout than this version reads and writes."""


class ServerStoppingError(StreamclaimError, RuntimeError):
    """Raised for a command handed to streamclaim-server's group committer after it began to stop."""


class ClientQuitError(StreamclaimError):
    """Raised by QUIT so that the server closes the connection once the pending reply (+OK) is sent."""


class ProtocolViolationError(StreamclaimError):
    """The client broke the protocol or a limit; ``line`` is the error Redis sends before disconnecting."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class UnsafeObjectStoreError(StreamclaimError, ValueError):
    """Raised when the store would open where two writing drivers could both commit one Delta version."""


class ImportRefusedError(StreamclaimError, ValueError):
    """Bad input to an import (a pattern that matches nothing, a key that is not a stream ...): nothing is written."""


class PayloadNotTextError(StreamclaimError, ValueError):
    """A reply holds a field name or value that is not UTF-8, and the caller asked for ``str`` replies."""


class CommitMismatchError(StreamclaimError, RuntimeError):
    """Raised when a commit's own metrics (rows updated, deleted, written) disagree with what the command
    decided: the commit landed, so the table's history shows it, but the reply or report would be wrong."""


class SourceNotRegisteredError(StreamclaimError, RuntimeError):
    """Raised when the ``streamclaim`` data source runs without the driver link that ``register`` sets up."""


class RecoveryFailedError(StreamclaimError, RuntimeError):
    """Raised when a run stops on an error; ``report`` holds what it did up to then (status ``failed``).

    ``report`` is the run's ``fleet.recovery.RecoveryReport``, typed ``Any`` here because this module lies
    below every layer and names none of their types.
    """

    def __init__(self, message: str, report: Any) -> None:
        super().__init__(message)
        self.report = report


class RecoverySelectionError(StreamclaimError, ValueError):
    """Raised before anything is written when the run's stream and group patterns select no group."""


class RedriveSelectionError(StreamclaimError, ValueError):
    """Raised before anything is written when a redrive's patterns select no group, or its ``where``
    predicate does not parse or names a column the ``dead_letters`` view lacks."""


class RedriveFailedError(StreamclaimError, RuntimeError):
    """Raised when a redrive stops on an error; ``report`` holds what it did up to then (status ``failed``,
    a ``fleet.redrive.RedriveReport``). A re-run finishes what it left half-done (docs/RECOVERY.md)."""

    def __init__(self, message: str, report: Any) -> None:
        super().__init__(message)
        self.report = report


class RedriveAdoptedError(StreamclaimError, RuntimeError):
    """A redrive run found, before its put-back committed, that another run had adopted its letters (it was
    taken for gone): it commits nothing and stops; the adopting run puts the entries back, once."""


class ConfigError(StreamclaimError, ValueError):
    """Raised when the configuration cannot be read or a key holds a value the job cannot use."""


class InvalidConfigValueError(StreamclaimError, ValueError):
    """Raised by a key's parser with the value's problem and its fix; loading turns it into a ConfigError
    that names the key and where its value came from."""


class NothingCommittedError(StreamclaimError, RuntimeError):
    """Delta made no commit: the MERGE matched nothing it would change (e.g. deletes of absent rows)."""


class StaleSnapshotError(StreamclaimError, RuntimeError):
    """A commit of files found a guarded head changed since the command read it: a lost race, after
    which the command re-runs on a fresh snapshot (``conflicts.is_lost_race``)."""


class TransactionExpiredError(StaleSnapshotError):
    """A transaction open longer than ``retention.MAX_TRANSACTION_MS`` refused to commit and re-runs, as after
    a lost race: no commit names files maintenance may have removed (docs/DESIGN.md)."""


class ConflictRetriesExhaustedError(StreamclaimError, RuntimeError):
    """Raised when a command lost its commit race more often than the retry policy allows."""

    @property
    def last_race(self) -> BaseException | None:
        """The last attempt's lost race (Delta's conflict exception, or the stale-snapshot abort): the
        retry loop raises this error only from one."""
        return self.__cause__


class StoreChangedError(StreamclaimError, RuntimeError):
    """Another writer changed an imported stream in the store while the import read Redis."""


class MaintenanceRefusedError(StreamclaimError, RuntimeError):
    """Raised before maintenance changes anything when it would remove history a reader still needs (a
    streaming query's restart version); the message names the reader and the ways on."""


class BatchPlanError(StreamclaimError, ValueError):
    """A command's plan that a batch cannot replay in memory (an in-place bulk update)."""


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

# XGROUP.
ERR_ENTRIESREAD = "ERR value for ENTRIESREAD must be positive or -1"

# XCLAIM and XAUTOCLAIM.
ERR_XCLAIM_MIN_IDLE = "ERR Invalid min-idle-time argument for XCLAIM"
ERR_XAUTOCLAIM_MIN_IDLE = "ERR Invalid min-idle-time argument for XAUTOCLAIM"
ERR_XCLAIM_IDLE = "ERR Invalid IDLE option argument for XCLAIM"
ERR_XCLAIM_TIME = "ERR Invalid TIME option argument for XCLAIM"
ERR_XCLAIM_RETRYCOUNT = "ERR Invalid RETRYCOUNT option argument for XCLAIM"
ERR_COUNT = "ERR COUNT must be > 0"

# XACKDEL and XDELEX (Redis 8.2).
ERR_XACKDEL_NUMIDS = "ERR Number of IDs must be a positive integer"
ERR_XACKDEL_NUMIDS_MISMATCH = "ERR The `numids` parameter must match the number of arguments"
ERR_XACKDEL_IDS_REQUIRED = "ERR IDS option is required"

# XREAD and XREADGROUP.
ERR_TIMEOUT_NOT_INTEGER = "ERR timeout is not an integer or out of range"
ERR_TIMEOUT_NEGATIVE = "ERR timeout is negative"
ERR_GROUP_ONLY_XREADGROUP = "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
ERR_NOACK_ONLY_XREADGROUP = "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
ERR_UNBALANCED = "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
ERR_MISSING_GROUP = "ERR Missing GROUP option for XREADGROUP"
ERR_DOLLAR_IN_XREADGROUP = (
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer "
    "by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty "
    "result set."
)
ERR_CLAIM_ONLY_XREADGROUP = "ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead."
ERR_MIN_IDLE_NOT_INTEGER = "ERR min-idle-time is not an integer or out of range"
ERR_MIN_IDLE_NEGATIVE = "ERR min-idle-time must be a positive integer"
ERR_GT_IN_XREAD = (
    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
)

# XNACK (Redis 8.4; its texts repeat the ERR code, as the server sends them).
ERR_XNACK_MODE = "ERR ERR mode must be SILENT, FAIL, or FATAL"
ERR_XNACK_NUMIDS = "ERR numids must be a positive integer"
ERR_XNACK_NUMIDS_MISMATCH = "ERR ERR number of IDs doesn't match numids"
ERR_XNACK_RETRYCOUNT_NEGATIVE = "ERR ERR Invalid RETRYCOUNT value, must be >= 0"
ERR_XNACK_EXPECTED_IDS = "ERR ERR syntax error, expected IDS keyword"

# Connection commands (streamclaim-server).
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NO_PASSWORD_SET = (
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
NOAUTH_HELLO = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH "
    "<user> <pass> option can be used to authenticate the client and select the RESP protocol version at the "
    "same time"
)
NOPROTO = "NOPROTO unsupported protocol version"
DB_OUT_OF_RANGE = "ERR DB index is out of range"
BAD_CLIENT_NAME = "ERR Client names cannot contain spaces, newlines or special characters."
FLUSH_DISABLED = (
    "ERR {name} is disabled on this server: it deletes every stream. Start streamclaim-server with "
    "--allow-flush (or set [server] allow_flush = true) to allow it"
)

# streamclaim-server.
MAX_CLIENTS_REACHED = "ERR max number of clients reached"

# The RESP protocol.
INVALID_MULTIBULK_LENGTH = "ERR Protocol error: invalid multibulk length"
INVALID_BULK_LENGTH = "ERR Protocol error: invalid bulk length"
UNBALANCED_QUOTES = "ERR Protocol error: unbalanced quotes in request"
TOO_BIG_INLINE = "ERR Protocol error: too big inline request"
TOO_BIG_MBULK_COUNT = "ERR Protocol error: too big mbulk count string"


PROTOCOL_VERSION_NOT_AN_INTEGER = "ERR Protocol version is not an integer or out of range"
FUNCTION_FLUSH_MODE = "ERR FUNCTION FLUSH only supports SYNC|ASYNC option"
LIBRARY_NOT_FOUND = "ERR Library not found"
NOTBUSY = "NOTBUSY No scripts in execution right now."

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
    return ReplyError(f"NOGROUP No such key '{c_string(key)}' or consumer group '{c_string(group)}'")


def nogroup_xreadgroup(key: str, group: str) -> ReplyError:
    """NOGROUP text used by XREADGROUP."""
    return ReplyError(
        f"NOGROUP No such key '{c_string(key)}' or consumer group '{c_string(group)}' in XREADGROUP with GROUP option"
    )


def nogroup_for_key_name(key: str, group: str) -> ReplyError:
    """NOGROUP text used by XGROUP subcommands and XINFO CONSUMERS."""
    return ReplyError(f"NOGROUP No such consumer group '{c_string(group)}' for key name '{c_string(key)}'")


def c_string(text: str) -> str:
    """The text as C string functions see it: Redis formats (%s), parses and compares arguments only up
    to the first NUL."""
    return text.split("\x00", 1)[0]


def unrecognized_xclaim_option(option: str) -> ReplyError:
    return ReplyError(f"ERR Unrecognized XCLAIM option '{c_string(option)}'")


def unrecognized_xnack_option(option: str) -> ReplyError:
    return ReplyError(f"ERR ERR Unrecognized XNACK option '{c_string(option)}'")


def not_utf8_argument(position: int) -> ReplyError:
    """Outside Redis' surface: names, IDs and options stay text (they live in string columns and digests)."""
    return ReplyError(
        f"ERR argument {position} is not valid UTF-8: streamclaim-spark keeps keys, group and consumer "
        "names, IDs and options as UTF-8 text; only field names and values may be any bytes"
    )


def lone_surrogates_argument(position: int) -> ReplyError:
    return ReplyError(
        f"ERR argument {position} is not valid UTF-8 text (it holds lone surrogates); pass bytes or well-formed str"
    )


def hello_option_syntax(option: str) -> ReplyError:
    return ReplyError(f"ERR Syntax error in HELLO option '{option}'")


def unrecognized_option(option: str) -> ReplyError:
    return ReplyError(f"ERR Unrecognized option '{option}'")


def function_unsupported(subcommand: str) -> ReplyError:
    return ReplyError(f"ERR streamclaim-server runs no functions: FUNCTION {subcommand.upper()} is not supported")


def internal_error(error: BaseException, first_line: str) -> ReplyError:
    """What the server answers for an unexpected failure: the exception's type and first line, not a hang-up."""
    return ReplyError(f"ERR internal error in streamclaim-server: {type(error).__name__}: {first_line}")


def protocol_expected_bulk(got: str) -> str:
    """Redis' protocol error for a multibulk item that is not a bulk string."""
    return f"ERR Protocol error: expected '$', got '{got}'"

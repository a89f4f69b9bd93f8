"""Dispatches Redis argv to the command parsers and shapes their results into replies.

Each handler follows one pattern: the table's checks (``spec.COMMANDS``: known name, arity, subcommand),
parse, run inside a store transaction, shape the reply. Most handlers parse before their transaction, so
a retried transaction never parses again. Where Redis looks the key or group up before it validates the
arguments, that order is kept: XACK, XDEL, XNACK and XINFO parse inside the transaction, after the
lookup (a few tokens, parsed again on a retry), and XCLAIM parses before it and carries a parse error in,
raised once the group is known to exist. The one handler with more than that shape is the blocking read,
whose wait loop lives in ``blocking.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from streamclaim_spark.commands import claim, groups, nack, pending, reading, references, streams, trimming
from streamclaim_spark.commands.args import require_text
from streamclaim_spark.commands.blocking import read_with_block, resolve_dollar
from streamclaim_spark.commands.spec import COMMANDS
from streamclaim_spark.core.replies import OK, Status, entries_reply
from streamclaim_spark.errors import SYNTAX, ReplyError, unknown_command

__all__ = ["dispatch", "touched", "validate"]

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner

Handler = Callable[["Runner", Sequence[str]], Any]
_HANDLERS: dict[str, Handler] = {}


def command(name: str) -> Callable[[Handler], Handler]:
    """Registers the handler of a command of the table (``spec.COMMANDS``)."""
    if name not in COMMANDS:
        raise AssertionError(f"{name!r} has no row in commands/spec.py's table")

    def register(handler: Handler) -> Handler:
        _HANDLERS[name] = handler
        return handler

    return register


# Set by ``dispatch`` for the command running in this thread: a blocked read stops waiting (and
# replies nil, as on a timeout) once it returns True, e.g. when the server's client went away.
_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("streamclaim_cancelled", default=None)


def validate(argv: Sequence[str]) -> str:
    """The checks Redis makes before it runs or queues a command: a known name, its arity (and for
    XGROUP and XINFO, a known subcommand and its arity); returns the lowercase name."""
    if not argv:
        raise unknown_command("", [])
    name = argv[0].lower()
    if name not in COMMANDS:
        raise unknown_command(argv[0], list(argv[1:]))
    COMMANDS[name].check(argv)
    return name


def dispatch(runner: Runner, argv: Sequence[str], cancelled: Callable[[], bool] | None = None) -> Any:
    """Runs one command; ``cancelled`` lets a caller end a BLOCK wait early (it is polled between reads)."""
    name = validate(argv)
    if not COMMANDS[name].payload:
        require_text(argv)
    token = _CANCELLED.set(cancelled)
    try:
        return _HANDLERS[name](runner, argv)
    finally:
        _CANCELLED.reset(token)


# Commands whose argv[1] is the key and argv[2] the group; XGROUP and XINFO name them after the subcommand.
_KEY_AND_GROUP = {"xack", "xpending", "xclaim", "xautoclaim", "xackdel", "xnack"}


def touched(argv: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The streams (and their groups) a command is likely to read, from its argv alone: what a batch
    reads in one query before it runs its commands. A guess: a command reads whatever it needs anyway."""
    name = argv[0].lower() if argv else ""
    if name in _KEY_AND_GROUP and len(argv) > 2:
        return [(argv[1], (argv[2],))]
    if name in ("xgroup", "xinfo") and len(argv) > 2:
        return [(argv[2], tuple(argv[3:4]) if len(argv) > 3 and argv[1].lower() != "stream" else ())]
    if name in ("xread", "xreadgroup"):
        upper = [token.upper() for token in argv]
        if "STREAMS" not in upper:
            return []
        at = upper.index("STREAMS") + 1
        keys = argv[at : at + (len(argv) - at) // 2]
        groups = (argv[2],) if name == "xreadgroup" and len(argv) > 2 else ()
        return [(key, groups) for key in keys]
    if name in ("del", "exists"):
        return [(key, ()) for key in argv[1:]]
    if name.startswith("x") and len(argv) > 1:
        return [(argv[1], ())]
    return []


@command("xadd")
def _xadd(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xadd(argv)
    new_id = runner.transact("XADD", lambda ctx: streams.run_xadd(ctx, request))
    return None if new_id is None else str(new_id)


@command("xrange")
def _xrange(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=False)
    entries = runner.transact("XRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xrevrange")
def _xrevrange(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=True)
    entries = runner.transact("XREVRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xlen")
def _xlen(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XLEN", lambda ctx: streams.run_xlen(ctx, argv[1]))


@command("xdel")
def _xdel(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XDEL", lambda ctx: streams.run_xdel(ctx, argv[1], argv[2:]))


@command("xtrim")
def _xtrim(runner: Runner, argv: Sequence[str]) -> Any:
    trim = trimming.parse_xtrim(argv)
    return runner.transact("XTRIM", lambda ctx: trimming.run_xtrim(ctx, argv[1], trim))


@command("xsetid")
def _xsetid(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xsetid(argv)
    return runner.transact("XSETID", lambda ctx: streams.run_xsetid(ctx, request))


@command("del")
def _del(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("DEL", lambda ctx: streams.run_del(ctx, argv[1:]))


@command("exists")
def _exists(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("EXISTS", lambda ctx: streams.run_exists(ctx, argv[1:]))


@command("type")
def _type(runner: Runner, argv: Sequence[str]) -> Any:
    exists = runner.transact("TYPE", lambda ctx: streams.run_exists(ctx, argv[1:]))
    return Status("stream") if exists else Status("none")


@command("dbsize")
def _dbsize(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("DBSIZE", lambda ctx: len(ctx.snapshot.all_streams()))


def _flush(runner: Runner, argv: Sequence[str]) -> Any:
    """FLUSHDB/FLUSHALL [ASYNC|SYNC]: deletes every stream with its groups in one commit (db 0 is all)."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() not in ("ASYNC", "SYNC")):
        raise ReplyError(SYNTAX)
    runner.transact(argv[0].upper(), lambda ctx: streams.run_del(ctx, [m.key for m in ctx.snapshot.all_streams()]))
    return OK


command("flushdb")(_flush)
command("flushall")(_flush)


@command("xgroup")
def _xgroup(runner: Runner, argv: Sequence[str]) -> Any:
    request = groups.parse_xgroup_options(argv)
    return runner.transact("XGROUP", lambda ctx: groups.run_xgroup(ctx, request))


@command("xinfo")
def _xinfo(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XINFO", lambda ctx: groups.run_xinfo(ctx, argv))


@command("xack")
def _xack(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XACK", lambda ctx: pending.run_xack(ctx, argv[1], argv[2], argv[3:]))


@command("xackdel")
def _xackdel(runner: Runner, argv: Sequence[str]) -> Any:
    request = references.parse_ackdel_tail(argv[3:])
    return runner.transact("XACKDEL", lambda ctx: references.run_xackdel(ctx, argv[1], argv[2], request))


@command("xdelex")
def _xdelex(runner: Runner, argv: Sequence[str]) -> Any:
    request = references.parse_ackdel_tail(argv[2:])
    return runner.transact("XDELEX", lambda ctx: references.run_xdelex(ctx, argv[1], request))


@command("xnack")
def _xnack(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XNACK", lambda ctx: nack.run_xnack(ctx, argv[1], argv[2], argv[3:]))


@command("xpending")
def _xpending(runner: Runner, argv: Sequence[str]) -> Any:
    request = pending.parse_xpending(argv)
    return runner.transact("XPENDING", lambda ctx: pending.run_xpending(ctx, request))


@command("xreadgroup")
def _xreadgroup(runner: Runner, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    return read_with_block(runner, "XREADGROUP", request, reading.run_xreadgroup, _CANCELLED.get())


@command("xread")
def _xread(runner: Runner, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    if request.block_ms is not None:
        request = resolve_dollar(runner, request)
    return read_with_block(runner, "XREAD", request, reading.run_xread, _CANCELLED.get())


@command("xclaim")
def _xclaim(runner: Runner, argv: Sequence[str]) -> Any:
    request = claim.parse_xclaim_or_error(argv)
    result = runner.transact("XCLAIM", lambda ctx: claim.claim_ids(ctx, argv[1], argv[2], argv[3], request))
    return claim.claimed_reply(result)


@command("xautoclaim")
def _xautoclaim(runner: Runner, argv: Sequence[str]) -> Any:
    request = claim.parse_xautoclaim(argv)
    result = runner.transact("XAUTOCLAIM", lambda ctx: claim.run_xautoclaim(ctx, request))
    return claim.autoclaim_reply(result)

"""Dispatches Redis argv to the command parsers and shapes their results into replies.

Each handler follows one pattern: arity check (as Redis' command table does), parse, run inside a
store transaction, shape the reply. Handlers never hold logic of their own beyond that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from streamclaim_spark.commands import claim, groups, nack, pending, reading, references, streams, trimming
from streamclaim_spark.commands.args import check_arity, check_subcommand, is_token, require_text
from streamclaim_spark.core.replies import OK, Status, entries_reply, entry_reply
from streamclaim_spark.errors import SYNTAX, ReplyError, unknown_command

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner

Handler = Callable[["Runner", Sequence[str]], Any]
_HANDLERS: dict[str, tuple[int, Handler, bool]] = {}


def command(name: str, arity: int, *, payload: bool = False) -> Callable[[Handler], Handler]:
    """Registers a handler. Its argv must be UTF-8 text (args.require_text) unless ``payload``: such a
    command takes field names and values as any bytes, and checks the rest of its argv as it parses."""

    def register(handler: Handler) -> Handler:
        _HANDLERS[name] = (arity, handler, payload)
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
    if name not in _HANDLERS:
        raise unknown_command(argv[0], list(argv[1:]))
    check_arity(argv, _HANDLERS[name][0], name)
    if name in _SUBCOMMAND_ARITY:
        check_subcommand(argv, _SUBCOMMAND_ARITY[name])
    return name


def dispatch(runner: Runner, argv: Sequence[str], cancelled: Callable[[], bool] | None = None) -> Any:
    """Runs one command; ``cancelled`` lets a caller end a BLOCK wait early (it is polled between reads)."""
    name = validate(argv)
    _, handler, payload = _HANDLERS[name]
    if not payload:
        require_text(argv)
    token = _CANCELLED.set(cancelled)
    try:
        return handler(runner, argv)
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


def command_names() -> list[str]:
    """The data commands ``dispatch`` knows, lowercase (the server adds its connection commands)."""
    return sorted(_HANDLERS)


def command_arity(name: str) -> int:
    """Redis' arity of a data command (positive: exact argc, negative: at least)."""
    return _HANDLERS[name][0]


@command("xadd", -5, payload=True)
def _xadd(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xadd(argv)
    new_id = runner.transact("XADD", lambda ctx: streams.run_xadd(ctx, request))
    return None if new_id is None else str(new_id)


@command("xrange", -4)
def _xrange(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=False)
    entries = runner.transact("XRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xrevrange", -4)
def _xrevrange(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=True)
    entries = runner.transact("XREVRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xlen", 2)
def _xlen(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XLEN", lambda ctx: streams.run_xlen(ctx, argv[1]))


@command("xdel", -3)
def _xdel(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XDEL", lambda ctx: streams.run_xdel(ctx, argv[1], argv[2:]))


@command("xtrim", -4)
def _xtrim(runner: Runner, argv: Sequence[str]) -> Any:
    trim = trimming.parse_xtrim(argv)
    return runner.transact("XTRIM", lambda ctx: trimming.run_xtrim(ctx, argv[1], trim))


@command("xsetid", -3)
def _xsetid(runner: Runner, argv: Sequence[str]) -> Any:
    request = streams.parse_xsetid(argv)
    return runner.transact("XSETID", lambda ctx: streams.run_xsetid(ctx, request))


@command("del", -2)
def _del(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("DEL", lambda ctx: streams.run_del(ctx, argv[1:]))


@command("exists", -2)
def _exists(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("EXISTS", lambda ctx: streams.run_exists(ctx, argv[1:]))


@command("type", 2)
def _type(runner: Runner, argv: Sequence[str]) -> Any:
    exists = runner.transact("TYPE", lambda ctx: streams.run_exists(ctx, argv[1:]))
    return Status("stream") if exists else Status("none")


@command("dbsize", 1)
def _dbsize(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("DBSIZE", lambda ctx: len(ctx.snapshot.all_streams()))


def _flush(runner: Runner, argv: Sequence[str]) -> Any:
    """FLUSHDB/FLUSHALL [ASYNC|SYNC]: deletes every stream with its groups in one commit (db 0 is all)."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() not in ("ASYNC", "SYNC")):
        raise ReplyError(SYNTAX)
    runner.transact(argv[0].upper(), lambda ctx: streams.run_del(ctx, [m.key for m in ctx.snapshot.all_streams()]))
    return OK


command("flushdb", -1)(_flush)
command("flushall", -1)(_flush)


@command("xgroup", -2)
def _xgroup(runner: Runner, argv: Sequence[str]) -> Any:
    request = groups.parse_xgroup_options(argv)
    return runner.transact("XGROUP", lambda ctx: groups.run_xgroup(ctx, request))


@command("xinfo", -2)
def _xinfo(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XINFO", lambda ctx: groups.run_xinfo(ctx, argv))


@command("xack", -4)
def _xack(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XACK", lambda ctx: pending.run_xack(ctx, argv[1], argv[2], argv[3:]))


@command("xackdel", -6)
def _xackdel(runner: Runner, argv: Sequence[str]) -> Any:
    request = references.parse_ackdel_tail(argv[3:])
    return runner.transact("XACKDEL", lambda ctx: references.run_xackdel(ctx, argv[1], argv[2], request))


@command("xdelex", -5)
def _xdelex(runner: Runner, argv: Sequence[str]) -> Any:
    request = references.parse_ackdel_tail(argv[2:])
    return runner.transact("XDELEX", lambda ctx: references.run_xdelex(ctx, argv[1], request))


@command("xnack", -7)
def _xnack(runner: Runner, argv: Sequence[str]) -> Any:
    return runner.transact("XNACK", lambda ctx: nack.run_xnack(ctx, argv[1], argv[2], argv[3:]))


@command("xpending", -3)
def _xpending(runner: Runner, argv: Sequence[str]) -> Any:
    request = pending.parse_xpending(argv)
    return runner.transact("XPENDING", lambda ctx: pending.run_xpending(ctx, request))


_SUBCOMMAND_ARITY = {"xgroup": groups.XGROUP_ARITY, "xinfo": groups.XINFO_ARITY}

# How often a blocked read looks for new entries (BLOCK polls; see docs/DESIGN.md).
BLOCK_POLL_INTERVAL_S = 0.1


@command("xreadgroup", -7)
def _xreadgroup(runner: Runner, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    return _read_with_block(runner, "XREADGROUP", request, reading.run_xreadgroup)


@command("xread", -4)
def _xread(runner: Runner, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    if request.block_ms is not None:
        request = resolve_dollar(runner, request)
    return _read_with_block(runner, "XREAD", request, reading.run_xread)


def resolve_dollar(runner: Runner, request: reading.Read) -> reading.Read:
    """A blocked XREAD waits for entries after the last ID at call time, as Redis rewrites ``$``
    (``0-0`` for a missing key)."""
    from dataclasses import replace

    snapshot = runner.snapshot()
    ids = []
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        meta = snapshot.stream(key) if is_token(id_arg, "$") else None
        ids.append(str(meta.last_id) if meta is not None else ("0-0" if is_token(id_arg, "$") else id_arg))
    return replace(request, id_args=tuple(ids))


def _read_with_block(
    runner: Runner,
    operation: str,
    request: reading.Read,
    run: Callable[[Any, reading.Read], list[reading.StreamReply] | None],
) -> Any:
    started = time.monotonic()
    served = runner.transact(operation, lambda ctx: run(ctx, request))
    cancelled = _CANCELLED.get()
    while served is None and request.block_ms is not None:
        if request.block_ms and (time.monotonic() - started) * 1000 >= request.block_ms:
            break
        if cancelled is not None and cancelled():
            break
        time.sleep(BLOCK_POLL_INTERVAL_S)
        if runner.transact(f"{operation} poll", lambda ctx: reading.has_new_entries(ctx, request)):
            served = runner.transact(operation, lambda ctx: run(ctx, request))
    if served is None:
        return None
    return [[key, [_read_item_reply(item) for item in items]] for key, items in served]


def _read_item_reply(item: reading.ReadItem) -> list[Any]:
    """``[id, fields]``, or under XREADGROUP CLAIM ``[id, fields, idle-ms, delivery-count]`` (integers)."""
    entry_id, entry, claim_meta = item
    reply = entry_reply(entry, entry_id)
    return reply if claim_meta is None else [*reply, *claim_meta]


@command("xclaim", -6)
def _xclaim(runner: Runner, argv: Sequence[str]) -> Any:
    result = runner.transact("XCLAIM", lambda ctx: claim.run_xclaim(ctx, argv))
    return claim.claimed_reply(result)


@command("xautoclaim", -6)
def _xautoclaim(runner: Runner, argv: Sequence[str]) -> Any:
    request = claim.parse_xautoclaim(argv)
    result = runner.transact("XAUTOCLAIM", lambda ctx: claim.run_xautoclaim(ctx, request))
    return claim.autoclaim_reply(result)

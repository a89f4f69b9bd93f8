"""Dispatches Redis argv to the command parsers and shapes their results into replies.

Each handler follows one pattern: arity check (as Redis' command table does), parse, run inside a
store transaction, shape the reply. Handlers never hold logic of their own beyond that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamclaim_spark import claim
from streamclaim_spark.commands import groups, pending, reading, streams
from streamclaim_spark.commands.args import check_arity, is_token
from streamclaim_spark.errors import unknown_command, unknown_subcommand
from streamclaim_spark.replies import entries_reply, entry_reply

if TYPE_CHECKING:
    from streamclaim_spark.store import StreamStore

Handler = Callable[["StreamStore", Sequence[str]], Any]
_HANDLERS: dict[str, tuple[int, Handler]] = {}


def command(name: str, arity: int) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _HANDLERS[name] = (arity, handler)
        return handler

    return register


def dispatch(store: StreamStore, argv: Sequence[str]) -> Any:
    if not argv:
        raise unknown_command("", [])
    name = argv[0].lower()
    if name not in _HANDLERS:
        raise unknown_command(argv[0], list(argv[1:]))
    arity, handler = _HANDLERS[name]
    check_arity(argv, arity, name)
    return handler(store, argv)


@command("xadd", -5)
def _xadd(store: StreamStore, argv: Sequence[str]) -> Any:
    request = streams.parse_xadd(argv)
    new_id = store.transact("XADD", lambda ctx: streams.run_xadd(ctx, request))
    return None if new_id is None else str(new_id)


@command("xrange", -4)
def _xrange(store: StreamStore, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=False)
    entries = store.transact("XRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xrevrange", -4)
def _xrevrange(store: StreamStore, argv: Sequence[str]) -> Any:
    request = streams.parse_xrange(argv, reverse=True)
    entries = store.transact("XREVRANGE", lambda ctx: streams.run_xrange(ctx, request))
    return None if entries is None else entries_reply(entries)


@command("xlen", 2)
def _xlen(store: StreamStore, argv: Sequence[str]) -> Any:
    return store.transact("XLEN", lambda ctx: streams.run_xlen(ctx, argv[1]))


@command("xdel", -3)
def _xdel(store: StreamStore, argv: Sequence[str]) -> Any:
    return store.transact("XDEL", lambda ctx: streams.run_xdel(ctx, argv[1], argv[2:]))


@command("xtrim", -4)
def _xtrim(store: StreamStore, argv: Sequence[str]) -> Any:
    trim = streams.parse_xtrim(argv)
    return store.transact("XTRIM", lambda ctx: streams.run_xtrim(ctx, argv[1], trim))


@command("xsetid", -3)
def _xsetid(store: StreamStore, argv: Sequence[str]) -> Any:
    request = streams.parse_xsetid(argv)
    return store.transact("XSETID", lambda ctx: streams.run_xsetid(ctx, request))


@command("del", -2)
def _del(store: StreamStore, argv: Sequence[str]) -> Any:
    return store.transact("DEL", lambda ctx: streams.run_del(ctx, argv[1:]))


@command("exists", -2)
def _exists(store: StreamStore, argv: Sequence[str]) -> Any:
    return store.transact("EXISTS", lambda ctx: streams.run_exists(ctx, argv[1:]))


def _subcommand(argv: Sequence[str], arities: dict[str, int]) -> str:
    """Redis' container dispatch: unknown subcommand error, then the subcommand's own arity."""
    sub = argv[1].lower()
    if sub not in arities:
        raise unknown_subcommand(argv[1], argv[0].upper())
    check_arity(argv, arities[sub], f"{argv[0].lower()}|{sub}")
    return sub


@command("xgroup", -2)
def _xgroup(store: StreamStore, argv: Sequence[str]) -> Any:
    _subcommand(argv, groups.XGROUP_ARITY)
    request = groups.parse_xgroup_options(argv)
    return store.transact("XGROUP", lambda ctx: groups.run_xgroup(ctx, request))


@command("xinfo", -2)
def _xinfo(store: StreamStore, argv: Sequence[str]) -> Any:
    _subcommand(argv, groups.XINFO_ARITY)
    return store.transact("XINFO", lambda ctx: groups.run_xinfo(ctx, argv))


@command("xack", -4)
def _xack(store: StreamStore, argv: Sequence[str]) -> Any:
    return store.transact("XACK", lambda ctx: pending.run_xack(ctx, argv[1], argv[2], argv[3:]))


@command("xpending", -3)
def _xpending(store: StreamStore, argv: Sequence[str]) -> Any:
    request = pending.parse_xpending(argv)
    return store.transact("XPENDING", lambda ctx: pending.run_xpending(ctx, request))


# How often a blocked read looks for new entries (BLOCK polls; see docs/DESIGN.md).
BLOCK_POLL_INTERVAL_S = 0.1


@command("xreadgroup", -7)
def _xreadgroup(store: StreamStore, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    return _read_with_block(store, "XREADGROUP", request, reading.run_xreadgroup)


@command("xread", -4)
def _xread(store: StreamStore, argv: Sequence[str]) -> Any:
    request = reading.parse_read(argv)
    if request.block_ms is not None:
        request = _resolve_dollar(store, request)
    return _read_with_block(store, "XREAD", request, reading.run_xread)


def _resolve_dollar(store: StreamStore, request: reading.Read) -> reading.Read:
    """A blocked XREAD waits for entries after the last ID at call time, as Redis rewrites ``$``."""
    from dataclasses import replace

    snapshot = store.snapshot()
    ids = []
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        meta = snapshot.stream(key) if is_token(id_arg, "$") else None
        ids.append(str(meta.last_id) if meta is not None else ("0-0" if is_token(id_arg, "$") else id_arg))
    return replace(request, id_args=tuple(ids))


def _read_with_block(
    store: StreamStore,
    operation: str,
    request: reading.Read,
    run: Callable[[Any, reading.Read], list[reading.StreamReply] | None],
) -> Any:
    started = time.monotonic()
    served = store.transact(operation, lambda ctx: run(ctx, request))
    while served is None and request.block_ms is not None:
        if request.block_ms and (time.monotonic() - started) * 1000 >= request.block_ms:
            break
        time.sleep(BLOCK_POLL_INTERVAL_S)
        if store.transact(f"{operation} poll", lambda ctx: reading.has_new_entries(ctx, request)):
            served = store.transact(operation, lambda ctx: run(ctx, request))
    if served is None:
        return None
    return [[key, [entry_reply(entry, entry_id) for entry_id, entry in items]] for key, items in served]


def _claim_reply(store: StreamStore, result: claim.ClaimResult) -> list[Any]:
    """The claimed items as Redis replies them, keeping only what the commit really wrote."""
    version = store.last_commit_version
    if version is not None and result.claimed:
        result = result.confirmed(claim.rows_written(store.table_at(version), result))
    return [str(entry_id) if entry is None else entry_reply(entry) for entry_id, entry in result.claimed]


@command("xclaim", -6)
def _xclaim(store: StreamStore, argv: Sequence[str]) -> Any:
    result = store.transact("XCLAIM", lambda ctx: claim.run_xclaim(ctx, argv))
    return _claim_reply(store, result)


@command("xautoclaim", -6)
def _xautoclaim(store: StreamStore, argv: Sequence[str]) -> Any:
    request = claim.parse_xautoclaim(argv)
    result = store.transact("XAUTOCLAIM", lambda ctx: claim.run_xautoclaim(ctx, request))
    return [str(result.cursor), _claim_reply(store, result), [str(i) for i in result.deleted]]

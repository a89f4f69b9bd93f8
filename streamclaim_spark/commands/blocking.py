"""XREAD and XREADGROUP with BLOCK: the first read, then polls until entries arrive, the time runs out,
or the caller cancels (its client went away). Redis wakes blocked clients on XADD; the store, whose
writers may be other drivers, polls instead (docs/DESIGN.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from streamclaim_spark.commands import reading
from streamclaim_spark.commands.args import is_token
from streamclaim_spark.core.replies import entry_reply

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner

# How often a blocked read looks for new entries.
BLOCK_POLL_INTERVAL_S = 0.1


def resolve_dollar(runner: Runner, request: reading.Read) -> reading.Read:
    """A blocked XREAD waits for entries after the last ID at call time, as Redis rewrites ``$``
    (``0-0`` for a missing key)."""
    snapshot = runner.snapshot()
    ids = []
    for key, id_arg in zip(request.keys, request.id_args, strict=True):
        meta = snapshot.stream(key) if is_token(id_arg, "$") else None
        ids.append(str(meta.last_id) if meta is not None else ("0-0" if is_token(id_arg, "$") else id_arg))
    return replace(request, id_args=tuple(ids))


def read_with_block(
    runner: Runner,
    operation: str,
    request: reading.Read,
    run: Callable[[Any, reading.Read], list[reading.StreamReply] | None],
    cancelled: Callable[[], bool] | None,
) -> Any:
    """The read's reply: served at once, or after polling for up to BLOCK ms (0: until cancelled);
    nil (None) when nothing came, as on a timeout."""
    started = time.monotonic()
    served = runner.transact(operation, lambda ctx: run(ctx, request))
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

"""XACK and XPENDING: acknowledging and inspecting pending entries (the PEL).

Parsing follows Redis 7.0's xackCommand and xpendingCommand; XPENDING parses all its arguments
before it looks at the key, XACK returns 0 for a missing key or group before it validates IDs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamclaim_spark.commands.args import int_arg, is_word
from streamclaim_spark.commands.groups import group_or_nogroup
from streamclaim_spark.commands.streams import parse_ids_deferred
from streamclaim_spark.core.ids import StreamId, parse_range_end, parse_range_start
from streamclaim_spark.core.model import Need, PendingEntry, Scan, Write, pending_key
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.errors import SYNTAX, ReplyError


def run_xack(ctx: Context, key: str, group_name: str, tokens: Sequence[str]) -> int:
    ids, invalid = parse_ids_deferred(tokens)
    # The heads and the IDs' PEL rows in one query.
    ctx.snapshot.prefetch(Need(key, (group_name,), pending_ids=tuple(ids)))
    group = ctx.snapshot.existing_group(key, group_name)
    if group is None:
        return 0  # Redis answers 0 for a missing key or group before it validates the IDs
    if invalid is not None:
        raise invalid
    pending = ctx.snapshot.pending_by_id(key, group_name, ids)
    if not pending:
        return 0
    for entry_id in pending:
        ctx.plan.add(Write(pending_key(key, group_name, entry_id), delete=True))
    put_group(ctx, group, group)
    return len(pending)


@dataclass(frozen=True)
class XPending:
    key: str
    group: str
    extended: bool
    min_idle: int = 0
    low: StreamId | None = None
    high: StreamId | None = None
    count: int = 0
    consumer: str | None = None


def parse_xpending(argv: Sequence[str]) -> XPending:
    if len(argv) != 3 and not 6 <= len(argv) <= 9:
        raise ReplyError(SYNTAX)
    if len(argv) == 3:
        return XPending(argv[1], argv[2], extended=False)
    start = 3
    min_idle = 0
    if is_word(argv[3], "IDLE"):
        min_idle = int_arg(argv[4])
        if len(argv) < 8:
            raise ReplyError(SYNTAX)
        start += 2
    count = max(0, int_arg(argv[start + 2]))
    low = parse_range_start(argv[start])
    high = parse_range_end(argv[start + 1])
    consumer = argv[start + 3] if start + 3 < len(argv) else None
    return XPending(argv[1], argv[2], True, min_idle, low, high, count, consumer)


def run_xpending(ctx: Context, request: XPending) -> Any:
    if not request.extended:
        # Heads and the PEL's aggregate in one query.
        total, lowest, highest, counts = ctx.snapshot.pending_summary(request.key, request.group)
        group_or_nogroup(ctx, request.key, request.group)
        if total == 0:
            return [0, None, None, None]
        consumers = sorted(counts, key=lambda name: name.encode())
        return [total, str(lowest), str(highest), [[name, str(counts[name])] for name in consumers]]
    assert request.low is not None and request.high is not None
    scan = _pending_scan(ctx, request)
    ctx.snapshot.prefetch(Need(request.key, (request.group,), request.consumer, pending_scan=scan))
    group_or_nogroup(ctx, request.key, request.group)
    if request.consumer is not None and (ctx.snapshot.consumer(request.key, request.group, request.consumer) is None):
        return []
    entries = _pending_entries(ctx, request, scan)
    # An XNACKed entry has no owner and no idle time: Redis 8.8 lists it as ["id", "", -1, count].
    return [
        [str(p.id), "", -1, p.delivery_count]
        if p.owner is None
        else [str(p.id), p.owner, max(0, p.idle(ctx.now)), p.delivery_count]
        for p in entries
    ]


def _pending_scan(ctx: Context, request: XPending) -> Scan | None:
    """The PEL range the extended form lists (None for COUNT 0)."""
    assert request.low is not None and request.high is not None
    if request.count == 0:
        return None
    cutoff = ctx.now - request.min_idle if request.min_idle > 0 else None
    return Scan(request.low, request.high, request.count, owner=request.consumer, delivered_at_or_before=cutoff)


def _pending_entries(ctx: Context, request: XPending, scan: Scan | None) -> list[PendingEntry]:
    if scan is None:
        return []
    return ctx.snapshot.pending(
        request.key, request.group, scan.low, scan.high, scan.limit, scan.owner, scan.delivered_at_or_before
    )

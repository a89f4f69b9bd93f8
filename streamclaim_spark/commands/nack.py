"""XNACK (Redis 8.8): give pending entries back to the group for immediate redelivery.

``XNACK key group <SILENT | FAIL | FATAL> IDS numids id ... [RETRYCOUNT count] [FORCE]`` takes each
pending ID away from its consumer and appends it to the group's NACK zone (model.nack_time), where
XREADGROUP CLAIM serves it first and XCLAIM/XAUTOCLAIM claim it whatever their min-idle-time. The mode
sets the delivery count: SILENT gives the delivery back (count - 1, floor 0), FAIL keeps it, FATAL sets
it to 2^63-1 so that dead-lettering picks the entry up; RETRYCOUNT overrides all three.

No Redis 8 server installs here: validation order, texts and state changes follow
``reference/redis8-recovery-commands.md`` §2 (Redis' ``xnackCommand``). Several of its error texts
are passed to ``addReplyError`` with a literal ``ERR`` prefix, to which Redis adds its own: the wire
text is ``ERR ERR ...``, which the store reproduces (docs/DESIGN.md, "Redis 8 commands").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from streamclaim_spark.commands.args import int_arg, is_word
from streamclaim_spark.commands.groups import group_or_nogroup
from streamclaim_spark.commands.streams import parse_ids
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.integers import LLONG_MAX
from streamclaim_spark.core.model import Need, PendingEntry, Write, nack_time, pending_row
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.errors import (
    ERR_XNACK_EXPECTED_IDS,
    ERR_XNACK_MODE,
    ERR_XNACK_NUMIDS,
    ERR_XNACK_NUMIDS_MISMATCH,
    ERR_XNACK_RETRYCOUNT_NEGATIVE,
    ReplyError,
    unrecognized_xnack_option,
)

INT_MAX = 2**31 - 1


class NackMode(Enum):
    SILENT = "SILENT"
    FAIL = "FAIL"
    FATAL = "FATAL"


@dataclass(frozen=True)
class XNack:
    """A parsed XNACK after the key and group: IDs still unparsed (they are checked last)."""

    mode: NackMode
    id_tokens: tuple[str, ...]
    retry_count: int | None = None
    force: bool = False


def unrecognized_option(token: str) -> ReplyError:
    return unrecognized_xnack_option(token)


def parse_xnack_tail(tokens: Sequence[str]) -> XNack:
    """The mode (argv[3]), then IDS / RETRYCOUNT / FORCE in any order; a later IDS block replaces an
    earlier one, as Redis' loop does."""
    mode = next((m for m in NackMode if is_word(tokens[0], m.value)), None)
    if mode is None:
        raise ReplyError(ERR_XNACK_MODE)
    id_tokens: tuple[str, ...] | None = None
    retry_count: int | None = None
    force = False
    i = 1
    while i < len(tokens):
        token, more = tokens[i], len(tokens) - i - 1
        if is_word(token, "IDS") and more:
            count = int_arg(tokens[i + 1], ERR_XNACK_NUMIDS)
            if not 1 <= count <= INT_MAX:
                raise ReplyError(ERR_XNACK_NUMIDS)
            if count > more - 1:
                raise ReplyError(ERR_XNACK_NUMIDS_MISMATCH)
            id_tokens = tuple(tokens[i + 2 : i + 2 + count])
            i += 2 + count
        elif is_word(token, "RETRYCOUNT") and more:
            retry_count = int_arg(tokens[i + 1])
            if retry_count < 0:
                raise ReplyError(ERR_XNACK_RETRYCOUNT_NEGATIVE)
            i += 2
        elif is_word(token, "FORCE"):
            force = True
            i += 1
        else:
            raise unrecognized_option(token)
    if id_tokens is None:
        raise ReplyError(ERR_XNACK_EXPECTED_IDS)
    return XNack(mode, id_tokens, retry_count, force)


def nacked_count(mode: NackMode, retry_count: int | None, count: int) -> int:
    """The delivery count an entry keeps after XNACK (``count`` is its count before; 0 when forced)."""
    if retry_count is not None:
        return retry_count
    if mode is NackMode.SILENT:
        return max(count - 1, 0)
    if mode is NackMode.FATAL:
        return LLONG_MAX
    return count


def run_xnack(ctx: Context, key: str, group_name: str, tokens: Sequence[str]) -> int:
    """XNACK: the number of IDs given back (repeats count each time), in one commit."""
    # Parsed ahead so that the heads and the IDs' rows come in one query; a parse error is raised only
    # once the key and group are known to exist, as Redis looks them up first.
    request: XNack | None = None
    ids: list[StreamId] = []
    invalid: ReplyError | None = None
    try:
        parsed = parse_xnack_tail(tokens)
        ids, request = parse_ids(parsed.id_tokens), parsed
    except ReplyError as error:
        invalid = error
    ctx.snapshot.prefetch(Need(key, (group_name,), entry_ids=tuple(ids), pending_ids=tuple(ids)))
    group = group_or_nogroup(ctx, key, group_name)
    if invalid is not None:
        raise invalid
    assert request is not None
    pending = ctx.snapshot.pending_by_id(key, group_name, ids)
    alive = set(ctx.snapshot.entries_by_id(key, ids)) if request.force else set()
    next_time = nack_time(ctx.now, ctx.snapshot.last_nack_time(key, group_name))
    nacked: dict[StreamId, PendingEntry] = {}
    released = 0
    for entry_id in ids:
        current = nacked.get(entry_id) or pending.get(entry_id)
        if current is None:
            if not (request.force and entry_id in alive):
                continue
            current = PendingEntry(entry_id, None, 0, 0)  # FORCE: a new owner-less entry, never delivered
        count = nacked_count(request.mode, request.retry_count, current.delivery_count)
        nacked[entry_id] = PendingEntry(entry_id, None, next_time, count)
        next_time += 1
        released += 1
    for entry in nacked.values():
        ctx.plan.add(Write(pending_row(key, group_name, entry, ctx.txn)))
    if nacked:
        put_group(ctx, group, group)
    return released

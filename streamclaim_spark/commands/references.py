"""XACKDEL and XDELEX (Redis 8.2): acknowledge and delete, or delete, under a reference policy.

A policy says what happens to the consumer groups' references (PEL entries, and entries a group has
not read yet) when an entry is deleted:

* KEEPREF (the default): delete the entry, leave other groups' PEL entries dangling, as XDEL does;
* DELREF: delete the entry and remove its ID from every group's PEL;
* ACKED: delete only entries no group references: not in any PEL, and not after any group's
  last-delivered ID.

No Redis 8 server installs here: parsing, replies and state changes follow
``reference/redis8-recovery-commands.md`` §3 (Redis' ``streamParseAckDelArgsOrReply``,
``xackdelCommand``, ``xdelexCommand`` and ``streamEntryIsReferenced``), as docs/DESIGN.md says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamclaim_spark.commands.args import int_arg, is_word
from streamclaim_spark.commands.streams import parse_ids_deferred
from streamclaim_spark.commands.trimming import policy_named
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import GroupMeta, Need, RefPolicy, StreamMeta, Write, pending_key
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import delete_entries, put_group
from streamclaim_spark.errors import (
    ERR_XACKDEL_IDS_REQUIRED,
    ERR_XACKDEL_NUMIDS,
    ERR_XACKDEL_NUMIDS_MISMATCH,
    SYNTAX,
    ReplyError,
)

# Per-ID replies.
NOT_FOUND = -1  # XACKDEL: not in the group's PEL; XDELEX: no such entry
DELETED = 1
STILL_REFERENCED = 2  # ACKED only


@dataclass(frozen=True)
class AckDel:
    """The parsed tail of XACKDEL (after key and group) or XDELEX (after key); IDs still unparsed."""

    policy: RefPolicy
    id_tokens: tuple[str, ...]


def parse_ackdel_tail(tokens: Sequence[str]) -> AckDel:
    """``[KEEPREF | DELREF | ACKED] IDS numids id ...`` in either order, one policy at most.

    A later IDS block replaces an earlier one, as in Redis' loop; IDs are parsed later, after the key
    and group are looked up (a missing key answers -1 for each ID whatever they are).
    """
    policy: RefPolicy | None = None
    id_tokens: tuple[str, ...] | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        named = policy_named(token)
        if named is not None and policy is None:
            policy = named
            i += 1
        elif is_word(token, "IDS") and i + 1 < len(tokens):
            count = int_arg(tokens[i + 1], ERR_XACKDEL_NUMIDS)
            if count < 1:
                raise ReplyError(ERR_XACKDEL_NUMIDS)
            if count > len(tokens) - i - 2:
                raise ReplyError(ERR_XACKDEL_NUMIDS_MISMATCH)
            id_tokens = tuple(tokens[i + 2 : i + 2 + count])
            i += 2 + count
        else:
            raise ReplyError(SYNTAX)
    if id_tokens is None:
        raise ReplyError(ERR_XACKDEL_IDS_REQUIRED)
    return AckDel(policy or RefPolicy.KEEPREF, id_tokens)


class _References:
    """The groups' references to a set of IDs, as read, and how this command changes them."""

    def __init__(self, ctx: Context, key: str, group_names: Sequence[str], ids: Sequence[StreamId]) -> None:
        self.groups: dict[str, GroupMeta] = {}
        self.pending: dict[str, set[StreamId]] = {}
        for name in group_names:
            group = ctx.snapshot.group(key, name)
            if group is not None:
                self.groups[name] = group
                self.pending[name] = set(ctx.snapshot.pending_by_id(key, name, ids))
        self.removed: dict[str, set[StreamId]] = {name: set() for name in self.groups}

    def remove(self, group: str, entry_id: StreamId) -> bool:
        """Takes ``entry_id`` out of ``group``'s PEL; False when it was not there."""
        if entry_id not in self.pending[group]:
            return False
        self.pending[group].discard(entry_id)
        self.removed[group].add(entry_id)
        return True

    def remove_everywhere(self, entry_id: StreamId) -> None:
        for group in self.groups:
            self.remove(group, entry_id)

    def referenced(self, entry_id: StreamId) -> bool:
        """Redis' streamEntryIsReferenced: unread by some group, or pending in some group."""
        return any(entry_id > g.last_id or entry_id in self.pending[name] for name, g in self.groups.items())

    def write(self, ctx: Context, key: str, guard_all: bool) -> None:
        """Deletes the removed PEL rows; bumps (guards) each changed group's head, or every group's."""
        for name, group in self.groups.items():
            for entry_id in self.removed[name]:
                ctx.plan.add(Write(pending_key(key, name, entry_id), delete=True))
            if self.removed[name] or guard_all:
                put_group(ctx, group, group)


def run_xackdel(ctx: Context, key: str, group_name: str, request: AckDel) -> list[int]:
    """XACKDEL: acknowledges each ID in the group, then deletes it under the policy; one code per ID."""
    ids, invalid = parse_ids_deferred(request.id_tokens)
    ctx.snapshot.prefetch(Need(key, (group_name,), entry_ids=tuple(ids), pending_ids=tuple(ids)))
    meta = ctx.snapshot.stream(key)
    if meta is None or ctx.snapshot.group(key, group_name) is None:
        return [NOT_FOUND] * len(request.id_tokens)
    if invalid is not None:
        raise invalid
    groups = _groups_read(ctx, key, meta.groups, group_name, request.policy, ids)
    refs = _References(ctx, key, groups, ids)
    alive = set(ctx.snapshot.entries_by_id(key, ids))
    deleted: set[StreamId] = set()
    replies = []
    for entry_id in ids:
        if not refs.remove(group_name, entry_id):
            replies.append(NOT_FOUND)
            continue
        if request.policy is RefPolicy.ACKED and refs.referenced(entry_id):
            replies.append(STILL_REFERENCED)
            continue
        if request.policy is RefPolicy.DELREF:
            refs.remove_everywhere(entry_id)
        if entry_id in alive:
            alive.discard(entry_id)
            deleted.add(entry_id)
        replies.append(DELETED)  # also when the entry was already gone: Redis counts it deleted
    _commit(ctx, meta, refs, deleted, request.policy)
    return replies


def run_xdelex(ctx: Context, key: str, request: AckDel) -> list[int]:
    """XDELEX: deletes each ID under the policy; one code per ID."""
    ids, invalid = parse_ids_deferred(request.id_tokens)
    ctx.snapshot.prefetch(Need(key, entry_ids=tuple(ids)))
    meta = ctx.snapshot.stream(key)
    if meta is None:
        return [NOT_FOUND] * len(request.id_tokens)
    if invalid is not None:
        raise invalid
    groups = _groups_read(ctx, key, meta.groups, None, request.policy, ids)
    refs = _References(ctx, key, groups, ids)
    alive = set(ctx.snapshot.entries_by_id(key, ids))
    deleted: set[StreamId] = set()
    replies = []
    for entry_id in ids:
        # Redis checks references before existence: an unread ID that does not exist answers 2.
        if request.policy is RefPolicy.ACKED and refs.referenced(entry_id):
            replies.append(STILL_REFERENCED)
            continue
        if request.policy is RefPolicy.DELREF:
            refs.remove_everywhere(entry_id)  # even when the entry is gone already
        if entry_id in alive:
            alive.discard(entry_id)
            deleted.add(entry_id)
            replies.append(DELETED)
        else:
            replies.append(NOT_FOUND)
    _commit(ctx, meta, refs, deleted, request.policy)
    return replies


def _groups_read(
    ctx: Context, key: str, all_groups: Sequence[str], named: str | None, policy: RefPolicy, ids: Sequence[StreamId]
) -> list[str]:
    """The groups whose PELs the command reads: the named one, or all of them for DELREF and ACKED.

    Their heads and the IDs' PEL rows in them come in one query.
    """
    groups = list(all_groups) if policy is not RefPolicy.KEEPREF else ([named] if named is not None else [])
    if groups:
        ctx.snapshot.prefetch(Need(key, tuple(groups), pending_ids=tuple(ids)))
    return groups


def _commit(ctx: Context, meta: StreamMeta, refs: _References, deleted: set[StreamId], policy: RefPolicy) -> None:
    """Adds the command's writes. A deletion under DELREF or ACKED depends on every group's
    references, so it guards every group's head: a concurrent delivery, claim or ack in any group
    makes this command re-run on a fresh snapshot instead of deciding on a stale one."""
    guard_all = policy is not RefPolicy.KEEPREF and bool(deleted)
    refs.write(ctx, meta.key, guard_all)
    delete_entries(ctx, meta, deleted)

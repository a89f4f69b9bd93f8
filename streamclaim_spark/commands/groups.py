"""Consumer-group administration and introspection: XGROUP and XINFO.

Parsing follows t_stream.c's xgroupCommand/xinfoCommand order: options, then the key, then the
group, then the ID. Replies are built from snapshot values; writes go into the context's plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import functions as F

from streamclaim_spark.commands.args import int_arg, is_token, is_word
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, parse_id
from streamclaim_spark.core.lag import entries_read_reply, lag
from streamclaim_spark.core.model import ConsumerMeta, GroupMeta, StreamMeta, Write, consumer_row, group_head_row
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.replies import OK, entry_reply, flat_record, help_reply
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_frame_for_deletes
from streamclaim_spark.engine.writes import put_group, put_stream_head
from streamclaim_spark.errors import (
    BUSYGROUP,
    ERR_ENTRIESREAD,
    NO_SUCH_KEY,
    XGROUP_KEY_REQUIRED,
    ReplyError,
    nogroup_for_key_name,
    nogroup_key_or_group,
    subcommand_syntax,
)
from streamclaim_spark.state.schema import in_partitions

XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
]
XINFO_HELP = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
]

# Arity of each container subcommand in Redis' command table.


@dataclass(frozen=True)
class XGroup:
    subcommand: str  # lowercase
    typed_subcommand: str
    argv: tuple[str, ...]
    mkstream: bool = False
    entries_read: int = C.ENTRIES_READ_UNKNOWN


def parse_xgroup_options(argv: Sequence[str]) -> XGroup:
    """Option scan of xgroupCommand (everything before the key lookup)."""
    sub = argv[1].lower()
    mkstream = False
    entries_read = C.ENTRIES_READ_UNKNOWN
    if len(argv) >= 4 and sub in ("create", "setid"):
        i = 5
        while i < len(argv):
            if sub == "create" and is_word(argv[i], "MKSTREAM"):
                mkstream = True
                i += 1
            elif is_word(argv[i], "ENTRIESREAD") and i + 1 < len(argv):
                entries_read = int_arg(argv[i + 1])
                if entries_read < 0 and entries_read != C.ENTRIES_READ_UNKNOWN:
                    raise ReplyError(ERR_ENTRIESREAD)
                i += 2
            else:
                raise subcommand_syntax(argv[1], argv[0].upper())
    return XGroup(sub, argv[1], tuple(argv), mkstream, entries_read)


def run_xgroup(ctx: Context, request: XGroup) -> Any:
    argv = request.argv
    sub = request.subcommand
    if sub == "help" and len(argv) == 2:
        return help_reply(XGROUP_HELP)
    key, name = argv[2], argv[3]
    meta = ctx.snapshot.stream(key)
    group = ctx.snapshot.group(key, name) if meta is not None else None
    if not request.mkstream:
        if meta is None:
            raise ReplyError(XGROUP_KEY_REQUIRED)
        if group is None and sub in ("setid", "createconsumer", "delconsumer"):
            raise nogroup_for_key_name(key, name)
    container = argv[0].upper()
    if sub == "create" and 5 <= len(argv) <= 8:
        return _create(ctx, key, name, argv[4], meta, group, request.entries_read)
    if sub == "setid" and len(argv) in (5, 7):
        assert meta is not None and group is not None
        last_id = meta.last_id if is_token(argv[4], "$") else parse_id(argv[4], strict=False)
        put_group(ctx, group, replace(group, last_id=last_id, entries_read=request.entries_read))
        return OK
    if sub == "destroy" and len(argv) == 4:
        if group is None:
            return 0
        assert meta is not None
        destroy_group(ctx, meta, group)
        return 1
    if sub == "createconsumer" and len(argv) == 5:
        assert group is not None
        if ctx.snapshot.consumer(key, name, argv[4]) is not None:
            return 0
        ctx.plan.add(Write(consumer_row(key, name, ConsumerMeta(argv[4], ctx.now), ctx.txn)))
        put_group(ctx, group, group)
        return 1
    if sub == "delconsumer" and len(argv) == 5:
        assert group is not None
        return _delete_consumer(ctx, group, argv[4])
    raise subcommand_syntax(request.typed_subcommand, container)


def _create(
    ctx: Context,
    key: str,
    name: str,
    id_arg: str,
    meta: StreamMeta | None,
    group: GroupMeta | None,
    entries_read: int,
) -> str:
    if is_token(id_arg, "$"):
        last_id = meta.last_id if meta is not None else ZERO_ID
    else:
        last_id = parse_id(id_arg, strict=True)
    if group is not None:
        raise ReplyError(BUSYGROUP)
    stream = meta if meta is not None else StreamMeta(key)
    new_group = GroupMeta(key, name, last_id, entries_read)
    ctx.plan.add(Write(group_head_row(new_group, ctx.txn), guard=True, expect_version=None))
    put_stream_head(ctx, meta, replace(stream, groups=(*stream.groups, name)))
    return OK


def group_or_nogroup(ctx: Context, key: str, name: str) -> GroupMeta:
    """Group ``name`` of stream ``key``; NOGROUP as XPENDING, XCLAIM and XAUTOCLAIM word it when missing."""
    group = ctx.snapshot.existing_group(key, name)
    if group is None:
        raise nogroup_key_or_group(key, name)
    return group


def destroy_group(ctx: Context, meta: StreamMeta, group: GroupMeta) -> None:
    """Removes a group with its consumers and PEL, and its name from the stream head."""
    partition = group_partition(meta.key, group.name)
    ctx.plan.add(Write(group_head_row(group, ctx.txn), delete=True, guard=True, expect_version=group.version))
    rows = ctx.snapshot.frame().where(
        in_partitions(partition) & F.col(C.ROW_KIND).isin(C.KIND_CONSUMER, C.KIND_PENDING)
    )
    ctx.plan.add_frame(source_frame_for_deletes(rows), partition)
    remaining = tuple(g for g in meta.groups if g != group.name)
    # With the last group its PEL goes: no pending row can name a deleted entry any more.
    put_stream_head(ctx, meta, replace(meta, groups=remaining, some_deleted=meta.some_deleted and bool(remaining)))


def _delete_consumer(ctx: Context, group: GroupMeta, consumer: str) -> int:
    key, name = group.key, group.name
    if ctx.snapshot.consumer(key, name, consumer) is None:
        return 0
    partition = group_partition(key, name)
    pending = ctx.snapshot.pending_frame(key, name).where(F.col(C.OWNER) == consumer)
    count = int(pending.count())
    ctx.plan.add(Write(consumer_row(key, name, ConsumerMeta(consumer, 0), ctx.txn), delete=True))
    if count:
        ctx.plan.add_frame(source_frame_for_deletes(pending), partition)
    put_group(ctx, group, group)
    return count


# --- XINFO -----------------------------------------------------------------------------------------------


def run_xinfo(ctx: Context, argv: Sequence[str]) -> Any:
    sub = argv[1].lower()
    if sub == "help":
        return help_reply(XINFO_HELP)
    key = argv[2]
    meta = ctx.snapshot.stream(key)
    if meta is None:
        raise ReplyError(NO_SUCH_KEY)
    if sub == "consumers" and len(argv) == 4:
        group = ctx.snapshot.group(key, argv[3])
        if group is None:
            raise nogroup_for_key_name(key, argv[3])
        return _consumers_reply(ctx, group)
    if sub == "groups" and len(argv) == 3:
        return _groups_reply(ctx, meta)
    if sub == "stream":
        return _stream_reply(ctx, meta, argv[3:], argv)
    raise subcommand_syntax(argv[1], argv[0].upper())


def _consumers_reply(ctx: Context, group: GroupMeta) -> list[Any]:
    counts = ctx.snapshot.pending_counts(group.key, group.name)
    reply = []
    for consumer in ctx.snapshot.consumers(group.key, group.name):
        inactive = -1 if consumer.active_time == C.NEVER_ACTIVE else max(0, ctx.now - consumer.active_time)
        reply.append(
            flat_record(
                [
                    ("name", consumer.name),
                    ("pending", counts.get(consumer.name, 0)),
                    ("idle", max(0, ctx.now - consumer.seen_time)),
                    ("inactive", inactive),
                ]
            )
        )
    return reply


def _groups_reply(ctx: Context, meta: StreamMeta) -> list[Any]:
    groups = ctx.snapshot.groups(meta.key)
    counts = ctx.snapshot.group_counts(meta.key, [g.name for g in groups])
    reply = []
    for group in groups:
        consumers, pending = counts.get(group.name, (0, 0))
        reply.append(
            flat_record(
                [
                    ("name", group.name),
                    ("consumers", consumers),
                    ("pending", pending),
                    ("last-delivered-id", str(group.last_id)),
                    ("entries-read", entries_read_reply(group)),
                    ("lag", lag(meta, group)),
                ]
            )
        )
    return reply


def _radix_tree_estimate(meta: StreamMeta) -> tuple[int, int]:
    """Redis' radix-tree sizes depend on its memory encoding; estimate 100 entries per node."""
    keys = (meta.length + 99) // 100
    return keys, keys + 1 if keys else 1


def _stream_reply(ctx: Context, meta: StreamMeta, options: Sequence[str], argv: Sequence[str]) -> list[Any]:
    full = True
    count = C.XINFO_FULL_DEFAULT_COUNT
    if not options:
        full = False
    elif len(options) in (1, 3):
        if not is_word(options[0], "FULL"):
            raise subcommand_syntax(argv[1], argv[0].upper())
        if len(options) == 3:
            if not is_word(options[1], "COUNT"):
                raise subcommand_syntax(argv[1], argv[0].upper())
            count = int_arg(options[2])
            if count < 0:
                count = C.XINFO_FULL_DEFAULT_COUNT
    else:
        raise subcommand_syntax(argv[1], argv[0].upper())
    keys, nodes = _radix_tree_estimate(meta)
    head: list[tuple[str, Any]] = [
        ("length", meta.length),
        ("radix-tree-keys", keys),
        ("radix-tree-nodes", nodes),
        ("last-generated-id", str(meta.last_id)),
        ("max-deleted-entry-id", str(meta.max_deleted_id)),
        ("entries-added", meta.entries_added),
        ("recorded-first-entry-id", str(meta.first_id)),
    ]
    limit = None if count == 0 else count
    if not full:
        first = ctx.snapshot.entries(meta.key, ZERO_ID, MAX_ID, 1)
        last = ctx.snapshot.entries(meta.key, ZERO_ID, MAX_ID, 1, reverse=True)
        return flat_record(
            [
                *head,
                ("groups", len(meta.groups)),
                ("first-entry", entry_reply(first[0]) if first else None),
                ("last-entry", entry_reply(last[0]) if last else None),
            ]
        )
    entries = ctx.snapshot.entries(meta.key, ZERO_ID, MAX_ID, limit)
    groups = [_full_group_record(ctx, meta, group, limit) for group in ctx.snapshot.groups(meta.key)]
    return flat_record([*head, ("entries", [entry_reply(e) for e in entries]), ("groups", groups)])


def _full_group_record(ctx: Context, meta: StreamMeta, group: GroupMeta, limit: int | None) -> list[Any]:
    pel = ctx.snapshot.pending(meta.key, group.name, ZERO_ID, MAX_ID, limit)
    total = ctx.snapshot.pending_bounds(meta.key, group.name)[0]
    counts = ctx.snapshot.pending_counts(meta.key, group.name)
    consumers = []
    for consumer in ctx.snapshot.consumers(meta.key, group.name):
        own = ctx.snapshot.pending(meta.key, group.name, ZERO_ID, MAX_ID, limit, owner=consumer.name)
        consumers.append(
            flat_record(
                [
                    ("name", consumer.name),
                    ("seen-time", consumer.seen_time),
                    ("active-time", consumer.active_time),
                    ("pel-count", counts.get(consumer.name, 0)),
                    ("pending", [[str(p.id), p.delivery_time, p.delivery_count] for p in own]),
                ]
            )
        )
    return flat_record(
        [
            ("name", group.name),
            ("last-delivered-id", str(group.last_id)),
            ("entries-read", entries_read_reply(group)),
            ("lag", lag(meta, group)),
            ("pel-count", total),
            # An XNACKed entry: no owner, delivery time 0 (Redis 8.8).
            ("pending", [[str(p.id), p.owner or "", max(p.delivery_time, 0), p.delivery_count] for p in pel]),
            ("consumers", consumers),
        ]
    )

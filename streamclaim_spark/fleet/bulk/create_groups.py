"""Bulk XGROUP CREATE: many consumer groups created in one commit, all or none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from streamclaim_spark.commands.args import is_token
from streamclaim_spark.core.ids import parse_id
from streamclaim_spark.core.model import GroupMeta, Need, StreamMeta, Write, group_head_row
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.writes import put_stream_head
from streamclaim_spark.errors import BUSYGROUP, XGROUP_KEY_REQUIRED, InvalidArgumentError, ReplyError

if TYPE_CHECKING:
    from streamclaim_spark.engine.runner import Runner


@dataclass(frozen=True)
class NewGroup:
    """One group for ``create_groups``: XGROUP CREATE stream group id [MKSTREAM] (id: ``$`` or an ID)."""

    stream: str
    group: str
    id: str = "$"
    mkstream: bool = False


def create_groups(runner: Runner, groups: DataFrame | Sequence[NewGroup | tuple[Any, ...]]) -> int:
    """Creates many consumer groups in one commit, with XGROUP CREATE's semantics and errors.

    All or nothing: if any group cannot be created (its stream is missing without MKSTREAM, it exists
    already, its ID is invalid), the error names it and nothing is created. Returns how many were.

    Args:
        runner: The store's command runner (StreamStore.runner).
        groups: ``NewGroup``s or (stream, group[, id[, mkstream]]) tuples, or a DataFrame with columns
            ``stream``, ``group`` and optionally ``id`` (default ``$``) and ``mkstream`` (default false).
    """
    wanted = _new_groups(groups)
    seen: set[tuple[str, str]] = set()
    for position, new in enumerate(wanted):
        if (new.stream, new.group) in seen:
            raise InvalidArgumentError(f"groups[{position}]: ({new.stream!r}, {new.group!r}) is named twice")
        seen.add((new.stream, new.group))
        if not is_token(new.id, "$"):
            try:
                parse_id(new.id, strict=True)
            except ReplyError as error:
                raise ReplyError(f"{error} (groups[{position}]: {new.stream!r}, {new.group!r})") from None
    by_stream: dict[str, list[tuple[int, NewGroup]]] = {}
    for position, new in enumerate(wanted):
        by_stream.setdefault(new.stream, []).append((position, new))

    def decide(ctx: Context) -> int:
        ctx.snapshot.prefetch(*(Need(key, tuple(n.group for _, n in news)) for key, news in by_stream.items()))
        for key, news in by_stream.items():
            meta = ctx.snapshot.stream(key)
            stream = meta if meta is not None else StreamMeta(key)
            for position, new in news:
                where = f" (groups[{position}]: {new.stream!r}, {new.group!r})"
                if meta is None and not new.mkstream:
                    raise ReplyError(XGROUP_KEY_REQUIRED + where)
                if ctx.snapshot.group(key, new.group) is not None:
                    raise ReplyError(BUSYGROUP + where)
                last_id = stream.last_id if is_token(new.id, "$") else parse_id(new.id, strict=True)
                head = GroupMeta(key, new.group, last_id)
                ctx.plan.add(Write(group_head_row(head, ctx.txn), guard=True, expect_version=None))
            put_stream_head(ctx, meta, replace(stream, groups=(*stream.groups, *(n.group for _, n in news))))
        return len(wanted)

    return runner.transact("BULK XGROUP CREATE", decide) if wanted else 0


def _new_groups(groups: DataFrame | Sequence[NewGroup | tuple[Any, ...]]) -> list[NewGroup]:
    if isinstance(groups, DataFrame):
        missing = [name for name in ("stream", "group") if name not in groups.columns]
        if missing:
            raise InvalidArgumentError(f"groups: the DataFrame lacks column(s) {missing} (columns: {groups.columns})")
        wanted = []
        for row in groups.collect():
            values = row.asDict()
            wanted.append(
                NewGroup(
                    str(values["stream"]),
                    str(values["group"]),
                    str(values.get("id") or "$"),
                    bool(values.get("mkstream") or False),
                )
            )
        return wanted
    return [item if isinstance(item, NewGroup) else NewGroup(*item) for item in groups]

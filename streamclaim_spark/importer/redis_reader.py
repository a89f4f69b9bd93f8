"""Reading a live Redis's streams, groups, consumers and PELs with redis-py, page by page, never writing.

A stream whose whole state fits one page is read by one ``XINFO STREAM key FULL COUNT page``: one
command, which Redis runs atomically, so the copy is the stream at one moment, delivery times exact. A
bigger stream is read in pages (``XRANGE`` entries, ``XPENDING`` PEL rows beyond the first page) and
checked afterwards: when its heads moved while it was read (appends, deliveries, claims, acks) it is read
again, and after ``MAX_READS`` reads it is copied as read and reported as changed (docs/IMPORT.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import StreamMeta
from streamclaim_spark.errors import ImportRefusedError

# Replies these commands give are parsed here, from RESP2's plain arrays, not by redis-py's callbacks.
RAW_COMMANDS = ("XINFO STREAM", "XRANGE", "XPENDING", "TIME", "TYPE")
MAX_READS = 3


# A PEL row as read: entry ID, owner, delivery time (Unix ms) and delivery count.
PendingRow = tuple[StreamId, str, int, int]


@dataclass(frozen=True)
class CopiedConsumer:
    """A consumer as Redis reports it; ``active_time`` is ``seen_time`` on servers before 7.2 (no active-time)."""

    name: str
    seen_time: int
    active_time: int


@dataclass(frozen=True)
class CopiedGroup:
    """A group's head and consumers; its PEL rows go to the sink as they are read."""

    name: str
    last_id: StreamId
    entries_read: int
    consumers: tuple[CopiedConsumer, ...]
    pel_count: int


@dataclass
class StreamCopy:
    """What one stream read produced: the head as Redis reports it, its groups, and what went to the sink.

    ``mode`` is "append" (entries after the store's last ID), "diff" (also live IDs up to it, as Redis
    deleted or trimmed some) or "full" (the whole stream: new to the store, or recreated in Redis).

    A diff reads only the live IDs from ``live_low`` to ``live_high``: Redis trims from the front, so
    every stored entry below its first live ID (``live_low``; None when none is live) is gone, and
    XDEL (XACKDEL, XDELEX) raises ``max-deleted-entry-id``, so every stored entry above it is live
    (``live_high`` is the smaller of it and the store's last ID). Between them a stored entry is live
    when among the live IDs read.
    """

    meta: StreamMeta
    groups: tuple[CopiedGroup, ...]
    mode: str
    entries: int = 0
    live_ids: int = 0
    pel_rows: int = 0
    reads: int = 1
    changed: bool = False
    seconds: float = 0.0
    live_low: StreamId | None = None
    live_high: StreamId | None = None


class Sink(Protocol):
    """Where pages go as they are read (staging.Staging); ``discard`` forgets one stream's pages."""

    def entries(self, key: str, page: Sequence[tuple[StreamId, list[bytes]]]) -> None: ...
    def live_ids(self, key: str, page: Sequence[StreamId]) -> None: ...
    def pending(self, key: str, group: str, page: Sequence[PendingRow]) -> None: ...
    def discard(self, key: str) -> None: ...


def raw_replies(client: Any) -> Any:
    """``client`` with the replies of the commands read here left as Redis sent them."""
    for command in RAW_COMMANDS:
        client.set_response_callback(command, lambda response, **_: response)
    return client


def text(value: bytes, what: str) -> str:
    """A key, group or consumer name as the store keeps it (text); Redis' bytes must be UTF-8."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportRefusedError(
            f"{what} {value!r} is not UTF-8 text; the store keeps names as text: import the other streams "
            "with --streams patterns that leave it out"
        ) from None


def stream_keys(client: Any, patterns: Sequence[str], scan_count: int = 1000) -> list[str]:
    """The stream keys matching ``patterns`` (SCAN ... MATCH ... TYPE stream), sorted and distinct.

    A pattern without glob characters that names an existing key of another type is refused, as is a
    pattern list that matches no stream (the message says how many streams the server has).
    """
    keys: set[str] = set()
    for pattern in patterns:
        cursor = 0
        while True:
            cursor, found = client.scan(cursor, match=pattern, count=scan_count, _type="stream")
            keys.update(text(key, "stream key") for key in found)
            if cursor == 0:
                break
        if not any(char in pattern for char in "*?[") and pattern not in keys:
            kind = _type_name(client.execute_command("TYPE", pattern))
            if kind != "none":
                raise ImportRefusedError(f"key {pattern!r} holds a {kind}, not a stream: only streams are imported")
    if not keys:
        total = sum(1 for _ in client.scan_iter(count=scan_count, _type="stream"))
        raise ImportRefusedError(
            f"no stream matches --streams {' '.join(patterns)} (the server has {total} stream(s)); "
            "give patterns as SCAN MATCH takes them, e.g. --streams 'orders:*'"
        )
    return sorted(keys)


def _type_name(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def read_stream(client: Any, key: str, known: StreamMeta | None, sink: Sink, page: int) -> StreamCopy | None:
    """Reads stream ``key`` into ``sink``; ``known`` is its head in the store (None: not there yet).

    Returns None when the key is gone (deleted since SCAN). Re-reads a paged stream that changed meanwhile.
    """
    started = time.monotonic()
    for attempt in range(1, MAX_READS + 1):
        read = _read_once(client, key, known, sink, page)
        if read is None:
            return None
        copy, before = read
        copy.reads = attempt
        # An atomic read has no "before"; a paged one is kept when the stream did not move meanwhile.
        if before is None or _fingerprint(_full_info(client, key, 1)) == before:
            break
        if attempt == MAX_READS:
            copy.changed = True
            break
        sink.discard(key)
    copy.seconds = time.monotonic() - started
    return copy


def _mode(known: StreamMeta | None, meta: StreamMeta) -> str:
    if known is None or known.last_id > meta.last_id or known.entries_added > meta.entries_added:
        return "full"
    return "append"


def _full_info(client: Any, key: str, count: int) -> dict[bytes, Any] | None:
    try:
        info = client.execute_command("XINFO", "STREAM", key, "FULL", "COUNT", count)
    except Exception as error:
        if "no such key" in str(error):
            return None
        raise
    return _pairs(info)


def _read_once(client: Any, key: str, known: StreamMeta | None, sink: Sink, page: int) -> tuple[StreamCopy, Any] | None:
    """One read of the stream: its copy, and the fingerprint to check it by (None: read atomically)."""
    info = _full_info(client, key, page)
    if info is None:
        return None
    meta = StreamMeta(
        key,
        last_id=_id(info[b"last-generated-id"]),
        entries_added=int(info[b"entries-added"]),
        length=int(info[b"length"]),
        first_id=_id(info[b"recorded-first-entry-id"]),
        max_deleted_id=_id(info[b"max-deleted-entry-id"]),
    )
    groups_info = [_pairs(group) for group in info[b"groups"]]
    groups = tuple(_group(group) for group in groups_info)
    meta = replace(meta, groups=tuple(g.name for g in groups))
    copy = StreamCopy(meta, groups, _mode(known, meta))
    first_page = [(_id(entry_id), pairs) for entry_id, pairs in info[b"entries"]]
    atomic = meta.length <= page and all(group.pel_count <= page for group in groups)
    # Entries after the store's last ID are new; when fewer than Redis' length tells, some older ones were
    # deleted or trimmed, and every live ID up to the store's last one is read too ("diff").
    after = known.last_id if copy.mode == "append" and known is not None else None
    if atomic:
        copy.entries = _send_entries(sink, key, [e for e in first_page if after is None or e[0] > after])
    else:
        for entries in _entry_pages(client, key, "-" if after is None else f"({after}", "+", page):
            copy.entries += _send_entries(sink, key, entries)
    if after is not None and known is not None and meta.length - copy.entries != known.length:
        copy.mode = "diff"
        copy.live_low = first_page[0][0] if first_page else None
        copy.live_high = min(after, meta.max_deleted_id)
        low, high = copy.live_low, copy.live_high
        if atomic:
            copy.live_ids = _send_live_ids(
                sink, key, [e[0] for e in first_page if low is not None and low <= e[0] <= high]
            )
        elif low is not None and low <= high:
            for entries in _entry_pages(client, key, str(low), str(high), page):
                copy.live_ids += _send_live_ids(sink, key, [entry_id for entry_id, _ in entries])
    for group, group_info in zip(groups, groups_info, strict=True):
        rows = [_exact_pending(item) for item in group_info[b"pending"]]
        sink.pending(key, group.name, rows)
        copy.pel_rows += len(rows)
        if group.pel_count > len(rows) and rows:
            for paged in _pending_pages(client, key, group.name, rows[-1], page):
                sink.pending(key, group.name, paged)
                copy.pel_rows += len(paged)
    return copy, None if atomic else _fingerprint(info)


def _send_entries(sink: Sink, key: str, entries: list[tuple[StreamId, list[bytes]]]) -> int:
    if entries:
        sink.entries(key, entries)
    return len(entries)


def _send_live_ids(sink: Sink, key: str, ids: list[StreamId]) -> int:
    if ids:
        sink.live_ids(key, ids)
    return len(ids)


def _group(info: dict[bytes, Any]) -> CopiedGroup:
    entries_read = info.get(b"entries-read")
    consumers = []
    for raw in info[b"consumers"]:
        consumer = _pairs(raw)
        seen = int(consumer[b"seen-time"])
        active = consumer.get(b"active-time")
        consumers.append(
            CopiedConsumer(text(consumer[b"name"], "consumer"), seen, seen if active is None else int(active))
        )
    return CopiedGroup(
        name=text(info[b"name"], "group"),
        last_id=_id(info[b"last-delivered-id"]),
        entries_read=-1 if entries_read is None else int(entries_read),
        consumers=tuple(consumers),
        pel_count=int(info[b"pel-count"]),
    )


def _exact_pending(item: Sequence[Any]) -> PendingRow:
    entry_id, owner, delivery_time, count = item
    return _id(entry_id), text(owner, "consumer"), int(delivery_time), int(count)


def _entry_pages(client: Any, key: str, low: str, high: str, page: int) -> Iterator[list[tuple[StreamId, list[bytes]]]]:
    while True:
        reply = client.execute_command("XRANGE", key, low, high, "COUNT", page)
        entries = [(_id(entry_id), pairs) for entry_id, pairs in reply]
        if entries:
            yield entries
        if len(entries) < page:
            return
        low = f"({entries[-1][0]}"


def _pending_pages(client: Any, key: str, group: str, anchor: PendingRow, page: int) -> Iterator[list[PendingRow]]:
    """PEL rows after ``anchor``, a row whose delivery time is known exactly. XPENDING gives idle times
    against its own clock, so each page starts at the previous page's last row (inclusive): that row's
    known time plus its idle is XPENDING's clock, and every delivery time of the page follows exactly.
    Should the anchor have left the PEL meanwhile (the stream is then read again), TIME read in the same
    MULTI stands in, within a millisecond."""
    while True:
        pipe = client.pipeline(transaction=True)
        pipe.execute_command("TIME")
        pipe.execute_command("XPENDING", key, group, str(anchor[0]), "+", page + 1)
        now, reply = pipe.execute()
        now_ms = _ms(now)
        if reply and _id(reply[0][0]) == anchor[0]:
            now_ms = anchor[2] + int(reply[0][2])
            reply = reply[1:]
        rows = [
            (_id(entry_id), text(owner, "consumer"), now_ms - int(idle), int(count))
            for entry_id, owner, idle, count in reply
        ]
        if rows:
            yield rows
        if len(rows) < page:
            return
        anchor = rows[-1]


def _ms(time_reply: Sequence[bytes]) -> int:
    return int(time_reply[0]) * 1000 + int(time_reply[1]) // 1000


_STREAM_MOVES = (b"length", b"last-generated-id", b"entries-added", b"max-deleted-entry-id")
_GROUP_MOVES = (b"name", b"last-delivered-id", b"entries-read", b"pel-count")
_CONSUMER_MOVES = (b"name", b"seen-time", b"active-time", b"pel-count")


def _fingerprint(info: dict[bytes, Any] | None) -> Any:
    """What moves when a stream, its groups or consumers change: compared before and after a paged read."""
    if info is None:
        return None
    head = tuple(info[name] for name in _STREAM_MOVES)
    groups = []
    for raw in info[b"groups"]:
        group = _pairs(raw)
        consumers = tuple(tuple(_pairs(c).get(k) for k in _CONSUMER_MOVES) for c in group[b"consumers"])
        groups.append((*(group.get(k) for k in _GROUP_MOVES), consumers))
    return head, tuple(groups)


def _id(value: bytes) -> StreamId:
    # Redis replies with canonical "ms-seq" IDs: split them rather than parse arguments (ids.parse_id).
    ms, _, seq = value.partition(b"-")
    return StreamId(int(ms), int(seq))


def _pairs(reply: Iterable[Any]) -> dict[bytes, Any]:
    items = list(reply)
    return {items[i]: items[i + 1] for i in range(0, len(items), 2)}

"""Shapes typed results into the values a RESP2 client without reply parsing returns.

Bulk replies are ``str``, status replies ``Status`` (a ``str`` that says it came as ``+OK``, not ``$2 OK``),
integers ``int``, arrays ``list``, and both nil kinds ``None``. Entries' field names and values are the
one kind of ``bytes`` in a reply: exactly as stored. ``decoded`` turns them into ``str``, as redis-py's
``decode_responses=True`` does; ``encoded`` turns every other text into ``bytes``, as redis-py gives
every bulk and status reply with ``decode_responses=False``. The server frames the reply as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamclaim_spark.core.model import Entry
from streamclaim_spark.errors import PayloadNotTextError


class Status(str):
    """A status (simple string) reply such as ``OK``: equal to its text, framed ``+OK`` on the wire."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Status({str.__repr__(self)})"


OK = Status("OK")


def help_reply(lines: Iterable[str]) -> list[Any]:
    """A HELP reply: Redis sends each line as a status reply."""
    return [Status(line) for line in lines]


def entry_reply(entry: Entry | None, entry_id: Any = None) -> list[Any]:
    """``[id, [field, value, ...]]``; a deleted entry still pending is ``[id, None]``."""
    if entry is None:
        return [str(entry_id), None]
    return [str(entry.id), entry.flat()]


def decoded(reply: Any, entry_id: str | None = None) -> Any:
    """``reply`` with every payload (``bytes``) decoded as UTF-8; a payload that is not UTF-8 raises
    ``PayloadNotTextError`` naming its entry (the command itself has run: what it delivered is pending)."""
    if isinstance(reply, bytes):
        return _decoded_payload(reply, entry_id)
    if not isinstance(reply, list):
        return reply
    if len(reply) >= 2 and isinstance(reply[0], str) and _holds_payload(reply[1]):
        # An entry: [id, [field, value, ...], ...]
        return [reply[0], [decoded(item, reply[0]) for item in reply[1]], *reply[2:]]
    return [decoded(item, entry_id) for item in reply]


def encoded(reply: Any) -> Any:
    """``reply`` with every text (IDs, names, status replies) as ``bytes`` and payloads unchanged: what
    redis-py returns with ``decode_responses=False``. A name given as bytes that are not UTF-8 comes back
    as those bytes (arguments are decoded with ``surrogateescape``, commands.args.decode_argv)."""
    if isinstance(reply, str):
        return reply.encode("utf-8", "surrogateescape")
    if isinstance(reply, list):
        return [encoded(item) for item in reply]
    return reply


def _holds_payload(item: Any) -> bool:
    return isinstance(item, list) and any(isinstance(value, bytes) for value in item)


def _decoded_payload(payload: bytes, entry_id: str | None) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        shown = repr(payload[:16]) + ("..." if len(payload) > 16 else "")
        raise PayloadNotTextError(
            f"entry {entry_id or '(unknown)'} holds a field name or value that is not valid UTF-8 ({shown}); "
            "open the store with decode_responses=False, or pass it to execute, to get bytes replies"
        ) from None


def entries_reply(entries: Iterable[Entry]) -> list[Any]:
    return [entry_reply(entry) for entry in entries]


def flat_record(pairs: Iterable[tuple[str, Any]]) -> list[Any]:
    """XINFO records: RESP2 flat arrays ``[k1, v1, k2, v2, ...]``."""
    return [item for pair in pairs for item in pair]

"""Shapes typed results into the values a RESP2 client without reply parsing returns.

Bulk replies are ``str``, status replies ``Status`` (a ``str`` that says it came as ``+OK``, not ``$2 OK``),
integers ``int``, arrays ``list``, and both nil kinds ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamclaim_spark.model import Entry


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


def entries_reply(entries: Iterable[Entry]) -> list[Any]:
    return [entry_reply(entry) for entry in entries]


def flat_record(pairs: Iterable[tuple[str, Any]]) -> list[Any]:
    """XINFO records: RESP2 flat arrays ``[k1, v1, k2, v2, ...]``."""
    return [item for pair in pairs for item in pair]

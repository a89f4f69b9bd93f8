"""Shapes typed results into the values a RESP2 client without reply parsing returns.

Status and bulk replies are ``str``, integers ``int``, arrays ``list``, and both nil kinds ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamclaim_spark.model import Entry


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

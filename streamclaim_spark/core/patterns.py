"""Selection of streams and groups by name or glob pattern, as every batch path and the streaming source take it.

A pattern is matched case-sensitively with ``fnmatch`` rules (``*``, ``?``, ``[...]``), as Redis' SCAN
MATCH does; a name without those characters matches only itself.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable


def is_pattern(name: str) -> bool:
    """True for a glob pattern (``*``, ``?``, ``[``) rather than one stream's name."""
    return any(char in name for char in "*?[")


def matches(name: str, patterns: Iterable[str]) -> bool:
    """True when some pattern (or exact name) in ``patterns`` matches ``name``."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def matching(patterns: Iterable[str], names: Iterable[str]) -> list[str]:
    """The ``names`` that some pattern (or exact name) in ``patterns`` matches, sorted."""
    wanted = list(patterns)
    return sorted(name for name in set(names) if matches(name, wanted))

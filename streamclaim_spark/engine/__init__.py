"""The engine: a command as one transaction (snapshot, decide, one guarded MERGE, retry on a lost race)."""

from __future__ import annotations

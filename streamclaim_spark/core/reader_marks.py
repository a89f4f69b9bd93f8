"""The mark a Structured Streaming query's micro-batch leaves in its commit, so maintenance can find it.

Each micro-batch the ``streamclaim`` source plans is one Delta commit, and the batch's offset records that
commit's version: a restart reads it by time travel. The commit's user metadata says whose batch it was
(``STREAM BATCH {"group": ..., "consumer": ...} <txn>``), so ``streamclaim-maintain`` can tell, from the
table's history, which queries would lose the version they restart from. Nothing here touches Spark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

BATCH_OPERATION = "STREAM BATCH"


@dataclass(frozen=True)
class ReaderMark:
    """Who planned a micro-batch: the query's group and consumer."""

    group: str
    consumer: str

    def operation(self) -> str:
        """The batch commit's operation (the runner appends the commit's token)."""
        return f"{BATCH_OPERATION} {json.dumps({'group': self.group, 'consumer': self.consumer})}"

    def describe(self) -> str:
        return f"the streaming query reading group {self.group!r} as consumer {self.consumer!r}"


def reader_mark(user_metadata: str | None) -> ReaderMark | None:
    """The mark in a commit's user metadata (operation, then the commit's token), or None for any other
    commit (and for batches committed before the mark existed, whose metadata is ``STREAM BATCH <txn>``)."""
    if not user_metadata:
        return None
    return operation_mark(user_metadata.rsplit(" ", 1)[0])


def operation_mark(operation: str) -> ReaderMark | None:
    """The mark an operation (``ReaderMark.operation``) spells, or None for any other operation."""
    if not operation.startswith(BATCH_OPERATION + " {"):
        return None
    try:
        found = json.loads(operation[len(BATCH_OPERATION) + 1 :])
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    group, consumer = found.get("group"), found.get("consumer")
    return ReaderMark(group, consumer) if isinstance(group, str) and isinstance(consumer, str) else None

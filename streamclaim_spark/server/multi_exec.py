"""MULTI, EXEC, DISCARD, WATCH and UNWATCH for one server connection, as redis-server 7.0 answers them.

``MULTI`` opens a queue: every later command except EXEC, DISCARD, MULTI, WATCH and QUIT is checked
as Redis checks it before queuing (a known name, its arity, AUTH) and answered ``QUEUED``; a command
that fails those checks is answered with its error and dooms the transaction (``EXECABORT`` at EXEC).
``EXEC`` runs the queue as one batch (batch.run_batch): in order, with no other client's command
between, each command's runtime error in its place, and one Delta commit. ``WATCH`` remembers each
key's signature (batch.watch_signature); EXEC replies a null array and runs nothing when one changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamclaim_spark.core.replies import Status
from streamclaim_spark.engine.batch import Signature, watch_signatures
from streamclaim_spark.errors import (
    DISCARD_WITHOUT_MULTI,
    EXEC_WITHOUT_MULTI,
    MULTI_NESTED,
    WATCH_INSIDE_MULTI,
    ReplyError,
)
from streamclaim_spark.state.snapshot import Snapshot

QUEUED = Status("QUEUED")
# Commands that run at once inside MULTI instead of being queued (Redis' processCommand).
IMMEDIATE = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})


@dataclass
class Queued:
    """What EXEC takes from a connection: the queued requests, whether queuing failed, the watches."""

    requests: list[list[bytes]]
    failed: bool
    watched: dict[str, Signature]


@dataclass
class Transaction:
    """One connection's MULTI queue (None outside MULTI) and WATCHed keys."""

    requests: list[list[bytes]] | None = None
    failed: bool = False
    watched: dict[str, Signature] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.requests is not None

    def begin(self) -> None:
        """MULTI: a nested MULTI is an error that leaves the transaction as it was."""
        if self.requests is not None:
            raise ReplyError(MULTI_NESTED)
        self.requests = []

    def queue(self, request: list[bytes]) -> Status:
        assert self.requests is not None
        self.requests.append(request)
        return QUEUED

    def doom(self) -> None:
        """A command was refused while queuing: EXEC will discard everything."""
        self.failed = True

    def discard(self) -> None:
        """DISCARD: drops the queue and every WATCH."""
        if self.requests is None:
            raise ReplyError(DISCARD_WITHOUT_MULTI)
        self.reset()

    def watch(self, snapshot: Snapshot, keys: list[str]) -> None:
        """WATCH: remembers each key's signature as of ``snapshot`` (a key watched twice keeps the first)."""
        if self.requests is not None:
            raise ReplyError(WATCH_INSIDE_MULTI)
        new = [key for key in dict.fromkeys(keys) if key not in self.watched]
        if new:
            self.watched.update(watch_signatures(snapshot, new))

    def unwatch(self) -> None:
        self.watched = {}

    def take(self) -> Queued:
        """EXEC: the queue, its fate and the watches; the connection leaves MULTI and forgets its watches."""
        if self.requests is None:
            raise ReplyError(EXEC_WITHOUT_MULTI)
        taken = Queued(self.requests, self.failed, self.watched)
        self.reset()
        return taken

    def reset(self) -> None:
        self.requests = None
        self.failed = False
        self.watched = {}

"""Many commands, one commit: runs Redis commands in order on one snapshot and commits them together.

Each command runs through the same handler as ``StreamStore.execute`` (commands.dispatch), against a
``BatchSnapshot`` that shows the writes of the commands before it, exactly as Redis runs a MULTI/EXEC
block one command after another. A command's Redis error is its reply and the others run on, as in EXEC.
Then one guarded MERGE commits every row the batch changed (transaction.commit_plan): one Delta commit
for the whole batch, or none when nothing changed. A lost commit race re-runs the whole batch on the new
snapshot, so its replies always describe the state it committed on top of (docs/DESIGN.md, "Batches").

``WATCH`` is a condition on streams' heads: a batch run with ``watched`` replies nothing (``aborted``)
when one of those streams' entries changed since the signatures were taken, and otherwise commits only
if the heads are still as it read them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from streamclaim_spark.batch_state import DEFAULT_LOAD_LIMIT, BatchSnapshot
from streamclaim_spark.context import Context
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.model import StreamMeta
from streamclaim_spark.runner import Runner
from streamclaim_spark.snapshot import Need, Snapshot
from streamclaim_spark.transaction import (
    NothingCommittedError,
    RetryPolicy,
    commit_plan,
    latest_version,
    run_with_retries,
)

T = TypeVar("T")
# commands.dispatch: runs one argv through its handler (the engine does not import the commands).
Dispatch = Callable[[Runner, Sequence[str], Callable[[], bool]], Any]
# What WATCH remembers of a stream: None when absent, else what changes when its entries change.
Signature = tuple[int, int] | None


def watch_signature(meta: StreamMeta | None) -> Signature:
    """What WATCH compares: whether the stream exists, its lifetime appends and its length.

    Redis 7.0 aborts EXEC when a watched stream gained, lost or trimmed entries, or was created or
    deleted; group commands (XREADGROUP, XACK, XCLAIM, XGROUP) and XSETID do not count, and neither do
    they change these two numbers.
    """
    return None if meta is None else (meta.entries_added, meta.length)


def watch_signatures(snapshot: Snapshot, keys: Sequence[str]) -> dict[str, Signature]:
    """The WATCH signatures of ``keys`` at ``snapshot`` (one query for all their heads)."""
    snapshot.prefetch(*(Need(key) for key in dict.fromkeys(keys)))
    return {key: watch_signature(snapshot.stream(key)) for key in keys}


@dataclass(frozen=True)
class BatchResult:
    """What a batch did: each command's reply (a ``ReplyError`` for an error) in order, or
    ``aborted`` (no replies, nothing run) when a watched stream had changed.

    ``version`` is the Delta version the batch committed (None: it changed nothing); ``attempts``
    counts runs of the whole batch (more than 1 after lost commit races).
    """

    replies: list[Any]
    version: int | None
    attempts: int
    aborted: bool = False


class BatchRunner(Runner):
    """What a command handler runs through inside a batch: every ``transact`` decides on the batch's
    snapshot and plays its plan into it instead of committing, and blocking reads do not block."""

    def __init__(self, runner: Runner, state: BatchSnapshot, now: int, txn: str) -> None:
        super().__init__(runner.spark, runner.state_path, lambda: now, runner.retry_policy, runner.rows_per_file)
        self._outer = runner
        self.state = state
        self.now = now
        self.txn = txn

    def session(self) -> Any:
        return self._outer.session()

    def snapshot(self) -> Snapshot:
        return self.state

    def transact(self, operation: str, decide: Callable[[Context], T], policy: RetryPolicy | None = None) -> T:
        context = Context(self.state, now=self.now, txn=self.txn)
        result = decide(context)
        self.state.apply(context.plan)
        return result


def _never_block() -> bool:
    """A blocking read inside a batch replies with what is there now (nil when nothing), as in MULTI."""
    return True


def run_batch(
    runner: Runner,
    commands: Sequence[Sequence[str]],
    dispatch: Dispatch,
    *,
    watched: Mapping[str, Signature] | None = None,
    load_limit: int = DEFAULT_LOAD_LIMIT,
    operation: str = "BATCH",
) -> BatchResult:
    """Runs ``commands`` (argv lists) in order through ``dispatch`` (commands.dispatch) and commits them once.

    Errors that are not Redis errors (a bug, a failed Spark job) abort the whole batch and propagate:
    nothing of it commits.
    """
    session = runner.session()

    def attempt(_: int) -> BatchResult:
        state = BatchSnapshot(session, runner.state_path, latest_version(session, runner.state_path), load_limit)
        if watched:
            state.guard_stream_heads(watched)
            if watch_signatures(state, list(watched)) != dict(watched):
                return BatchResult([], None, 0, aborted=True)
        txn = uuid.uuid4().hex
        batch_runner = BatchRunner(runner, state, runner.clock(), txn)
        replies: list[Any] = []
        for argv in commands:
            try:
                replies.append(dispatch(batch_runner, argv, _never_block))
            except ReplyError as error:
                replies.append(error)
        plan = state.plan(txn)
        version = None
        if not plan.empty:
            name = f"{operation} of {len(commands)} {txn}"
            try:
                version = commit_plan(session, runner.state_path, plan, name, rows_per_file=runner.rows_per_file)
            except NothingCommittedError:
                version = None  # the batch's writes cancelled out (e.g. a stream created and deleted)
        return BatchResult(replies, version, 0)

    result, attempts = run_with_retries(attempt, runner.retry_policy, operation)
    return BatchResult(result.replies, result.version, attempts, result.aborted)

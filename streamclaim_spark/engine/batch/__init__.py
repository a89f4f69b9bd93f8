"""Many commands, one commit: runs Redis commands in order on one snapshot and commits them together.

Each command runs through the same handler as ``StreamStore.execute`` (commands.dispatch), against a
``BatchSnapshot`` that shows the writes of the commands before it, exactly as Redis runs a MULTI/EXEC
block one command after another. A command's Redis error is its reply and the others run on, as in EXEC.
Then one guarded MERGE commits every row the batch changed (transaction.commit_plan): one Delta commit
for the whole batch, or none when nothing changed. A lost commit race re-runs the whole batch on the new
snapshot, so its replies always describe the state it committed on top of (docs/DESIGN.md, "Batches").

A batch is made of units (``Unit``): commands that run together with nothing between them. A unit may
carry WATCH signatures: it replies nothing (``aborted``) when one of those streams' entries changed since
they were taken (by anyone, an earlier unit of the batch included), and otherwise the batch commits only
if those heads are still as it read them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from streamclaim_spark.core.model import Need, StreamMeta
from streamclaim_spark.engine.batch.state import DEFAULT_LOAD_LIMIT, BatchSnapshot
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.retries import RetryPolicy, run_with_retries
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.engine.transaction import commit_plan
from streamclaim_spark.errors import NothingCommittedError, ReplyError
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.snapshot import Snapshot

T = TypeVar("T")
# How long a partition found too big to load is read through Spark without probing it again (a probe
# reads load_limit rows; a stream or PEL rarely shrinks below the limit within a minute).
BIG_PARTITION_MEMORY_S = 60.0
# Rows a batch loads per command it runs, at most (and at most its ``load_limit``).
LOAD_ROWS_PER_COMMAND = 100
# commands.dispatch: runs one argv through its handler (the engine does not import the commands).
Dispatch = Callable[[Runner, Sequence[str], Callable[[], bool]], Any]
# commands.touched: the streams and groups a command will read, guessed from its argv.
Touched = Callable[[Sequence[str]], list[tuple[str, tuple[str, ...]]]]
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
class Unit:
    """Commands that run together, in order, with nothing between them (a pipeline, a MULTI/EXEC, or a
    connection's pipelined commands in a group commit); ``watched``: WATCH signatures that must hold."""

    commands: Sequence[Sequence[str]]
    watched: Mapping[str, Signature] | None = None


@dataclass(frozen=True)
class UnitResult:
    """Each command's reply (a ``ReplyError`` for an error) in order, or ``aborted`` (no replies,
    nothing run) when a watched stream had changed."""

    replies: list[Any]
    aborted: bool = False


@dataclass(frozen=True)
class BatchResult:
    """What a batch did: one ``UnitResult`` per unit, in order.

    ``version`` is the Delta version the batch committed (None: it changed nothing); ``attempts``
    counts runs of the whole batch (more than 1 after lost commit races).
    """

    units: list[UnitResult]
    version: int | None
    attempts: int

    @property
    def replies(self) -> list[Any]:
        """The replies of a batch of one unit."""
        (unit,) = self.units
        return unit.replies

    @property
    def aborted(self) -> bool:
        (unit,) = self.units
        return unit.aborted


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
    units: Sequence[Unit],
    dispatch: Dispatch,
    *,
    touched: Touched | None = None,
    load_limit: int = DEFAULT_LOAD_LIMIT,
    operation: str = "BATCH",
) -> BatchResult:
    """Runs the units' commands (argv lists) in order through ``dispatch`` (commands.dispatch) and
    commits them once. ``touched`` (commands.touched) lets the batch read every stream and group its
    commands name in one query up front.

    Errors that are not Redis errors (a bug, a failed Spark job) abort the whole batch and propagate:
    nothing of it commits.
    """
    session = runner.session()
    count = sum(len(unit.commands) for unit in units)

    # One command reads what it needs, as outside a batch: loading whole partitions pays only when
    # several commands read them.
    single = count == 1 and not any(unit.watched for unit in units)
    if single and len(units) == 1:
        return _run_alone(runner, units[0], dispatch)
    # Loading a partition reads and holds all its rows; a few commands read less through their own
    # reads (a server's batch of 24 on a 4,000-entry stream: ~75 ms loading it, ~60 ms without).
    load_limit = min(load_limit, LOAD_ROWS_PER_COMMAND * count)

    def attempt(_: int) -> BatchResult:
        at = latest_version(session, runner.state_path)
        now = time.monotonic()
        known_big = [p for p, seen in list(runner.big_partitions.items()) if now - seen < BIG_PARTITION_MEMORY_S]
        state = BatchSnapshot(session, runner.state_path, at, 0 if single else load_limit, known_big)
        if touched is not None:
            state.preload(t for unit in units for argv in unit.commands for t in touched(argv))
        txn = uuid.uuid4().hex
        batch_runner = BatchRunner(runner, state, runner.clock(), txn)
        results = [_run_unit(state, batch_runner, unit, dispatch) for unit in units]
        for partition in state.found_big:
            runner.big_partitions[partition] = time.monotonic()
        plan = state.plan(txn, guard_reads=not single)
        version = None
        if not plan.empty:
            name = f"{operation} of {count} {txn}"
            try:
                version = commit_plan(session, runner.state_path, plan, name, rows_per_file=runner.rows_per_file)
            except NothingCommittedError:
                version = None  # the batch's writes cancelled out (e.g. a stream created and deleted)
        return BatchResult(results, version, 0)

    result, attempts = run_with_retries(attempt, runner.retry_policy, operation)
    return BatchResult(result.units, result.version, attempts)


def _run_alone(runner: Runner, unit: Unit, dispatch: Dispatch) -> BatchResult:
    """A batch of one command is that command, run as ``StreamStore.execute`` runs it: its own snapshot
    reads heads and kept files on the driver, where a ``BatchSnapshot`` of one command ran a Spark query
    (a server's lone XREADGROUP: 1 job and ~0.2 s against 0 and ~0.04 s)."""
    (argv,) = unit.commands
    runner.forget_last_commit()
    try:
        reply = dispatch(runner, argv, _never_block)
    except ReplyError as error:
        reply = error
    return BatchResult([UnitResult([reply])], runner.last_commit_version, max(1, runner.last_attempts))


def _run_unit(state: BatchSnapshot, runner: BatchRunner, unit: Unit, dispatch: Dispatch) -> UnitResult:
    if unit.watched:
        # Checked where the unit runs in the batch: an earlier unit's change to a watched key counts.
        state.guard_stream_heads(unit.watched)
        if watch_signatures(state, list(unit.watched)) != dict(unit.watched):
            return UnitResult([], aborted=True)
    replies: list[Any] = []
    for argv in unit.commands:
        try:
            replies.append(dispatch(runner, argv, _never_block))
        except ReplyError as error:
            replies.append(error)
    return UnitResult(replies)

"""Group commit: the commands of many connections gathered into one batch, one Delta commit.

A commit costs one to two seconds whatever it holds, and commits to one group serialize through lost
races, so a server that commits each command alone gets slower with every client it adds. Instead the
server's connection threads hand their data commands to one ``GroupCommitter`` as units (a connection's
pipelined commands, an EXEC's queue). Its thread takes every unit waiting, up to ``max_commands``
commands and ``max_bytes`` of arguments, runs them as one batch (batch.run_batch) in arrival order, and
gives each unit its replies. While one batch commits, the next gathers: the busier the server, the
larger its batches. Any serial order of whole units is a history Redis could have produced; each
connection's own commands keep their order because a connection waits for its replies before it sends
the next unit.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamclaim_spark.commands import reading, touched
from streamclaim_spark.commands.args import require_text
from streamclaim_spark.commands.blocking import BLOCK_POLL_INTERVAL_S, resolve_dollar
from streamclaim_spark.engine.batch import Dispatch, Unit, UnitResult, run_batch
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import InvalidArgumentError, ReplyError, ServerStoppingError

log = logging.getLogger(__name__)

DEFAULT_MAX_COMMANDS = 1000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class BatchStats:
    """What INFO reports about group commit since the server started."""

    batches: int = 0
    commands: int = 0
    largest: int = 0
    commit_ms_total: float = 0.0
    commit_ms_last: float = 0.0

    def lines(self) -> list[str]:
        per_batch = self.commands / self.batches if self.batches else 0.0
        mean_ms = self.commit_ms_total / self.batches if self.batches else 0.0
        return [
            f"batches:{self.batches}",
            f"batched_commands:{self.commands}",
            f"commands_per_batch:{per_batch:.2f}",
            f"largest_batch:{self.largest}",
            f"batch_latency_ms_mean:{mean_ms:.1f}",
            f"batch_latency_ms_last:{self.commit_ms_last:.1f}",
        ]


@dataclass
class _Waiting:
    unit: Unit
    size: int
    done: threading.Event = field(default_factory=threading.Event)
    result: UnitResult | None = None
    error: BaseException | None = None


class GroupCommitter:
    """One thread that runs the submitted units in batches; ``submit`` blocks until its unit ran."""

    def __init__(
        self,
        runner: Runner,
        dispatch: Dispatch,
        max_commands: int = DEFAULT_MAX_COMMANDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if max_commands < 1 or max_bytes < 1:
            raise InvalidArgumentError("max_commands and max_bytes must be at least 1")
        self.runner = runner
        self.dispatch = dispatch
        self.max_commands = max_commands
        self.max_bytes = max_bytes
        self.stats = BatchStats()
        self._queue: collections.deque[_Waiting] = collections.deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="streamclaim-group-commit", daemon=True)

    def start(self) -> GroupCommitter:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Runs what is queued, then ends the thread."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        self._thread.join()

    def submit(self, unit: Unit, size: int) -> UnitResult:
        """Runs ``unit`` in the next batch and returns its replies; ``size``: its arguments' bytes."""
        waiting = _Waiting(unit, size)
        with self._ready:
            if self._stopping:
                raise ServerStoppingError("the server is stopping")
            self._queue.append(waiting)
            self._ready.notify()
        waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error
        assert waiting.result is not None
        return waiting.result

    def read_blocking(self, argv: list[str], cancelled: Callable[[], bool]) -> Any:
        """XREAD/XREADGROUP with BLOCK: one pass in the next batch; when it finds nothing, the client
        waits outside batches, polling the store as a blocked read does (commands.blocking.BLOCK_POLL_INTERVAL_S),
        and once entries arrive its read runs in the batch after (so blocked readers of one group share
        commits, as everything else does). Ends with nil at the timeout or when ``cancelled``."""
        require_text(argv)
        request = reading.parse_read(argv)
        if argv[0].lower() == "xread":
            request = resolve_dollar(self.runner, request)  # `$`: entries after the last ID at call time
        once = reading.without_block(argv, request.id_args)
        size = sum(len(arg) for arg in argv)
        started = time.monotonic()
        while True:
            reply = self.submit(Unit([once]), size).replies[0]
            if isinstance(reply, ReplyError):
                raise reply
            if reply is not None or request.block_ms is None:
                return reply
            while True:
                if request.block_ms and (time.monotonic() - started) * 1000 >= request.block_ms:
                    return None
                if cancelled():
                    return None
                time.sleep(BLOCK_POLL_INTERVAL_S)
                if self.runner.transact("blocked read poll", lambda ctx: reading.has_new_entries(ctx, request)):
                    break

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopping:
                    self._ready.wait()
                if not self._queue:
                    return
                batch = self._take()
            self._run(batch)

    def _take(self) -> list[_Waiting]:
        """The oldest waiting units within the bounds (always at least one, however large)."""
        batch = [self._queue.popleft()]
        commands, size = len(batch[0].unit.commands), batch[0].size
        while self._queue:
            following = self._queue[0]
            commands += len(following.unit.commands)
            size += following.size
            if commands > self.max_commands or size > self.max_bytes:
                break
            batch.append(self._queue.popleft())
        return batch

    def _run(self, batch: list[_Waiting]) -> None:
        started = time.monotonic()
        try:
            units = [w.unit for w in batch]
            result = run_batch(self.runner, units, self.dispatch, touched=touched, operation="GROUP COMMIT")
        except Exception as error:
            if len(batch) == 1:
                batch[0].error = error
                batch[0].done.set()
                return
            # One unit's failure (a bug, a failed Spark job) must not fail the others: run each alone.
            log.warning("a batch of %d units failed (%s); running each unit alone", len(batch), error)
            for waiting in batch:
                self._run([waiting])
            return
        elapsed_ms = (time.monotonic() - started) * 1000
        commands = sum(len(w.unit.commands) for w in batch)
        self.stats.batches += 1
        self.stats.commands += commands
        self.stats.largest = max(self.stats.largest, commands)
        self.stats.commit_ms_total += elapsed_ms
        self.stats.commit_ms_last = elapsed_ms
        for waiting, unit_result in zip(batch, result.units, strict=True):
            waiting.result = unit_result
            waiting.done.set()

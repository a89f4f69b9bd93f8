"""``StreamStore.pipeline()``: redis-py's pipeline over the store, many commands in one Delta commit.

``pipe.execute_command(*argv)`` queues (and returns the pipeline, so calls chain); ``pipe.execute()``
runs the queue as one batch (batch.run_batch) and returns the replies in order, typed as
``StreamStore.execute`` types them. A command's Redis error is its reply; with ``raise_on_error`` (the
default) ``execute`` raises the first one after every command ran, as redis-py does. Queue-time errors
(an unknown command, wrong arity) are found when ``execute`` starts: with ``transaction=True`` nothing
runs and ``execute`` raises ``EXECABORT``, as MULTI/EXEC does; without, those commands reply with their
error and the others run.

``transaction=False`` is a plain pipeline: the commands keep their order but may commit in several
batches of at most ``max_batch`` commands each (no isolation between batches, as Redis promises none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamclaim_spark.commands import dispatch, touched, validate
from streamclaim_spark.commands.args import decode_argv
from streamclaim_spark.core.replies import decoded, encoded
from streamclaim_spark.engine.batch import BatchResult, Unit, run_batch
from streamclaim_spark.engine.batch.state import DEFAULT_LOAD_LIMIT
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import EXECABORT, InvalidArgumentError, ReplyError

# Commands per commit of a pipeline with transaction=False.
DEFAULT_MAX_BATCH = 1000


class Pipeline:
    """Commands queued for one batch on ``runner`` (a store's: ``StreamStore.pipeline`` builds this);
    reusable after ``execute`` (its queue is then empty)."""

    def __init__(
        self,
        runner: Runner,
        transaction: bool = True,
        *,
        decode_responses: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        load_limit: int = DEFAULT_LOAD_LIMIT,
    ) -> None:
        if max_batch < 1:
            raise InvalidArgumentError(f"max_batch={max_batch}: give the most commands one commit may hold, at least 1")
        self.runner = runner
        self.transaction = transaction
        self.decode_responses = decode_responses
        self.max_batch = max_batch
        # Rows of one stream or group a batch reads into memory; bigger ones it reads through Spark.
        self.load_limit = load_limit
        self.commands: list[list[str]] = []
        # What the last execute committed: one BatchResult per commit (several only without transaction).
        self.results: list[BatchResult] = []

    def __len__(self) -> int:
        return len(self.commands)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_: object) -> None:
        self.reset()

    def reset(self) -> None:
        """Drops the queued commands."""
        self.commands = []

    def execute_command(self, *argv: str | bytes) -> Pipeline:
        """Queues one command given as its argv (str or bytes, as ``StreamStore.execute`` takes it)."""
        self.commands.append(decode_argv(argv))
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Runs the queued commands and returns their replies in order (errors as ``ReplyError``)."""
        commands, self.commands = self.commands, []
        self.results = []
        if not commands:
            return []
        queue_errors = [_queue_error(argv) for argv in commands]
        if self.transaction and any(error is not None for error in queue_errors):
            raise ReplyError(EXECABORT)
        replies: list[Any] = [error for error in queue_errors]
        runnable = [index for index, error in enumerate(queue_errors) if error is None]
        size = len(runnable) if self.transaction else self.max_batch
        for start in range(0, len(runnable), max(size, 1)):
            chunk = runnable[start : start + size]
            unit = Unit([commands[i] for i in chunk])
            result = run_batch(
                self.runner, [unit], dispatch, touched=touched, load_limit=self.load_limit, operation="PIPELINE"
            )
            self.results.append(result)
            for index, reply in zip(chunk, result.replies, strict=True):
                replies[index] = reply
        typed = [reply if isinstance(reply, ReplyError) else self._typed(reply) for reply in replies]
        if raise_on_error:
            first = next((reply for reply in typed if isinstance(reply, ReplyError)), None)
            if first is not None:
                raise first
        return typed

    def _typed(self, reply: Any) -> Any:
        return decoded(reply) if self.decode_responses else encoded(reply)


def _queue_error(argv: Sequence[str]) -> ReplyError | None:
    try:
        validate(argv)
    except ReplyError as error:
        return error
    return None

"""The parity scenarios again, each run as batches: one pipeline per stretch between pauses (one commit).

redis-server runs the steps one by one; the store runs each stretch of steps through
``StreamStore.pipeline`` as one batch. The replies must be equal, as for single commands
(test_parity.py), because a batch runs its commands in Redis' serial order on its own writes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from streamclaim_spark import StreamStore
from streamclaim_spark.errors import ReplyError
from tests.parity.harness import Outcome, Pause, Step, assert_same_outcomes, run_on
from tests.parity.scenarios import SCENARIOS
from tests.parity.test_parity import _like_server
from tests.resp import RespClient


def run_as_pipelines(store: StreamStore, steps: Sequence[Step]) -> list[Outcome]:
    """Each stretch of steps between pauses as one pipeline; one outcome per step."""
    outcomes: list[Outcome] = []
    stretch: list[tuple[str | bytes, ...]] = []

    def flush() -> None:
        if not stretch:
            return
        pipe = store.pipeline(transaction=False, max_batch=len(stretch))
        for step in stretch:
            pipe.execute_command(*step)
        started = store.clock()
        replies = pipe.execute(raise_on_error=False)
        finished = store.clock()
        assert len(pipe.results) <= 1, "a stretch of steps committed more than once"
        for reply in replies:
            error = str(reply) if isinstance(reply, ReplyError) else None
            outcomes.append(Outcome(None if error else reply, error, started, finished))
        stretch.clear()

    for step in steps:
        if isinstance(step, Pause):
            flush()
            started = store.clock()
            time.sleep(step.ms / 1000)
            outcomes.append(Outcome(None, None, started, store.clock()))
        else:
            stretch.append(step)
    flush()
    return outcomes


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_scenario_run_as_pipelines_replies_like_redis(name: str, redis: RespClient, store: StreamStore) -> None:
    steps = SCENARIOS[name]
    expected = run_on(redis, steps)
    actual = run_as_pipelines(store, steps)
    actual = [_like_server(step, e, a) for step, e, a in zip(steps, expected, actual, strict=True)]
    assert_same_outcomes(steps, expected, actual, tolerance_ms=30_000)

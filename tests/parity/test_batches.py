"""The parity scenarios again, each run as batches: one batch per stretch between pauses (one commit).

redis-server runs the steps one by one; the store runs each stretch of steps as one batch, through
``StreamStore.pipeline`` for every other scenario and as MULTI/EXEC through streamclaim-server for the
rest, and for one in twelve through a pipeline that reads every stream and group through Spark, as
a batch reads those too big to load into memory (the surfaces share one batch engine, so each scenario
runs once). The replies must be equal,
as for single commands (test_parity.py), because a batch runs its commands in Redis' serial order on
its own writes. As there, the store's clock stands still (a ``Pause`` moves it), so its idle times and
delivery times are compared with redis-server's at the harness's tolerance, not the seconds a batch takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from streamclaim_spark import StreamStore
from streamclaim_spark.commands import validate
from streamclaim_spark.commands.args import decode_argv
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.engine.batch.state import DEFAULT_LOAD_LIMIT
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.server import StreamClaimServer
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.conftest import StoreFactory
from tests.parity.harness import Outcome, Pause, Step, assert_same_outcomes, pause, run_on
from tests.parity.scenarios import SCENARIOS
from tests.parity.test_parity import _like_server
from tests.resp import RespClient

NAMES = sorted(SCENARIOS)


Batch = Callable[[list[tuple[str | bytes, ...]]], list[Any]]


def through_pipeline(store: StreamStore, load_limit: int) -> Batch:
    def run(stretch: list[tuple[str | bytes, ...]]) -> list[Any]:
        pipe = store.pipeline(transaction=False, max_batch=len(stretch), load_limit=load_limit)
        for step in stretch:
            pipe.execute_command(*step)
        replies = pipe.execute(raise_on_error=False)
        assert len(pipe.results) <= 1, "a stretch of steps ran as more than one batch"
        return replies

    return run


def through_multi_exec(store: StreamStore, client: RespClient) -> Batch:
    """MULTI/EXEC on streamclaim-server; steps Redis refuses while queuing run alone, as they fail alone."""

    def run(stretch: list[tuple[str | bytes, ...]]) -> list[Any]:
        queued = [step for step in stretch if _queue_error(step) is None]
        before = store.snapshot().version
        replies = client.transaction(queued) or []
        assert (store.snapshot().version or 0) - (before or 0) <= 1, "one EXEC made more than one commit"
        answers = iter(replies)
        return [error if (error := _queue_error(step)) is not None else next(answers) for step in stretch]

    return run


def _queue_error(step: tuple[str | bytes, ...]) -> ReplyError | None:
    try:
        validate(decode_argv(step))
    except ReplyError as error:
        return error
    return None


def run_as_batches(store: StreamStore, batch: Batch, steps: Sequence[Step]) -> list[Outcome]:
    """Each stretch of steps between pauses as one batch; one outcome per step."""
    outcomes: list[Outcome] = []
    stretch: list[tuple[str | bytes, ...]] = []

    def flush() -> None:
        if not stretch:
            return
        started = store.clock()
        replies = batch(stretch)
        finished = store.clock()
        for reply in replies:
            error = str(reply) if isinstance(reply, ReplyError) else None
            outcomes.append(Outcome(None if error else reply, error, started, finished))
        stretch.clear()

    for step in steps:
        if isinstance(step, Pause):
            flush()
            started = store.clock()
            pause(store.clock, step)
            outcomes.append(Outcome(None, None, started, store.clock()))
        else:
            stretch.append(step)
    flush()
    return outcomes


# "unloaded": a pipeline that reads every stream and group through Spark (as it does those too big to load);
# a query per read makes it the slowest surface, so it takes one scenario in twelve (tests/spark/test_batches.py
# covers its claims directly).
SURFACES = (*("pipeline", "multi") * 5, "pipeline", "unloaded")


@pytest.mark.parametrize(("name", "surface"), [(name, SURFACES[n % 12]) for n, name in enumerate(NAMES)])
def test_a_scenario_run_as_batches_replies_like_redis(
    name: str, surface: str, redis: RespClient, make_store: StoreFactory
) -> None:
    store = make_store(clock=ManualClock(wall_clock_ms()))
    steps = SCENARIOS[name]
    expected = run_on(redis, steps)
    if surface != "multi":
        load_limit = 0 if surface == "unloaded" else DEFAULT_LOAD_LIMIT
        actual = run_as_batches(store, through_pipeline(store, load_limit), steps)
    else:
        server = StreamClaimServer(store, ServerConfig(port=0, allow_flush=True)).start()
        try:
            with RespClient("127.0.0.1", server.port, timeout=300) as client:
                actual = run_as_batches(store, through_multi_exec(store, client), steps)
        finally:
            server.stop(grace_s=10)
    actual = [_like_server(step, e, a) for step, e, a in zip(steps, expected, actual, strict=True)]
    assert_same_outcomes(steps, expected, actual)

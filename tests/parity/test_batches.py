"""The parity scenarios again, run as batches: twelve scenarios at a time, one batch (one commit) each.

redis-server runs the steps one by one; the store runs them as one batch, through ``StreamStore.pipeline``
for five groups in twelve, as MULTI/EXEC through streamclaim-server for five, through a plain pipeline
for one more, and for the last through a pipeline that reads every stream and group through Spark, as
a batch reads those too big to load into memory (the surfaces share one batch engine, so each scenario
runs once). The replies must be equal, as for single commands (test_parity.py), because a batch runs
its commands in Redis' serial order on its own writes.

A group is twelve scenarios, each with its keys prefixed by its place in the group (``3:s``), their
steps one after another: redis-server runs exactly that sequence too, so the comparison holds whatever
the steps share, and the prefixes keep each scenario on keys of its own, as it was written. One batch
of ~120 commands costs about what one of ten did (one read of the keys, one commit): the group's
first test runs it, every test then compares its own scenario's steps. Every group runs on both forms of
the store's work, the driver's and Spark's (core/placement.py). As in test_parity.py, the store's
clock stands still (a ``Pause`` moves it; no scenario here has one), so its idle times and delivery
times are compared with redis-server's at the harness's tolerance, not the seconds a batch takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from streamclaim_spark import StreamStore
from streamclaim_spark.commands import validate
from streamclaim_spark.commands.args import decode_argv
from streamclaim_spark.commands.reading import parse_read
from streamclaim_spark.commands.spec import COMMANDS
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.core.placement import Force, placed
from streamclaim_spark.engine.batch.state import DEFAULT_LOAD_LIMIT
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.server import StreamClaimServer
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.conftest import StoreFactory
from tests.parity.harness import Outcome, Pause, Step, assert_same_outcomes, pause, run_on
from tests.parity.scenarios import SCENARIOS
from tests.parity.test_parity import FORMS, _like_server
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
# a query per read makes it the slowest surface, so it takes one group in twelve (tests/spark/test_batches.py
# covers its claims directly).
SURFACES = (*("pipeline", "multi") * 5, "pipeline", "unloaded")
GROUPS = len(SURFACES)


def key_positions(step: tuple[str | bytes, ...]) -> list[int]:
    """Where ``step``'s keys are, from the command table's key positions (``commands.spec``); none where
    Redis refuses the command before reading a key."""
    argv = decode_argv(step)
    spec = COMMANDS.get(argv[0].lower())
    if spec is None:
        raise AssertionError(f"{argv[0]!r} is not in the command table")
    if spec.blocking:  # XREAD and XREADGROUP: their keys follow STREAMS (movable keys)
        try:
            keys = parse_read(argv).keys
        except ReplyError:
            return []
        first = len(argv) - 2 * len(keys)
        return list(range(first, first + len(keys)))
    if spec.subcommands:  # XGROUP and XINFO: the key follows the subcommand; HELP has none
        sub = argv[1].lower() if len(argv) > 1 else ""
        return [2] if len(argv) > 2 and sub in spec.subcommands and sub != "help" else []
    first, last, step_size = spec.keys
    if first == 0:
        return []
    last = len(argv) + last if last < 0 else min(last, len(argv) - 1)
    return list(range(first, last + 1, step_size))


def with_keys_prefixed(step: Step, prefix: str) -> Step:
    if isinstance(step, Pause):
        return step
    positions = key_positions(step)
    return tuple(
        (prefix + arg if isinstance(arg, str) else prefix.encode() + arg) if index in positions else arg
        for index, arg in enumerate(step)
    )


@dataclass(frozen=True)
class ScenarioRun:
    """One scenario's steps (keys prefixed) and its outcomes on each side, out of its group's run."""

    steps: list[Step]
    expected: list[Outcome]
    actual: list[Outcome]


_RUNS: dict[tuple[int, Force], dict[str, ScenarioRun] | BaseException] = {}


def run_group(group: int, redis: RespClient, store: StreamStore) -> dict[str, ScenarioRun]:
    """The group's scenarios, one after another, on redis-server and as one batch on ``store``."""
    names = NAMES[group::GROUPS]
    scripts = {
        name: [with_keys_prefixed(step, f"{place}:") for step in SCENARIOS[name]] for place, name in enumerate(names)
    }
    steps = [step for name in names for step in scripts[name]]
    expected = run_on(redis, steps)
    surface = SURFACES[group]
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
    runs, start = {}, 0
    for name in names:
        end = start + len(scripts[name])
        runs[name] = ScenarioRun(scripts[name], expected[start:end], actual[start:end])
        start = end
    return runs


# Each group runs with each form of the store's work forced (core/placement.py): every scenario then runs on
# the Spark form (its batch's read a query, its commit a MERGE) for twelve batches' cost, where one by one
# (test_parity.py) the Spark form takes a slice.
@pytest.mark.parametrize(
    ("name", "surface", "form"),
    [
        pytest.param(name, SURFACES[n % GROUPS], form, id=f"{name}-{SURFACES[n % GROUPS]}-{form}")
        for form in FORMS
        for n, name in enumerate(NAMES)
    ],
)
def test_a_scenario_run_as_batches_replies_like_redis(
    name: str, surface: str, form: Force, redis: RespClient, make_store: StoreFactory
) -> None:
    group = NAMES.index(name) % GROUPS
    if (group, form) not in _RUNS:
        try:
            with placed(force=form):
                _RUNS[group, form] = run_group(group, redis, make_store(clock=ManualClock(wall_clock_ms())))
        except BaseException as error:  # every scenario of the group fails with it, not only the first
            _RUNS[group, form] = error
            raise
    runs = _RUNS[group, form]
    if isinstance(runs, BaseException):
        raise AssertionError(f"the batch of this scenario's group failed: {runs!r}") from runs
    run = runs[name]
    actual = [_like_server(step, e, a) for step, e, a in zip(run.steps, run.expected, run.actual, strict=True)]
    assert_same_outcomes(run.steps, run.expected, actual)

"""Shared fixtures: one Delta-enabled SparkSession for the whole run, and fresh stores on it.

The session is built once (Spark starts in ~15 s) through the project's own ``build_session`` with
test-sized settings: two local cores, few shuffle partitions, no UI, UTC.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from tests.fixtures import EMPTY, TEST_SPARK_CONF, TemplateStores


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    # Under pytest-xdist each worker builds its own session. They start one at a time: on a fresh machine
    # the first resolves the Delta jar into the Ivy cache and the second finds it there, where two
    # resolvers downloading into one cache at once can leave it half written.
    with _one_at_a_time(tmp_path_factory.getbasetemp().parent / "spark-start.lock"):
        session = build_session(master="local[2]", app_name="streamclaim-tests", conf=TEST_SPARK_CONF)
    yield session
    session.stop()


@contextlib.contextmanager
def _one_at_a_time(lock_path: Path) -> Iterator[None]:
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


StoreFactory = Callable[..., StreamStore]


def _rough_seconds(item: pytest.Item) -> float:
    """What a test costs, roughly, in seconds of a worker's time: enough to order files."""
    if item.get_closest_marker("slow"):
        return 30.0
    if "spark" in getattr(item, "fixturenames", ()) or item.get_closest_marker("spark"):
        return 5.0
    return 0.05


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Orders the test files heaviest first, each file's tests kept in their order.

    ``scripts/test.sh`` hands whole files to two workers in this order (``--dist loadfile
    --no-loadscope-reorder``). Longest first leaves the quick files for last, so the workers finish
    together; xdist's own order (most tests first) left single slow tests, each starting a JVM, for the end.
    """
    weight: dict[str, float] = {}
    for item in items:
        weight[item.location[0]] = weight.get(item.location[0], 0.0) + _rough_seconds(item)
    items.sort(key=lambda item: -weight[item.location[0]])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Names every thread still running in the test process at the end, where it was started from and
    what it is doing: a leaked server, worker or poller shows up here instead of slowing the run silently."""
    frames = sys._current_frames()
    threads = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if not threads:
        return
    terminalreporter.section("threads alive at the end of the run")
    for thread in threads:
        frame = frames.get(thread.ident or -1)
        where = "; ".join(
            f"{Path(entry.filename).name}:{entry.lineno} {entry.name}" for entry in traceback.extract_stack(frame)[-2:]
        )
        terminalreporter.write_line(f"{thread.name} (daemon={thread.daemon}): {where}")


@pytest.fixture(scope="session")
def templates(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> TemplateStores:
    """The run's template stores (tests/fixtures.py): built once, copied per test."""
    return TemplateStores(spark, tmp_path_factory.mktemp("templates"))


@pytest.fixture
def make_store(templates: TemplateStores, tmp_path: Path) -> StoreFactory:
    """Opens fresh, empty stores under the test's temporary folder: ``make_store()`` or
    ``make_store(clock=...)``. Each is a copy of the empty template, not a new table (a Delta commit)."""
    counter = itertools.count()

    def make(**kwargs: object) -> StreamStore:
        return templates.copy(EMPTY, tmp_path / f"store{next(counter)}", **kwargs)

    return make


@pytest.fixture
def store(make_store: StoreFactory) -> StreamStore:
    """A fresh, empty store on the wall clock."""
    return make_store()

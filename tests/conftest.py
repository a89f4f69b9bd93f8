"""Shared fixtures: one Delta-enabled SparkSession for the whole run, and fresh stores on it.

The session is built once (Spark starts in ~15 s) through the project's own ``build_session`` with
test-sized settings: two local cores, few shuffle partitions, no UI, UTC.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.session import build_session

TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(master="local[2]", app_name="streamclaim-tests", conf=TEST_SPARK_CONF)
    yield session
    session.stop()


StoreFactory = Callable[..., StreamStore]


@pytest.fixture
def make_store(spark: SparkSession, tmp_path: Path) -> StoreFactory:
    """Opens fresh stores under the test's temporary folder: ``make_store()`` or ``make_store(clock=...)``."""
    counter = itertools.count()

    def make(**kwargs: object) -> StreamStore:
        return StreamStore.open(str(tmp_path / f"store{next(counter)}"), spark=spark, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def store(make_store: StoreFactory) -> StreamStore:
    """A fresh, empty store on the wall clock."""
    return make_store()

"""The examples in the public entry points' docstrings run as written, in order: what a reader copies
from ``help(StreamStore.open)`` works. A failing example prints doctest's report of it."""

from __future__ import annotations

import doctest
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark import StaleSelection, StreamStore
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.streaming import register


def _run_example(target: Callable[..., Any], namespace: dict[str, Any]) -> int:
    """Runs the example in ``target``'s docstring in ``namespace`` (shared, so later examples see what
    earlier ones made); returns how many of its lines failed."""
    tests = doctest.DocTestFinder(recurse=False).find(target, target.__qualname__)
    assert tests and tests[0].examples, f"{target.__qualname__} has no example"
    runner = doctest.DocTestRunner()
    for test in tests:
        test.globs = namespace
        runner.run(test, clear_globs=False)
    return runner.summarize(verbose=False).failed


def test_the_public_entry_points_examples_run_as_written_one_after_another(spark: SparkSession, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {
        "spark": spark,
        "path": str(tmp_path / "opened"),
        "StreamStore": StreamStore,
        "StaleSelection": StaleSelection,
        "register": register,
    }
    failed = {"StreamStore.open": _run_example(StreamStore.open, namespace)}
    # The command examples start from an empty store of their own (open's example added orders 1-1).
    namespace["store"] = StreamStore.open(str(tmp_path / "commands"), spark=spark)
    for target in (StreamStore.execute, StreamStore.claim_stale, recover_stale, StreamStore.pipeline):
        failed[target.__qualname__] = _run_example(target, namespace)
    # register's example reads the store that open's example made.
    failed["register"] = _run_example(register, namespace)
    assert {name: count for name, count in failed.items() if count} == {}

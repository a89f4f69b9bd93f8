"""notebooks/inspect_stale_pending.ipynb, executed headless (nbclient) against a store the test builds.

The store path and the other parameters are injected after the notebook's ``parameters`` cell, as
papermill does. The kernel starts its own Spark driver, so the store is built with a clock anchored to the
wall clock (the notebook's views measure idle time at query time):

    R - 3h   e0..e4 appended to ``orders`` and delivered to alice in group ``billing``
    R - 2h   bob claims e0 and e1 (XCLAIM)
    R - 1h   carol claims e0: e0 has the highest delivery count (3) and three owners in its history
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.state.delta_io import latest_version
from tests.clock import ManualClock

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "inspect_stale_pending.ipynb"
HOUR = 3_600_000


def inject(notebook: Any, **parameters: object) -> None:
    """Adds a cell assigning ``parameters`` right after the cell tagged ``parameters`` (papermill's way)."""
    position = next(i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source)  # type: ignore[no-untyped-call]
    cell.metadata["tags"] = ["injected-parameters"]
    notebook.cells.insert(position + 1, cell)


def outputs(notebook: Any) -> list[Any]:
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def test_the_notebook_runs_headless_and_draws_its_figures(spark: SparkSession, tmp_path: Path) -> None:
    now = time.time_ns() // 1_000_000
    clock = ManualClock(now - 3 * HOUR)
    store = StreamStore.open(str(tmp_path / "store"), spark=spark, clock=clock)
    first = store.append("orders", spark.range(5).select(F.col("id").alias("n"))).first_id
    ids = [f"{first.ms}-{i}" for i in range(5)] if first is not None else []
    assert store.execute("XGROUP", "CREATE", "orders", "billing", "0") == "OK"
    assert store.deliver("orders", "billing", "alice").count == 5
    clock.now = now - 2 * HOUR
    assert store.execute("XCLAIM", "orders", "billing", "bob", "0", ids[0], ids[1], "JUSTID") == ids[:2]
    clock.now = now - HOUR
    assert store.execute("XCLAIM", "orders", "billing", "carol", "0", ids[0], "JUSTID", "RETRYCOUNT", "3") == ids[:1]
    version = latest_version(store.session(), store.state_path)
    notebook = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]
    inject(notebook, STORE_PATH=store.path, MIN_IDLE_MS=30 * 60_000, DRY_RUN=True)

    NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()

    figures = [output for output in outputs(notebook) if "image/png" in output.get("data", {})]
    assert len(figures) == 3  # idle times, delivery counts, one entry's ownership history
    printed = "".join(output.get("text", "") for output in outputs(notebook) if output.get("name") == "stdout")
    # e0's history: not pending, then alice, bob and carol.
    assert f"orders / billing / {ids[0]}: 4 change(s)" in printed
    assert "Would claim 5 entries to 'recovery'" in printed
    # The dry-run guard held: the claim cell committed nothing.
    assert latest_version(store.session(), store.state_path) == version

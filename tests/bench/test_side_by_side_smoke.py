"""The side-by-side benchmark harness runs end to end at a tiny N against a real redis-server and the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bench import side_by_side
from bench.report import comparison_table, latency_table, plot

pytestmark = pytest.mark.spark

SIZE = 300


@pytest.mark.slow
def test_the_harness_measures_every_step_on_both_systems_and_writes_its_report(
    spark: SparkSession, tmp_path: Path
) -> None:
    results = side_by_side.run([SIZE], latency_calls=2, loop_calls=2, spark=spark, warm_up=False, root=str(tmp_path))

    steps = results["sizes"][str(SIZE)]
    assert set(steps["redis"]) == {
        "load", "deliver", "xpending", "claim_1k", "autoclaim_100", "autoclaim_1000", "autoclaim_justid", "ack_all",
    }  # fmt: skip
    assert set(steps["store"]) == {
        "load", "deliver", "xpending", "claim_1k", "batched_claim", "batched_claim_justid", "autoclaim_100",
        "autoclaim_1000", "ack_all",
    }  # fmt: skip
    # The harness asserts what each step claimed; these are the counts it recorded.
    assert steps["redis"]["autoclaim_100"]["items"] == SIZE - 2
    assert steps["store"]["batched_claim"]["items"] == SIZE - 2
    assert steps["store"]["ack_all"]["items"] == SIZE - 2
    # 300 stale entries take 4 calls at COUNT 100 (the last returns 0-0); the store ran 2 and projected.
    assert (steps["redis"]["autoclaim_100"]["calls"], steps["redis"]["autoclaim_100"]["projected"]) == (3, False)
    assert steps["store"]["autoclaim_100"]["measured_calls"] == 2
    assert steps["store"]["autoclaim_100"]["projected"] is True
    assert steps["store"]["autoclaim_1000"]["projected"] is False
    assert {len(samples) for system in results["latency"].values() for samples in system.values()} == {2}
    assert results["meta"]["redis_version"]
    assert "recover all N" in comparison_table(results)
    assert latency_table(results).count("\n") == 4
    plot(results, str(tmp_path / "time_vs_n.png"))
    assert (tmp_path / "time_vs_n.png").stat().st_size > 10_000

"""The README's main command: the demo builds a crashed-service store and runs the real recovery job on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import demo

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_runs_the_recovery_job_and_prints_its_report(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = demo.main(["--path", str(tmp_path / "demo-store"), "--conf-dir", str(REPO / "conf")])

    out = capsys.readouterr().out
    assert code == 0, out
    report = out.split("Recovery report:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert report[:5] == [
        "  stream/group         pending stale dead-lettered claimed  to",
        "  orders-eu/billing         40    40             0      40  recovery",
        "  orders-eu/shipping        40    40             0      40  recovery",
        "  orders-us/billing         25    25             0      25  recovery",
        "  payments/billing          10    10             3       7  recovery",
    ]
    assert report[5].endswith(": 4 groups, 112 claimed, 3 dead-lettered, 0 conflicts retried")
    letters = out.split("FROM streamclaim.dead_letters):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(letters) == 3
    assert all(line.startswith("  payments/billing ") for line in letters)
    assert all(line.endswith(" last owner worker-1, delivered 12 times") for line in letters)
    after = out.split("After: XPENDING says:\n", 1)[1]
    assert "XPENDING payments billing -> [7, " in after

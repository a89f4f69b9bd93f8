"""The README's main command: the demo builds a crashed-service store and runs the real recovery job on it,
and the console shows the demo's own lines and the log file's path, nothing of Ivy's, Spark's or the job's log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamclaim_spark.cli.console import LOG_DIR_ENV

REPO = Path(__file__).resolve().parents[2]
ID = r"\d+-\d+"
RUN_LINE = r"  run (?P<run>[0-9a-f]{32}) succeeded: 4 groups, 112 claimed, 3 dead-lettered, 0 conflicts retried"


def _xpending(owner: str, counts: tuple[int, int, int, int]) -> list[str]:
    groups = ("orders-eu billing", "orders-eu shipping", "orders-us billing", "payments billing")
    return [
        rf"  XPENDING {group} -> \[{count}, '{ID}', '{ID}', \[\['{owner}', '{count}'\]\]\]"
        for group, count in zip(groups, counts, strict=True)
    ]


@pytest.mark.slow
def test_the_demo_prints_only_its_own_lines_and_the_log_file_and_still_runs_the_recovery_job(tmp_path: Path) -> None:
    store, logs = tmp_path / "demo-store", tmp_path / "logs"
    demo = subprocess.run(
        [sys.executable, "-m", "streamclaim_spark.demo", "--path", str(store), "--conf-dir", str(REPO / "conf")],
        cwd=REPO,
        env={**os.environ, LOG_DIR_ENV: str(logs)},
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert demo.returncode == 0, demo.stdout + demo.stderr
    (log_file,) = logs.iterdir()
    assert demo.stderr == f"streamclaim-demo: log in {log_file} (--verbose shows it here)\n"
    expected = [
        "Before: worker-1 took every entry an hour ago and died. XPENDING says:",
        *_xpending("worker-1", (40, 40, 25, 10)),
        "",
        re.escape(
            f"Running the recovery job: streamclaim-recover --store {store} --min-idle 30m --max-deliveries 10 "
            "--consumer recovery"
        ),
        "",
        "Recovery report:",
        "  stream/group         pending stale dead-lettered claimed  to",
        "  orders-eu/billing         40    40             0      40  recovery",
        "  orders-eu/shipping        40    40             0      40  recovery",
        "  orders-us/billing         25    25             0      25  recovery",
        "  payments/billing          10    10             3       7  recovery",
        RUN_LINE,
        "",
        re.escape("Dead letters (SELECT ... FROM streamclaim.dead_letters):"),
        *[rf"  payments/billing {ID} last owner worker-1, delivered 12 times"] * 3,
        "",
        "After: XPENDING says:",
        *_xpending("recovery", (40, 40, 25, 7)),
    ]
    lines = demo.stdout.splitlines()
    assert len(lines) == len(expected), demo.stdout
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    run_id = re.fullmatch(RUN_LINE, lines[expected.index(RUN_LINE)])
    assert run_id is not None
    # What the console no longer shows is in the log: Ivy's report on the JVM's start, the job's steps, and
    # the JSON summary of the run the report shows.
    log = log_file.read_text(encoding="utf-8")
    assert "Ivy Default Cache set to: " in log
    assert "INFO streamclaim_spark.fleet.recovery: claim committed (state version " in log
    summaries = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert [(summary["run_id"], summary["status"]) for summary in summaries] == [(run_id["run"], "succeeded")]

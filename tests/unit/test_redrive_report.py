"""A redrive's report without Spark: its totals, its JSON summary and its ``redrive_runs`` row."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.fleet.redrive import OUTCOMES, RedriveReport
from streamclaim_spark.state.companion_schema import REDRIVE_RUNS_SCHEMA

T = 1_700_000_000_000
OPTIONS = RedriveOptions(streams=("orders-*",), where="reason = 'XNACK FATAL'", max_redrives=3, limit=10)
REPORT = RedriveReport(
    "r-1",
    "/data/s",
    OPTIONS,
    T,
    T + 1_500,
    groups={
        ("orders-eu", "billing"): Counter(redriven=4, already_pending=1),
        ("orders-us", "billing"): Counter(redriven=2, entry_gone=3),
    },
    capped=2,
    remaining=7,
    adopted=1,
    adopted_runs=("r-0",),
    recorded=True,
)


def test_the_totals_add_every_group_by_outcome_beside_the_run_wide_counts() -> None:
    assert REPORT.totals == {
        **{"redriven": 6, "re_added": 0, "entry_gone": 3, "group_gone": 0, "already_pending": 1},
        **{"capped": 2, "remaining": 7, "adopted": 1},
    }


def test_the_summary_names_the_options_and_each_group_in_name_order() -> None:
    summary = REPORT.to_json()

    assert summary["started_at"] == "2023-11-14T22:13:20.000Z" and summary["ended_at"] == "2023-11-14T22:13:21.500Z"
    assert summary["options"] == {
        "streams": ["orders-*"],
        "groups": ["*"],
        "where": "reason = 'XNACK FATAL'",
        "reset_count": False,
        "max_redrives": 3,
        "limit": 10,
        "to_stream": None,
    }
    assert summary["adopted_runs"] == ["r-0"]
    assert [(g["stream"], g["redriven"], g["entry_gone"]) for g in summary["groups"]] == [
        ("orders-eu", 4, 0),
        ("orders-us", 2, 3),
    ]
    assert set(summary["groups"][0]) == {"stream", "group_name", *OUTCOMES}


def test_the_run_row_fills_the_redrive_runs_schema_column_by_column() -> None:
    row = dict(zip(REDRIVE_RUNS_SCHEMA.names, REPORT.run_row(), strict=True))

    assert row == {
        "run_id": "r-1",
        "started_at": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        "ended_at": datetime(2023, 11, 14, 22, 13, 21, 500_000, tzinfo=UTC),
        "status": "succeeded",
        "error": None,
        "streams": ["orders-*"],
        "groups": ["*"],
        "where": "reason = 'XNACK FATAL'",
        "reset_count": False,
        "max_redrives": 3,
        "limit": 10,
        "to_stream": None,
        "redriven": 6,
        "re_added": 0,
        "entry_gone": 3,
        "group_gone": 0,
        "already_pending": 1,
        "capped": 2,
        "adopted": 1,
        "remaining": 7,
    }

"""The benchmark report's arithmetic and formatting (pure Python)."""

from __future__ import annotations

import pytest

from bench.report import (
    Timing,
    before_after_table,
    comparison_table,
    latency_table,
    merge,
    percentile,
    projected,
    ratio_text,
    seconds_text,
)


def test_projected_scales_the_mean_of_the_measured_calls_to_all_calls() -> None:
    assert projected([1.0, 3.0], 10) == Timing(20.0, calls=2, projected=True)


def test_projected_is_the_measured_total_when_every_call_ran() -> None:
    assert projected([1.0, 2.0, 3.0], 3) == Timing(6.0, calls=3, projected=False)


def test_projected_refuses_to_project_from_nothing() -> None:
    with pytest.raises(ValueError, match="measure at least one call"):
        projected([], 3)


def test_percentile_is_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert (percentile(samples, 0.5), percentile(samples, 0.99), percentile([7.0], 0.99)) == (50.0, 99.0, 7.0)


@pytest.mark.parametrize(
    ("timing", "text"),
    [
        (None, "-"),
        ({"seconds": 0.0123}, "12 ms"),
        ({"seconds": 0.00042}, "0.42 ms"),
        ({"seconds": 4.56}, "4.6 s"),
        ({"seconds": 600.0, "projected": True}, "~10.0 min"),
        ({"seconds": 36_000.0, "projected": True}, "~10.0 h"),
    ],
)
def test_seconds_text_picks_a_readable_unit_and_marks_projections(timing: dict[str, object] | None, text: str) -> None:
    assert seconds_text(timing) == text


def test_ratio_text_is_store_over_redis_and_marks_projections() -> None:
    assert ratio_text({"seconds": 1.0}, {"seconds": 4.0}) == "0.25×"
    assert ratio_text({"seconds": 300.0, "projected": True}, {"seconds": 2.0}) == "~150×"
    assert ratio_text(None, {"seconds": 2.0}) == "-"


def test_comparison_table_has_a_row_per_workload_and_size_with_both_times() -> None:
    results = {
        "sizes": {
            "1000": {
                "redis": {"autoclaim_100": {"seconds": 2.0}, "xpending": {"seconds": 0.001}},
                "store": {"batched_claim": {"seconds": 1.0}, "xpending": {"seconds": 0.5}},
            }
        }
    }

    lines = comparison_table(results).splitlines()

    label = "recover all N: Redis XAUTOCLAIM COUNT 100 loop vs one batched claim"
    assert f"| {label} | 1,000 | 2.0 s | 1.0 s | 0.50× |" in lines
    assert "| XPENDING summary over a PEL of N | 1,000 | 1.00 ms | 500 ms | 500× |" in lines


def test_before_after_table_puts_each_systems_two_runs_and_both_ratios_side_by_side() -> None:
    before = {"sizes": {"1000": {"redis": {"load": {"seconds": 2.0}}, "store": {"load": {"seconds": 4.0}}}}}
    now = {
        "sizes": {
            "1000": {"redis": {"load": {"seconds": 2.5}}, "store": {"load": {"seconds": 2.0}}},
            "10": {"redis": {"load": {"seconds": 0.01}}, "store": {"load": {"seconds": 1.0}}},
        }
    }

    lines = before_after_table(before, now).splitlines()

    label = "load N entries: pipelined XADD vs store.append"
    assert lines[2:] == [
        f"| {label} | 10 | - | 1.0 s | - | 10 ms | - | 100× |",
        f"| {label} | 1,000 | 4.0 s | 2.0 s | 2.0 s | 2.5 s | 2.00× | 0.80× |",
    ]


def test_latency_table_reports_p50_p99_and_the_p50_ratio() -> None:
    results = {"latency": {"store": {"XACK": [100.0, 200.0]}, "redis": {"XACK": [0.1, 0.2]}}}

    assert latency_table(results).splitlines()[2] == "| XACK | 100 ms | 200 ms | 0.100 ms | 0.200 ms | 1,000× |"


def test_merge_keeps_every_size_the_first_latency_and_says_which_run_measured_what() -> None:
    first = {"sizes": {"10": {"redis": {}}, "100": {"redis": {"load": 1}}}, "latency": {"redis": {}}, "meta": {"a": 1}}
    second = {"sizes": {"100": {"redis": {"load": 2}}, "1000": {}}, "latency": {}, "meta": {"b": 2}}

    merged = merge([first, second])

    assert merged["sizes"] == {"10": {"redis": {}}, "100": {"redis": {"load": 2}}, "1000": {}}
    assert merged["latency"] == {"redis": {}}
    assert merged["meta"] == {"a": 1}
    assert merged["runs"] == [{"sizes": ["10", "100"], "meta": {"a": 1}}, {"sizes": ["100", "1000"], "meta": {"b": 2}}]

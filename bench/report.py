"""The benchmark's numbers as tables and a plot: no Spark, no Redis, just the results dictionary.

Results are plain JSON (``results.json``): ``{"meta": {...}, "sizes": {N: {system: {step: Timing}}},
"latency": {system: {command: [ms, ...]}}}`` where a Timing is ``{"seconds": float, "calls": int,
"projected": bool, ...}``. A projected timing ran only some of its calls and scales their mean to all
of them; tables mark it with ``~``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

REDIS = "redis"
STORE = "store"


@dataclass(frozen=True)
class Timing:
    """One measured step: wall seconds for the whole step, and how it was obtained."""

    seconds: float
    calls: int = 1
    projected: bool = False
    items: int | None = None  # entries the step claimed, acknowledged, delivered ...

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def projected(call_seconds: Sequence[float], calls_needed: int) -> Timing:
    """The time of ``calls_needed`` calls from the mean of the ones measured (measured total if all ran)."""
    if not call_seconds:
        raise ValueError("call_seconds: measure at least one call before projecting")
    if len(call_seconds) >= calls_needed:
        return Timing(sum(call_seconds), calls=len(call_seconds))
    mean = sum(call_seconds) / len(call_seconds)
    return Timing(mean * calls_needed, calls=len(call_seconds), projected=True)


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in (0, 1]) of ``samples``."""
    if not samples:
        raise ValueError("samples: no samples to take a percentile of")
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def seconds_text(timing: Mapping[str, Any] | None) -> str:
    """``12.3 s``, ``~4.1 h`` for projected timings, ``-`` when not measured."""
    if timing is None:
        return "-"
    value = float(timing["seconds"])
    mark = "~" if timing.get("projected") else ""
    if value >= 7200:
        return f"{mark}{value / 3600:.1f} h"
    if value >= 120:
        return f"{mark}{value / 60:.1f} min"
    if value >= 1:
        return f"{mark}{value:.1f} s"
    if value >= 0.01:
        return f"{mark}{value * 1000:.0f} ms"
    return f"{mark}{value * 1000:.2f} ms"


def ratio_text(store: Mapping[str, Any] | None, redis: Mapping[str, Any] | None) -> str:
    """store time / redis time: below 1 the store is faster."""
    if store is None or redis is None or float(redis["seconds"]) <= 0:
        return "-"
    ratio = float(store["seconds"]) / float(redis["seconds"])
    mark = "~" if store.get("projected") or redis.get("projected") else ""
    return f"{mark}{ratio:.2f}×" if ratio < 10 else f"{mark}{ratio:,.0f}×"


# (label, redis step, store step): one comparison per row, per N.
COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("recover all N: Redis XAUTOCLAIM COUNT 100 loop vs one batched claim", "autoclaim_100", "batched_claim"),
    ("recover all N: Redis XAUTOCLAIM COUNT 1000 loop vs one batched claim", "autoclaim_1000", "batched_claim"),
    ("recover all N, JUSTID: Redis XAUTOCLAIM COUNT 100 loop vs one batched claim", "autoclaim_justid",
     "batched_claim_justid"),
    ("recover all N: XAUTOCLAIM COUNT 100 loop, both through their commands", "autoclaim_100", "autoclaim_100"),
    ("recover all N: XAUTOCLAIM COUNT 1000 loop, both through their commands", "autoclaim_1000", "autoclaim_1000"),
    ("claim 1,000 stale entries (XAUTOCLAIM COUNT 1000) from a PEL of N", "claim_1k", "claim_1k"),
    ("deliver N entries: XREADGROUP COUNT 10000 loop vs store.deliver", "deliver", "deliver"),
    ("acknowledge N entries: XACK 1000 IDs per call vs store.acknowledge", "ack_all", "ack_all"),
    ("XPENDING summary over a PEL of N", "xpending", "xpending"),
    ("load N entries: pipelined XADD vs store.append", "load", "load"),
)  # fmt: skip


def comparison_table(results: Mapping[str, Any]) -> str:
    """A Markdown table: one row per comparison and N, with both times and the ratio."""
    lines = ["| workload | N | Redis | store | store / Redis |", "|---|---:|---:|---:|---:|"]
    for label, redis_step, store_step in COMPARISONS:
        for size, systems in sorted(results["sizes"].items(), key=lambda item: int(item[0])):
            redis = systems.get(REDIS, {}).get(redis_step)
            store = systems.get(STORE, {}).get(store_step)
            if redis is None and store is None:
                continue
            times = f"{seconds_text(redis)} | {seconds_text(store)} | {ratio_text(store, redis)}"
            lines.append(f"| {label} | {int(size):,} | {times} |")
    return "\n".join(lines)


def before_after_table(previous: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """A Markdown table of two runs side by side: per comparison and N (of the current run), each system's
    time in both runs and both ratios, so a change reads against the machine's own day in each run."""
    lines = [
        "| workload | N | store before | store now | Redis before | Redis now | ratio before | ratio now |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, redis_step, store_step in COMPARISONS:
        for size, systems in sorted(current["sizes"].items(), key=lambda item: int(item[0])):
            earlier = previous["sizes"].get(size, {})
            store, redis = systems.get(STORE, {}).get(store_step), systems.get(REDIS, {}).get(redis_step)
            store_before = earlier.get(STORE, {}).get(store_step)
            redis_before = earlier.get(REDIS, {}).get(redis_step)
            if store is None and redis is None:
                continue
            cells = [seconds_text(t) for t in (store_before, store, redis_before, redis)]
            cells += [ratio_text(store_before, redis_before), ratio_text(store, redis)]
            lines.append(f"| {label} | {int(size):,} | {' | '.join(cells)} |")
    return "\n".join(lines)


def latency_table(results: Mapping[str, Any]) -> str:
    """A Markdown table of p50/p99 per command, in milliseconds."""
    latency = results.get("latency") or {}
    if not latency:
        return ""
    lines = [
        "| command | store p50 | store p99 | Redis p50 | Redis p99 | p50 store / Redis |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for command, store_ms in latency.get(STORE, {}).items():
        redis_ms = latency.get(REDIS, {}).get(command)
        if not store_ms or not redis_ms:
            continue
        s50, s99 = percentile(store_ms, 0.5), percentile(store_ms, 0.99)
        r50, r99 = percentile(redis_ms, 0.5), percentile(redis_ms, 0.99)
        lines.append(f"| {command} | {s50:,.0f} ms | {s99:,.0f} ms | {r50:.3f} ms | {r99:.3f} ms | {s50 / r50:,.0f}× |")
    return "\n".join(lines)


# (label, system, step, line style) for the time-vs-N plot.
PLOTTED: tuple[tuple[str, str, str, str], ...] = (
    ("Redis XAUTOCLAIM COUNT 100 loop", REDIS, "autoclaim_100", "o-"),
    ("Redis XAUTOCLAIM COUNT 1000 loop", REDIS, "autoclaim_1000", "s-"),
    ("Redis XAUTOCLAIM JUSTID loop", REDIS, "autoclaim_justid", "^-"),
    ("store: one batched claim", STORE, "batched_claim", "o--"),
    ("store: XAUTOCLAIM COUNT 1000 loop via execute", STORE, "autoclaim_1000", "s:"),
)


def plot(results: Mapping[str, Any], path: str) -> None:
    """Writes a PNG: recovery time vs N (left) and the 1k claim vs PEL size (right), log-log, both systems."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results["sizes"], key=int)
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for label, system, step, style in PLOTTED:
        points = [(int(n), results["sizes"][n].get(system, {}).get(step)) for n in sizes]
        measured = [(n, t["seconds"]) for n, t in points if t is not None]
        if measured:
            projected_any = any(t is not None and t.get("projected") for _, t in points)
            suffix = " (projected from its first calls)" if projected_any else ""
            left.plot(*zip(*measured, strict=True), style, label=label + suffix)
    left.set(xscale="log", yscale="log", xlabel="stale entries N", ylabel="seconds", title="Recover N stale entries")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    for label, system, style in (("Redis", REDIS, "o-"), ("store", STORE, "o--")):
        points = [(int(n), results["sizes"][n].get(system, {}).get("claim_1k")) for n in sizes]
        measured = [(n, t["seconds"]) for n, t in points if t is not None]
        if measured:
            right.plot(*zip(*measured, strict=True), style, label=label)
    right.set(
        xscale="log", yscale="log", xlabel="PEL size", ylabel="seconds", title="Claim 1,000 stale entries (one call)"
    )
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    meta = results.get("meta", {})
    figure.suptitle(f"streamclaim-spark vs redis-server {meta.get('redis_version', '')} on {meta.get('machine', '')}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def merge(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several runs' results as one: sizes from every run (a later run wins a size), the first latency
    measured, the first run's ``meta`` plus every run's ``meta`` under ``runs`` (say which size came from
    which run)."""
    merged: dict[str, Any] = {"sizes": {}, "latency": {}, "meta": dict(runs[0].get("meta", {})), "runs": []}
    for run in runs:
        merged["sizes"].update(run["sizes"])
        if not merged["latency"] and run.get("latency"):
            merged["latency"] = run["latency"]
        merged["runs"].append({"sizes": sorted(run["sizes"], key=int), "meta": run.get("meta", {})})
    return merged


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench.report RESULTS.json [MORE.json ...] --out DIR [--previous OLD.json]``: merge runs,
    redraw, print tables (and, with ``--previous``, the merged run next to an earlier one)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results", nargs="+", help="results.json files of bench.side_by_side runs")
    parser.add_argument("--out", default="docs/benchmarks", help="folder for the merged results.json and plot")
    parser.add_argument("--previous", help="an earlier results.json: also print both runs side by side")
    args = parser.parse_args(argv)
    runs = []
    for path in args.results:
        with open(path, encoding="utf-8") as handle:
            runs.append(json.load(handle))
    results = merge(runs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
    plot(results, os.path.join(args.out, "time_vs_n.png"))
    print(comparison_table(results))
    print()
    print(latency_table(results))
    if args.previous:
        with open(args.previous, encoding="utf-8") as handle:
            print()
            print(before_after_table(json.load(handle), results))


if __name__ == "__main__":
    main()

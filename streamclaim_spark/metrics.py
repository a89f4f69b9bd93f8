"""Metrics out: each group's numbers (the ``metrics`` view) and a recovery run's outcome, for Prometheus.

``group_metrics`` runs the metrics view's query (sql.metrics_sql: pending, stale, oldest idle, lag,
consumers, dead letters of the last day per group) for the groups a run selected. ``prometheus_registry``
turns them, and a run's report, into a ``prometheus_client`` registry, which ``write_textfile`` writes for
node_exporter's textfile collector (atomically: the client library writes a temporary file and renames it)
and ``push`` sends to a Pushgateway. The exposition is the client library's own, never hand-written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.patterns import matches
from streamclaim_spark.fleet.recovery import SUCCEEDED, RecoveryReport
from streamclaim_spark.sql import metrics_sql, view_queries
from streamclaim_spark.state.delta_io import is_delta_table
from streamclaim_spark.state.tables import table_path

# The job name a Pushgateway files the metrics under (its ``job`` label).
PUSH_JOB = "streamclaim-recover"
_LABELS = ("stream", "group")


@dataclass(frozen=True)
class GroupMetrics:
    """One group's row of the metrics view; None where the view has null (no owned pending entry, a lag
    Redis could not know either)."""

    stream: str
    group: str
    pending: int
    stale: int
    stale_after_ms: int
    nacked: int
    oldest_idle_ms: int | None
    max_delivery_count: int | None
    lag: int | None
    consumers: int
    dead_letters_last_day: int


def group_metrics(
    spark: SparkSession,
    store_path: str,
    stale_after_ms: int,
    streams: Sequence[str] = ("*",),
    groups: Sequence[str] = ("*",),
) -> list[GroupMetrics]:
    """The metrics of every group whose stream and name match the patterns, in one query (which creates
    nothing: a store without a dead-letter table has dead-lettered nothing)."""
    letters = is_delta_table(spark, table_path(store_path, C.DEAD_LETTER_TABLE_DIR))
    query = metrics_sql(store_path, view_queries(store_path)["groups"], stale_after_ms, letters)
    rows = spark.sql(query).collect()
    return [
        GroupMetrics(**{("group" if name == C.GROUP else name): value for name, value in row.asDict().items()})
        for row in rows
        if matches(row[C.STREAM], streams) and matches(row[C.GROUP], groups)
    ]


# (GroupMetrics field, metric name, help); an entry whose value is None is left out of the exposition.
_GROUP_GAUGES = (
    ("pending", "streamclaim_pending_entries", "Entries delivered to the group and not yet acknowledged (XPENDING)."),
    ("stale", "streamclaim_stale_entries", "Pending entries owned and idle at least streamclaim_stale_after_seconds."),
    ("nacked", "streamclaim_nacked_entries", "Pending entries given back to the group (XNACK), waiting for a claim."),
    ("lag", "streamclaim_group_lag", "Entries not yet delivered to the group (XINFO GROUPS lag); absent if unknown."),
    ("consumers", "streamclaim_consumers", "Consumers the group knows (XINFO CONSUMERS)."),
    ("max_delivery_count", "streamclaim_max_delivery_count", "Highest delivery count among the pending entries."),
    ("dead_letters_last_day", "streamclaim_dead_letters_last_day", "Entries of the group dead-lettered in 24 hours."),
)


def prometheus_registry(groups: Sequence[GroupMetrics], report: RecoveryReport | None = None) -> CollectorRegistry:
    """A registry holding every group's gauges (labels ``stream`` and ``group``) and, given a report of a
    run that was not a dry run, the run's own."""
    registry = CollectorRegistry()
    for name, metric, text in _GROUP_GAUGES:
        gauge = Gauge(metric, text, _LABELS, registry=registry)
        for group in groups:
            value = getattr(group, name)
            if value is not None:
                gauge.labels(group.stream, group.group).set(value)
    oldest = Gauge(
        "streamclaim_oldest_pending_idle_seconds",
        "Idle time of the group's longest-waiting owned pending entry (absent when none is owned).",
        _LABELS,
        registry=registry,
    )
    threshold = Gauge(
        "streamclaim_stale_after_seconds", "Idle time from which a pending entry counts as stale.", registry=registry
    )
    for group in groups:
        if group.oldest_idle_ms is not None:
            oldest.labels(group.stream, group.group).set(group.oldest_idle_ms / 1000)
        threshold.set(group.stale_after_ms / 1000)
    if report is not None and not report.options.dry_run:
        _add_run(registry, report)
    return registry


def _add_run(registry: CollectorRegistry, report: RecoveryReport) -> None:
    """The run's gauges: when it ended, how long it took, whether it succeeded, what it did to entries."""
    prefix = "streamclaim_recovery_last_run"
    Gauge(f"{prefix}_timestamp_seconds", "When the last recovery run ended.", registry=registry).set(
        report.ended_at_ms / 1000
    )
    Gauge(f"{prefix}_duration_seconds", "How long the last recovery run took.", registry=registry).set(
        (report.ended_at_ms - report.started_at_ms) / 1000
    )
    Gauge(f"{prefix}_success", "1 if the last run succeeded, 0 if it failed or was partial.", registry=registry).set(
        1 if report.status == SUCCEEDED else 0
    )
    entries = Gauge(
        f"{prefix}_entries", "Entries the last run claimed, purged or dead-lettered.", ["outcome"], registry=registry
    )
    totals = report.totals
    for outcome in ("claimed", "purged", "dead_lettered"):
        entries.labels(outcome).set(totals[outcome])
    Gauge(f"{prefix}_skipped_groups", "Groups the last run left contended.", registry=registry).set(totals["skipped"])


def write_textfile(path: str, registry: CollectorRegistry) -> None:
    """Writes the registry in the text format, for node_exporter's textfile collector (a ``.prom`` file)."""
    write_to_textfile(path, registry)


def push(gateway: str, registry: CollectorRegistry, job: str = PUSH_JOB) -> None:
    """Sends the registry to a Pushgateway (``http://host:9091``), replacing what ``job`` pushed before."""
    push_to_gateway(gateway, job=job, registry=registry)

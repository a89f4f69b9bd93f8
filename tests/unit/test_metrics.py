"""Metrics out (metrics.py) without Spark: a registry from known numbers, pushed to a Pushgateway stand-in.

The Pushgateway here is a real HTTP server on loopback that records what it receives (the client library
speaks to it as to a Pushgateway); the body is read back with the client library's own parser.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.fleet.recovery import GroupReport, RecoveryReport
from streamclaim_spark.metrics import PUSH_JOB, GroupMetrics, prometheus_registry, push

RECEIVED: list[tuple[str, str, bytes]] = []


class _Gateway(BaseHTTPRequestHandler):
    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        RECEIVED.append((self.command, self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_push_sends_every_group_gauge_and_the_run_under_the_job_name(gateway: str) -> None:
    groups = [
        GroupMetrics("orders", "billing", 4, 3, 300_000, 1, 7_200_000, 12, None, 2, 5),
        GroupMetrics("orders", "shipping", 0, 0, 300_000, 0, None, None, 17, 1, 0),
    ]
    groups_report = (GroupReport("orders", "billing", scanned=4, stale=3, claimed=2, dead_lettered=1),)
    report = RecoveryReport("r1", "/s", RecoveryOptions(), 1_000_000, 1_004_500, groups=groups_report)
    RECEIVED.clear()

    push(gateway, prometheus_registry(groups, report))

    ((method, path, body),) = RECEIVED
    assert (method, path) == ("PUT", f"/metrics/job/{PUSH_JOB}")
    samples = {
        (sample.name, tuple(sorted(sample.labels.values()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    billing, shipping = ("billing", "orders"), ("orders", "shipping")
    # Absent where the view has null: billing's lag, shipping's oldest idle and highest delivery count.
    assert samples == {
        ("streamclaim_pending_entries", billing): 4,
        ("streamclaim_pending_entries", shipping): 0,
        ("streamclaim_stale_entries", billing): 3,
        ("streamclaim_stale_entries", shipping): 0,
        ("streamclaim_nacked_entries", billing): 1,
        ("streamclaim_nacked_entries", shipping): 0,
        ("streamclaim_group_lag", shipping): 17,
        ("streamclaim_consumers", billing): 2,
        ("streamclaim_consumers", shipping): 1,
        ("streamclaim_max_delivery_count", billing): 12,
        ("streamclaim_dead_letters_last_day", billing): 5,
        ("streamclaim_dead_letters_last_day", shipping): 0,
        ("streamclaim_oldest_pending_idle_seconds", billing): 7_200,
        ("streamclaim_stale_after_seconds", ()): 300,
        ("streamclaim_recovery_last_run_timestamp_seconds", ()): 1_004.5,
        ("streamclaim_recovery_last_run_duration_seconds", ()): 4.5,
        ("streamclaim_recovery_last_run_success", ()): 1,
        ("streamclaim_recovery_last_run_entries", ("claimed",)): 2,
        ("streamclaim_recovery_last_run_entries", ("purged",)): 0,
        ("streamclaim_recovery_last_run_entries", ("dead_lettered",)): 1,
        ("streamclaim_recovery_last_run_skipped_groups", ()): 0,
    }


def test_a_dry_run_adds_no_run_gauges() -> None:
    report = RecoveryReport("r1", "/s", RecoveryOptions(dry_run=True), 0, 1)

    names = {family.name for family in prometheus_registry([], report).collect()}

    assert not any(name.startswith("streamclaim_recovery") for name in names)

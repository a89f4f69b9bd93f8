"""The recovery job's command line: ``streamclaim-recover`` and ``spark-submit jobs/recover_stale.py``.

Wiring only: parse flags, load ``conf/`` (base.toml, then local.toml, then the flags), get the session
from ``session.session_from_config``, open the store and call ``recovery.recover_stale``. The JSON summary
goes to stdout, a line per step to stderr, the whole log to the log file it names (cli/console.py). Exit
codes: 0 success, 1 the run failed, 2 bad flags or config or a selection that matches no group, 3 no store
at the configured path, 4 partial (contended groups skipped).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark.cli.flags import (
    add_output_flags,
    add_spark_flags,
    add_store_flags,
    job_console,
    print_line,
    start_job,
)
from streamclaim_spark.cli.job_store import EXIT_NO_STORE as EXIT_NO_STORE  # re-exported: one of the job's exit codes
from streamclaim_spark.cli.job_store import job_session, store_refusal
from streamclaim_spark.core.config import ASSIGN_MODES, AppConfig
from streamclaim_spark.core.retention import check_retention
from streamclaim_spark.errors import (
    InvalidArgumentError,
    MaintenanceRefusedError,
    StoreLayoutError,
)
from streamclaim_spark.fleet.recovery import (
    PARTIAL,
    RecoveryFailedError,
    RecoveryReport,
    RecoverySelectionError,
    recover_stale,
)
from streamclaim_spark.metrics import PUSH_JOB, group_metrics, prometheus_registry, push, write_textfile
from streamclaim_spark.state.session import DELTA_PACKAGE, has_delta_jar
from streamclaim_spark.state.tables import upgrade_layout
from streamclaim_spark.store import StreamStore

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_CONFIG = 2
# Some groups stayed contended through every claim commit; the others are recovered (docs/RECOVERY.md).
EXIT_PARTIAL = 4
CONF_DIR_ENV = "STREAMCLAIM_CONF_DIR"
PROG = "streamclaim-recover"

log = logging.getLogger("streamclaim_spark.cli.recover")


# Long: one add_argument per flag, in the order --help lists them; split up, the flags' help would be
# scattered over helpers that each run once.
def build_parser() -> argparse.ArgumentParser:
    """The job's flags; each one overrides the conf/ key named in its help."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Claim stale pending entries of Redis-style consumer groups in a streamclaim store, and "
        "dead-letter the ones delivered too often. Settings come from conf/base.toml, then conf/local.toml, "
        "then these flags.",
        epilog="Exit codes: 0 success, 1 the run failed, 2 bad flags or config or a selection that matches no "
        "group, 3 no store at the path, 4 partial (some groups stayed contended and were skipped).",
    )
    where = add_store_flags(parser, CONF_DIR_ENV)
    where.add_argument(
        "--upgrade-layout",
        action="store_true",
        help='rewrite a store made by an older version into today\'s layout, print {"upgraded": ...} and exit; '
        "stop every writer of the store first",
    )
    run = parser.add_argument_group("what the run does [jobs.recover_stale]")
    run.add_argument("--streams", nargs="+", metavar="PATTERN", help="stream names or glob patterns [streams]")
    run.add_argument("--groups", nargs="+", metavar="PATTERN", help="group names or glob patterns [groups]")
    run.add_argument(
        "--min-idle", metavar="DURATION", help='claim entries idle at least this long, e.g. "5m" [min_idle]'
    )
    run.add_argument(
        "--assign",
        choices=ASSIGN_MODES,
        help="claim to one consumer, spread over live ones, or give back to the group (XNACK) [assign]",
    )
    run.add_argument("--consumer", metavar="NAME", help="the recovery consumer [consumer]")
    run.add_argument(
        "--live-window", metavar="DURATION", help="consumers active within this are live, e.g. 10m [live_window]"
    )
    run.add_argument(
        "--dead-letter",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="dead-letter entries delivered more than --max-deliveries times [dead_letter]",
    )
    run.add_argument(
        "--max-deliveries", type=int, metavar="N", help="highest delivery count still claimed [max_deliveries]"
    )
    run.add_argument(
        "--backoff",
        metavar="SCHEDULE",
        help='wait longer after each delivery before claiming again: "1m,5m,30m,2h" (by delivery count, the '
        'last repeating) or "10s..10m" (doubling); never less than --min-idle [backoff]',
    )
    run.add_argument(
        "--dry-run",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="report what the run would do and change nothing [dry_run]",
    )
    run.add_argument(
        "--maintain",
        action="store_true",
        dest="maintain_after_run",  # not server.maintain's key, which a flag named "maintain" would set
        help="after the run, compact, vacuum past store.history_retention and trim the log, as "
        'streamclaim-maintain does; its summary goes under "maintenance"',
    )
    run.add_argument(
        "--retain",
        metavar="DURATION",
        help='with --maintain: the history to keep from now on, e.g. "1h" [store.history_retention]',
    )
    add_spark_flags(parser)
    output = add_output_flags(parser)
    output.add_argument(
        "--metrics-file",
        metavar="PATH",
        help="after the run, write each selected group's metrics and the run's in Prometheus' text format "
        "(node_exporter's textfile collector: a .prom file in its folder); the stale count uses --min-idle",
    )
    output.add_argument(
        "--pushgateway",
        metavar="URL",
        help=f"after the run, push the same metrics to this Pushgateway, e.g. http://localhost:9091 (job {PUSH_JOB})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the recovery job; returns the process exit code."""
    started = start_job(build_parser(), argv, PROG)
    if isinstance(started, int):
        return started
    args, config = started
    with job_console(PROG, args):
        log.info("config from %s (then flags); store %s", ", ".join(config.sources), config.store.path)
        try:
            return run_job(
                config,
                summary_file=args.summary_file,
                upgrade=args.upgrade_layout,
                maintain=args.maintain_after_run,
                metrics=MetricsTargets(args.metrics_file, args.pushgateway),
            )
        except Exception:
            log.exception("the run stopped on an unexpected error")
            return EXIT_RUN_FAILED


def run_job(
    config: AppConfig,
    spark: SparkSession | None = None,
    summary_file: str | None = None,
    upgrade: bool = False,
    maintain: bool = False,
    metrics: MetricsTargets | None = None,
) -> int:
    """Opens the configured store and runs recovery; prints the JSON summary; returns the exit code.

    Args:
        config: The loaded configuration.
        spark: A session to use (tests, notebooks); None builds one from ``config.spark``.
        summary_file: Also write the JSON summary to this file (default: stdout only).
        upgrade: Instead of a run, rewrite a store of an older layout into today's (tables.upgrade_layout).
        maintain: After a run that changed the store, run maintenance (``fleet.maintenance``) too.
        metrics: Where to send the groups' and the run's metrics after the run (file, Pushgateway).
    """
    with job_session(config, spark) as session:
        if not has_delta_jar(session):
            return _fail(
                EXIT_CONFIG,
                "Delta Lake's jar is not on Spark's classpath. Under spark-submit add "
                f"--packages {DELTA_PACKAGE} (spark-submit resolves packages before the job starts).",
            )
        refused = store_refusal(session, config)
        if refused is not None:
            return _fail(*refused)
        if upgrade:
            upgraded = upgrade_layout(session, config.store.path)
            print_line({"store": config.store.path, "upgraded": upgraded}, summary_file)
            return EXIT_OK
        try:
            store = StreamStore.open(
                config.store.path, spark=session, single_writer=config.store.single_writer, placement=config.placement
            )
        except StoreLayoutError as error:
            return _fail(EXIT_CONFIG, f"{error} (or run {PROG} --upgrade-layout --store {config.store.path})")
        return _recover_and_report(store, config, summary_file, maintain, metrics or MetricsTargets())


def _recover_and_report(
    store: StreamStore, config: AppConfig, summary_file: str | None, maintain: bool, metrics: MetricsTargets
) -> int:
    """Runs recovery on the opened store, then maintenance and metrics as asked; prints the JSON summary;
    returns the exit code."""
    retain_ms = config.store.history_retention_ms
    if maintain and retain_ms is not None:
        try:
            check_retention(retain_ms, "--retain / store.history_retention")
        except InvalidArgumentError as error:
            return _fail(EXIT_CONFIG, str(error))
    try:
        report = recover_stale(store, config.recover_stale)
    except RecoverySelectionError as error:
        return _fail(EXIT_CONFIG, f"selection error: {error}")
    except RecoveryFailedError as error:
        failed = error.report.to_json()
        if metrics.wanted:
            failed["metrics"] = metrics_summary(store.spark, config, error.report, metrics)
        print_line(failed, summary_file)
        return _fail(EXIT_RUN_FAILED, str(error))
    summary = report.to_json()
    if maintain and not config.recover_stale.dry_run:
        summary["maintenance"] = maintenance_summary(store, config)
    if metrics.wanted:
        summary["metrics"] = metrics_summary(store.spark, config, report, metrics)
    print_line(summary, summary_file)
    if report.status == PARTIAL:
        return _fail(EXIT_PARTIAL, f"recovery run {report.run_id} was partial: {report.error}")
    return EXIT_OK


def maintenance_summary(store: StreamStore, config: AppConfig) -> dict[str, Any]:
    """Runs maintenance after a recovery run; a refusal (a streaming query would be stranded) is reported,
    not raised: the run itself succeeded."""
    try:
        return store.maintain(config.store.history_retention_ms).to_json()
    except MaintenanceRefusedError as refused:
        log.warning("maintenance refused: %s", refused)
        return {"refused": str(refused)}


@dataclass(frozen=True)
class MetricsTargets:
    """Where the job sends metrics after a run: a Prometheus text file, a Pushgateway, both or neither."""

    file: str | None = None
    pushgateway: str | None = None

    @property
    def wanted(self) -> bool:
        return self.file is not None or self.pushgateway is not None


def metrics_summary(
    session: SparkSession, config: AppConfig, report: RecoveryReport, targets: MetricsTargets
) -> dict[str, Any]:
    """Sends the selected groups' metrics (stale at the run's min_idle) and the run's; a failure to read or
    send them is reported, not raised: the run itself is over, and its exit code stays the run's."""
    options = config.recover_stale
    summary: dict[str, Any] = {"file": targets.file, "pushgateway": targets.pushgateway, "error": None}
    try:
        groups = group_metrics(session, config.store.path, options.min_idle_ms, options.streams, options.groups)
        registry = prometheus_registry(groups, report)
        summary["groups"] = len(groups)
        if targets.file is not None:
            write_textfile(targets.file, registry)
        if targets.pushgateway is not None:
            push(targets.pushgateway, registry)
    except Exception as error:
        log.error("metrics not sent: %s: %s", type(error).__name__, error)
        summary["error"] = f"{type(error).__name__}: {error}"
    return summary


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()
    return code

"""The maintenance job's command line: ``streamclaim-maintain`` and ``spark-submit jobs/maintain.py``.

Wiring only: parse flags, load ``conf/`` (base.toml, then local.toml, then the flags), get the session,
and call ``fleet.maintenance.maintain`` on the configured store, or with ``--verify`` (and ``--repair``)
``fleet.maintenance.verify_counts`` instead. The JSON summary is stdout's last line (with ``--verbose``
Delta's VACUUM prints a line of its own to the JVM's stdout before it; ``--summary-file`` holds the
summary alone); a line per table, and each count that differs, go to stderr, the whole log to the log
file it names (cli/console.py). Exit codes: 0 success, 1 the run failed, 2 bad flags or config (a
retention under a minute), 3 no store at the path, 4 refused (a streaming query would be left unable to
restart), 5 ``--verify`` found a kept count that differs from a recount (repaired or not: the summary says).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession

from streamclaim_spark.cli.flags import (
    add_output_flags,
    add_spark_flags,
    add_store_flags,
    job_console,
    print_line,
    start_job,
)
from streamclaim_spark.cli.job_store import job_session, store_refusal
from streamclaim_spark.cli.recover import CONF_DIR_ENV
from streamclaim_spark.core.config import AppConfig
from streamclaim_spark.errors import InvalidArgumentError, MaintenanceRefusedError, StoreLayoutError
from streamclaim_spark.fleet.maintenance import maintain
from streamclaim_spark.store import StreamStore

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_CONFIG = 2
EXIT_REFUSED = 4
# --verify found a kept count that differs from its recount (with --repair: and rewrote it).
EXIT_MISMATCH = 5
PROG = "streamclaim-maintain"

log = logging.getLogger("streamclaim_spark.cli.maintain")


def build_parser() -> argparse.ArgumentParser:
    """The job's flags; each one overrides the conf/ key named in its help."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compact small files, remove files older than the history retention and trim the Delta log "
        "of a streamclaim store; safe while the server, recovery jobs and streaming queries write. Settings "
        "come from conf/base.toml, then conf/local.toml, then these flags.",
        epilog="Exit codes: 0 success, 1 the run failed, 2 bad flags or config, 3 no store at the path, "
        "4 refused (a streaming query would be left unable to restart), 5 --verify found a kept count that "
        "differs from a recount (repaired or not: the summary says).",
    )
    add_store_flags(parser, CONF_DIR_ENV)
    run = parser.add_argument_group("what the run keeps")
    run.add_argument(
        "--retain",
        metavar="DURATION",
        help='history to keep from now on, e.g. "1m", "2h", "7d"; stored on the tables (unset: theirs, '
        "Delta's 7 days) [store.history_retention]",
    )
    run.add_argument(
        "--ignore-readers",
        action="store_true",
        help="go on even if a streaming query stopped earlier could then not restart from its checkpoint",
    )
    counts = parser.add_argument_group("kept counts, instead of maintenance")
    counts.add_argument(
        "--verify",
        action="store_true",
        help="recount every group's and consumer's pending entries and report each kept count that differs "
        "(exit code 5); changes nothing, and runs no maintenance",
    )
    counts.add_argument(
        "--repair",
        action="store_true",
        help="with --verify: rewrite the counts that differ, in one commit guarded like any writer's",
    )
    add_spark_flags(parser)
    add_output_flags(parser)
    return parser


def _flag_conflict(args: argparse.Namespace) -> str | None:
    """Why the flags given do not go together, or None."""
    if args.repair and not args.verify:
        return "--repair goes with --verify"
    if args.verify and (args.retain is not None or args.ignore_readers):
        return "--verify checks the kept counts instead of maintaining: --retain and --ignore-readers do not apply"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one maintenance of the configured store; returns the process exit code."""
    started = start_job(build_parser(), argv, PROG)
    if isinstance(started, int):
        return started
    args, config = started
    conflict = _flag_conflict(args)
    if conflict is not None:
        return _fail(EXIT_CONFIG, conflict)
    with job_console(PROG, args):
        try:
            if args.verify:
                return verify_job(config, repair=args.repair, summary_file=args.summary_file)
            return run_job(config, ignore_readers=args.ignore_readers, summary_file=args.summary_file)
        except Exception:
            log.exception("maintenance stopped on an unexpected error")
            return EXIT_RUN_FAILED


def run_job(
    config: AppConfig,
    spark: SparkSession | None = None,
    *,
    ignore_readers: bool = False,
    summary_file: str | None = None,
) -> int:
    """Maintains the configured store and prints the JSON summary; returns the exit code.

    Args:
        config: The loaded configuration (``store.history_retention`` is the retention to keep).
        spark: A session to use (tests, notebooks); None builds one from ``config.spark``.
        ignore_readers: Go on even when a streaming query would be left unable to restart.
        summary_file: Also write the JSON summary to this file.
    """
    with job_session(config, spark, PROG) as session:
        refused = store_refusal(session, config)
        if refused is not None:
            return _fail(*refused)
        try:
            report = maintain(
                session,
                config.store.path,
                retain_ms=config.store.history_retention_ms,
                retain_setting="--retain / store.history_retention",
                ignore_readers=ignore_readers,
            )
        except InvalidArgumentError as error:
            return _fail(EXIT_CONFIG, str(error))
        except MaintenanceRefusedError as error:
            return _fail(EXIT_REFUSED, f"refused: {error}")
        print_line(report.to_json(), summary_file)
        return EXIT_OK


def verify_job(
    config: AppConfig, spark: SparkSession | None = None, *, repair: bool = False, summary_file: str | None = None
) -> int:
    """Checks the configured store's kept counts (and with ``repair`` rewrites the wrong ones), prints the
    JSON summary; returns ``EXIT_MISMATCH`` when a count differed, else ``EXIT_OK``.

    Args:
        config: The loaded configuration (``store.path``, ``store.single_writer``).
        spark: A session to use (tests, notebooks); None builds one from ``config.spark``.
        repair: Rewrite the counts that differ, in one guarded commit.
        summary_file: Also write the JSON summary to this file.
    """
    with job_session(config, spark, PROG) as session:
        refused = store_refusal(session, config)
        if refused is not None:
            return _fail(*refused)
        try:
            store = StreamStore.open(
                config.store.path, spark=session, single_writer=config.store.single_writer, placement=config.placement
            )
        except StoreLayoutError as error:
            return _fail(EXIT_CONFIG, f"{error} (or run streamclaim-recover --upgrade-layout)")
        report = store.verify_counts(repair=repair)
        print_line(report.to_json(), summary_file)
        if not report.mismatches:
            return EXIT_OK
        version = report.repaired_version
        done = f"repaired in version {version}" if version is not None else "not repaired"
        return _fail(EXIT_MISMATCH, f"{len(report.mismatches)} kept count(s) differ from a recount ({done})")


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""The redrive job's command line: ``streamclaim-redrive`` and ``spark-submit jobs/redrive.py``.

Wiring only: parse flags, load ``conf/`` (base.toml, then local.toml, then the flags), get the session,
open the store and call ``fleet.redrive.redrive``. The JSON summary goes to stdout, a line per step to
stderr, the whole log to the log file it names (cli/console.py). Exit codes: 0 success, 1 the run failed
(a re-run finishes it), 2 bad flags or config, a ``--where`` that does not parse or patterns that match no
group, 3 no store at the configured path.
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
    overrides_from,
    print_line,
    start_job,
)
from streamclaim_spark.cli.job_store import job_session, store_refusal
from streamclaim_spark.cli.recover import CONF_DIR_ENV
from streamclaim_spark.core.config import AppConfig, RedriveOptions
from streamclaim_spark.errors import StoreLayoutError
from streamclaim_spark.fleet.redrive import RedriveFailedError, RedriveSelectionError, redrive
from streamclaim_spark.store import StreamStore

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_CONFIG = 2
PROG = "streamclaim-redrive"

log = logging.getLogger("streamclaim_spark.cli.redrive")


def build_parser() -> argparse.ArgumentParser:
    """The job's flags; each one overrides the conf/ key named in its help."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Put dead-lettered entries of a streamclaim store back into the consumer groups they died "
        "in (first in the group's NACK zone, for XREADGROUP ... CLAIM), exactly once. Settings come from "
        "conf/base.toml, then conf/local.toml, then these flags.",
        epilog="Exit codes: 0 success, 1 the run failed (run again to finish it), 2 bad flags or config, a "
        "--where that does not parse or patterns that match no group, 3 no store at the path.",
    )
    add_store_flags(parser, CONF_DIR_ENV)
    run = parser.add_argument_group("what the run puts back [jobs.redrive]")
    run.add_argument("--streams", nargs="+", metavar="PATTERN", help="stream names or glob patterns [streams]")
    run.add_argument("--groups", nargs="+", metavar="PATTERN", help="group names or glob patterns [groups]")
    run.add_argument(
        "--where",
        metavar="PREDICATE",
        help="Spark SQL over the dead_letters view's columns, e.g. \"reason LIKE 'max-deliveries%%'\" [where]",
    )
    run.add_argument(
        "--reset-count",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="put entries back with a delivery count of 0 (XNACK FATAL ones always are) [reset_count]",
    )
    run.add_argument(
        "--max-redrives",
        type=int,
        metavar="N",
        help="redrive one entry at most N times; then it stays dead [max_redrives]",
    )
    run.add_argument(
        "--limit", type=int, metavar="N", help="put back at most N entries, oldest dead letter first [limit]"
    )
    run.add_argument(
        "--to-stream",
        metavar="KEY",
        help="entries whose stream entry is gone become new entries of this stream, with where they came "
        "from in three more fields [to_stream]",
    )
    run.add_argument(
        "--dry-run",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="report what the run would do and change nothing [dry_run]",
    )
    add_spark_flags(parser)
    add_output_flags(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one redrive of the configured store; returns the process exit code."""
    started = start_job(build_parser(), argv, PROG, lambda args: overrides_from(args, RedriveOptions.TABLE))
    if isinstance(started, int):
        return started
    args, config = started
    with job_console(PROG, args):
        try:
            return run_job(config, summary_file=args.summary_file)
        except Exception:
            log.exception("the redrive stopped on an unexpected error")
            return EXIT_RUN_FAILED


def run_job(config: AppConfig, spark: SparkSession | None = None, summary_file: str | None = None) -> int:
    """Opens the configured store and redrives its dead letters; prints the JSON summary; returns the exit code."""
    with job_session(config, spark, PROG) as session:
        refused = store_refusal(session, config)
        if refused is not None:
            return _fail(*refused)
        try:
            store = StreamStore.open(
                config.store.path, spark=session, single_writer=config.store.single_writer, placement=config.placement
            )
        except StoreLayoutError as error:
            return _fail(
                EXIT_CONFIG, f"{error} (or run streamclaim-recover --upgrade-layout --store {config.store.path})"
            )
        try:
            report = redrive(store, config.redrive)
        except RedriveSelectionError as error:
            return _fail(EXIT_CONFIG, f"selection error: {error}")
        except RedriveFailedError as error:
            print_line(error.report.to_json(), summary_file)
            return _fail(EXIT_RUN_FAILED, str(error))
        print_line(report.to_json(), summary_file)
        return EXIT_OK


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())

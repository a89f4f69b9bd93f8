"""The flags every job shares (Spark, output), how flags become config overrides, and the summary line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from streamclaim_spark.cli.console import add_console_flags, console
from streamclaim_spark.core.conf_keys import Key
from streamclaim_spark.core.config import AppConfig, RecoveryOptions
from streamclaim_spark.core.config_loader import flag_overrides, load_config
from streamclaim_spark.errors import ConfigError


def add_store_flags(parser: argparse.ArgumentParser, conf_dir_env: str) -> argparse._ArgumentGroup:
    """The "where" flags: the conf folder (default ``$conf_dir_env`` or ./conf), the store, single-writer
    mode; returns the group, for a job's own flags of that kind."""
    where = parser.add_argument_group("where")
    where.add_argument(
        "--conf-dir",
        default=os.environ.get(conf_dir_env, "conf"),
        help=f"folder with base.toml and the optional local.toml (default ${conf_dir_env} or ./conf)",
    )
    where.add_argument("--store", metavar="PATH", help="folder of the store [store.path]")
    where.add_argument(
        "--single-writer",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="promise that no other driver writes the store meanwhile (S3 without DynamoDB) [store.single_writer]",
    )
    return where


def add_spark_flags(parser: argparse.ArgumentParser) -> None:
    """The ``[spark]`` flags: where and how the job runs Spark."""
    spark = parser.add_argument_group("spark [spark]")
    spark.add_argument("--master", help="master URL when not under spark-submit [master]")
    spark.add_argument(
        "--remote", metavar="URL", help="run on a Spark Connect server, e.g. sc://host:15002 (docs/DEPLOY.md) [remote]"
    )
    spark.add_argument(
        "--shuffle-partitions", type=int, metavar="N", help="spark.sql.shuffle.partitions [shuffle_partitions]"
    )
    spark.add_argument("--driver-memory", metavar="SIZE", help='e.g. "2g"; console script only [driver_memory]')
    spark.add_argument("--spark-log-level", metavar="LEVEL", help="Spark's log level, e.g. WARN [log_level]")
    spark.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other spark.* setting; repeatable [spark.conf]",
    )


def add_output_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The job's own log level, where its log goes (``--verbose``, ``--log-file``: cli/console.py), and where
    its JSON summary goes besides stdout; returns the group, for a job's own output flags."""
    output = parser.add_argument_group("output")
    output.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="level of the job's own log, in the log file (on stderr with --verbose; default INFO)",
    )
    add_console_flags(output)
    output.add_argument(
        "--summary-file",
        metavar="PATH",
        help="also write the JSON summary to this file (spark-submit merges the job's stdout and stderr)",
    )
    return output


# What every job exits with on bad flags or config.
EXIT_CONFIG = 2


def start_job(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    prog: str,
    overrides: Callable[[argparse.Namespace], dict[Key, tuple[Any, str]]] | None = None,
) -> tuple[argparse.Namespace, AppConfig] | int:
    """Parses a job's flags and loads its config (conf/ files, then the flags, as ``overrides`` turns them
    into keys: ``overrides_from`` by default); an exit code (``EXIT_CONFIG``, said on stderr) instead when
    the flags or config are bad. The job then runs inside ``job_console``."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_CONFIG
    try:
        return args, load_config(args.conf_dir, (overrides or overrides_from)(args))
    except ConfigError as error:
        sys.stderr.write(f"{prog}: config error: {error}\n")
        sys.stderr.flush()
        return EXIT_CONFIG


@contextlib.contextmanager
def job_console(prog: str, args: argparse.Namespace) -> Iterator[Path | None]:
    """The console of a job run with ``args`` (``--verbose``, ``--log-file``, ``--log-level``): its log,
    Ivy's report and Spark's log in the log file it yields, unless ``--verbose`` (cli/console.py)."""
    with console(prog, verbose=args.verbose, level=args.log_level, log_file=args.log_file) as log_file:
        yield log_file


def overrides_from(args: argparse.Namespace, job: Key = RecoveryOptions.TABLE) -> dict[Key, tuple[Any, str]]:
    """The flags given, as config keys with the flag that set each (for error messages); of the jobs'
    tables only ``job``'s."""
    overrides = flag_overrides(args, job)
    for setting in args.spark_conf:
        name, equals, value = setting.partition("=")
        if not equals or not name:
            raise ConfigError(f"--spark-conf {setting!r}: write it as KEY=VALUE, e.g. spark.sql.adaptive.enabled=true")
        overrides[("spark", "conf", name.strip())] = (value, "--spark-conf")
    return overrides


def print_line(summary: dict[str, Any], summary_file: str | None = None) -> None:
    """``summary`` as one JSON line on stdout (and in ``summary_file`` when given)."""
    line = json.dumps(summary) + "\n"
    sys.stdout.write(line)
    sys.stdout.flush()
    if summary_file is not None:
        with open(summary_file, "w", encoding="utf-8") as handle:
            handle.write(line)

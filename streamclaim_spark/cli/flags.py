"""The flags every job shares (Spark, output), how flags become config overrides, and the summary line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streamclaim_spark.core.config import Key
from streamclaim_spark.core.config_loader import flag_overrides
from streamclaim_spark.errors import ConfigError


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


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """The job's own log level, and where its JSON summary goes besides stdout."""
    output = parser.add_argument_group("output")
    output.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="level of the job's own log on stderr (default INFO)",
    )
    output.add_argument(
        "--summary-file",
        metavar="PATH",
        help="also write the JSON summary to this file (spark-submit merges the job's stdout and stderr)",
    )


def overrides_from(args: argparse.Namespace) -> dict[Key, tuple[Any, str]]:
    """The flags given, as config keys with the flag that set each (for error messages)."""
    overrides = flag_overrides(args)
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

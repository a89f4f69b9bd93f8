"""``streamclaim-import`` (also ``python -m streamclaim_spark.importer``): a live Redis's streams into a store.

Wiring only: parse flags, connect with redis-py, build the session from ``conf/`` (``[spark]``), open
the store and call ``importer.import_redis``. A progress line per stream goes to stderr, the JSON
summary to stdout, Spark's and the import's log to the log file it names (cli/console.py). Exit codes:
0 imported, 1 the import failed, 2 bad input (flags, a pattern that matches no stream, a key that is not
a stream, a path that is not a store), 3 Redis unreachable or refusing the credentials. Nothing is written
to Redis, and nothing to the store unless the import commits.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyspark.sql import SparkSession

from streamclaim_spark.cli.console import add_console_flags
from streamclaim_spark.cli.flags import job_console, start_job
from streamclaim_spark.cli.recover import CONF_DIR_ENV
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.conf_keys import Key
from streamclaim_spark.core.config import SparkConfig
from streamclaim_spark.core.config_loader import flag_overrides
from streamclaim_spark.importer import DEFAULT_PAGE, ImportRefusedError, StreamCopy, import_redis
from streamclaim_spark.importer.redis_reader import raw_replies, stream_keys
from streamclaim_spark.state.session import session_from_config
from streamclaim_spark.state.tables import table_path
from streamclaim_spark.store import StreamStore

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REDIS = 3
PROG = "streamclaim-import"
# redis-cli takes the password from here when the URL has none; so do we.
PASSWORD_ENV = "REDISCLI_AUTH"

log = logging.getLogger("streamclaim_spark.importer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Copy a live Redis's streams, consumer groups, consumers and pending entries into a "
        "streamclaim store, exactly; a re-run brings the store level again. Nothing is written to Redis.",
        epilog="Exit codes: 0 imported, 1 the import failed, 2 bad input, 3 Redis unreachable or refusing "
        f"the credentials. The password may come from ${PASSWORD_ENV}, as redis-cli takes it.",
    )
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="URL",
        help="redis://[user:password@]host:port[/db], or rediss:// for TLS",
    )
    parser.add_argument("--store", required=True, metavar="PATH", help="folder of the store (created if missing)")
    parser.add_argument(
        "--streams",
        nargs="+",
        default=["*"],
        metavar="PATTERN",
        help="stream names or SCAN MATCH patterns (default every stream); store streams under these patterns "
        "that Redis no longer has are deleted",
    )
    parser.add_argument(
        "--page", type=int, default=DEFAULT_PAGE, metavar="N", help=f"entries per Redis reply (default {DEFAULT_PAGE})"
    )
    parser.add_argument("--staging", metavar="DIR", help="local folder for the staged pages (default: system temp)")
    parser.add_argument("--conf-dir", default=os.environ.get(CONF_DIR_ENV, "conf"), help="[spark] settings")
    parser.add_argument("--master", help="Spark master URL when not under spark-submit [spark.master]")
    parser.add_argument("--summary-file", metavar="PATH", help="also write the JSON summary to this file")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="level of the import's log, in the log file (on stderr with --verbose; default INFO)",
    )
    add_console_flags(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the import; returns the process exit code."""
    started = start_job(build_parser(), argv, PROG, overrides=_spark_overrides)
    if isinstance(started, int):
        return started
    args, config = started
    with job_console(PROG, args):
        return run_import(args, config.spark)


def _spark_overrides(args: argparse.Namespace) -> dict[Key, tuple[Any, str]]:
    """The import reads only [spark] from conf/: its store and streams are its own flags."""
    return {key: value for key, value in flag_overrides(args).items() if key[0] == "spark"}


def run_import(args: argparse.Namespace, spark_config: SparkConfig, spark: SparkSession | None = None) -> int:
    """Checks Redis, the patterns and the store path before any JVM starts, then imports; the exit code.
    ``spark``: a session to use (tests, notebooks); None builds one from ``spark_config``."""
    try:
        client = connect(args.source)
        stream_keys(raw_replies(client), args.streams)
    except ImportRefusedError as error:
        return _fail(EXIT_BAD_INPUT, str(error))
    except Exception as error:  # redis-py's ConnectionError, AuthenticationError, ResponseError (WRONGPASS)
        return _fail(EXIT_REDIS, f"cannot use Redis at {redacted(args.source)}: {error}")
    refusal = _not_a_store(args.store)
    if refusal:
        return _fail(EXIT_BAD_INPUT, refusal)
    session = spark if spark is not None else session_from_config(spark_config)
    try:
        store = StreamStore.open(args.store, spark=session)
        summary = import_redis(
            store, client, args.streams, page=args.page, staging_folder=args.staging, progress=_progress
        )
    except ImportRefusedError as error:
        return _fail(EXIT_BAD_INPUT, str(error))
    except Exception as error:
        if _is_redis_connection_error(error):
            return _fail(EXIT_REDIS, f"lost Redis at {redacted(args.source)}: {error}")
        log.exception("the import stopped on an unexpected error; the store is as it was before")
        return EXIT_FAILED
    finally:
        if spark is None:
            session.stop()
    line = json.dumps({"from": redacted(args.source), **summary.to_json()}) + "\n"
    sys.stdout.write(line)
    sys.stdout.flush()
    if args.summary_file:
        Path(args.summary_file).write_text(line, encoding="utf-8")
    return EXIT_OK


def connect(url: str) -> Any:
    """A redis-py client for ``url`` on RESP2, checked with PING; the password from ``REDISCLI_AUTH``
    when the URL has none."""
    import redis

    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ImportRefusedError(f"--from {redacted(url)}: give redis://host:port[/db] or rediss:// for TLS")
    options: dict[str, Any] = {"protocol": 2, "decode_responses": False, "socket_timeout": 60}
    if parts.password is None and os.environ.get(PASSWORD_ENV):
        options["password"] = os.environ[PASSWORD_ENV]
    client = redis.Redis.from_url(url, **options)
    client.ping()
    return client


def redacted(url: str) -> str:
    """``url`` without its password, for messages and the summary."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + parts.netloc.rsplit("@", 1)[1]))


def _not_a_store(path: str) -> str | None:
    """Why ``path`` cannot take an import: a local folder with files that is not a store (None: fine)."""
    if "://" in path and not path.startswith("file:"):
        return None
    folder = Path(path.removeprefix("file://").removeprefix("file:"))
    if not folder.exists() or (folder / C.STATE_TABLE_DIR / "_delta_log").is_dir():
        return None
    if folder.is_dir() and not any(folder.iterdir()):
        return None
    state = table_path(path, C.STATE_TABLE_DIR)
    return (
        f"--store {path} is not a store (no Delta table at {state}) and not empty: give a store's folder or a new one"
    )


def _is_redis_connection_error(error: BaseException) -> bool:
    import redis

    return isinstance(error, redis.ConnectionError | redis.TimeoutError)


def _progress(copy: StreamCopy) -> None:
    rate = copy.entries / copy.seconds if copy.seconds > 0 else 0.0
    again = f", read {copy.reads} times" + (" and still changing" if copy.changed else "") if copy.reads > 1 else ""
    sys.stderr.write(
        f"{PROG}: {copy.meta.key}: {copy.entries} entries ({copy.mode}), {copy.pel_rows} PEL rows, "
        f"{len(copy.groups)} groups in {copy.seconds:.2f} s ({rate:.0f} entries/s){again}\n"
    )


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()
    return code

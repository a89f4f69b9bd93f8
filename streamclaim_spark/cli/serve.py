"""The ``streamclaim-server`` console script: flags, config, Spark, and a server until SIGTERM or SIGINT.

Its log and Spark's go to the log file it names first (``--verbose``: stderr; cli/console.py); stdout says
when it is ready.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from streamclaim_spark.cli.console import add_console_flags, console
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.conf_keys import Key
from streamclaim_spark.core.config import AppConfig
from streamclaim_spark.core.config_loader import flag_overrides, load_config
from streamclaim_spark.errors import ConfigError, UnsafeObjectStoreError
from streamclaim_spark.server.server import PROG, StreamClaimServer
from streamclaim_spark.state.session import session_from_config
from streamclaim_spark.store import StreamStore

log = logging.getLogger("streamclaim_spark.server")

PASSWORD_ENV = "STREAMCLAIM_REQUIREPASS"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serve a streamclaim store over the Redis protocol: point redis-cli, redis-py or any Redis "
        "client at it. Settings come from conf/base.toml, then conf/local.toml, then these flags "
        "(docs/SERVER.md).",
    )
    parser.add_argument("--conf-dir", default=os.environ.get("STREAMCLAIM_CONF_DIR", "conf"), help="conf folder")
    parser.add_argument("--store", metavar="PATH", help="folder of the store; created when missing [store.path]")
    parser.add_argument(
        "--single-writer",
        action="store_true",
        default=None,
        help="promise that no other driver writes the store meanwhile (S3 without DynamoDB) [store.single_writer]",
    )
    parser.add_argument("--bind", metavar="ADDRESS", help="address to listen on [server.bind]")
    parser.add_argument("--port", type=int, help="TCP port, 0 for any free one [server.port]")
    parser.add_argument(
        "--requirepass",
        metavar="PASSWORD",
        help=f"password of the default user [server.requirepass]; ${PASSWORD_ENV} keeps it out of `ps`",
    )
    parser.add_argument("--max-clients", type=int, metavar="N", help="most connections at once [server.max_clients]")
    parser.add_argument(
        "--allow-flush", action="store_true", default=None, help="let FLUSHDB/FLUSHALL delete every stream"
    )
    parser.add_argument(
        "--batch-max-commands",
        type=int,
        metavar="N",
        help="most commands one group commit gathers from all clients [server.batch_max_commands]",
    )
    parser.add_argument(
        "--maintain",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compact, vacuum and trim the log in the background [server.maintain]",
    )
    parser.add_argument("--maintain-every", metavar="DURATION", help='how often, e.g. "10m" [server.maintain_every]')
    parser.add_argument(
        "--retain", metavar="DURATION", help='history the store keeps, e.g. "5m" [store.history_retention]'
    )
    parser.add_argument("--master", help="Spark master URL [spark.master]")
    parser.add_argument(
        "--log-level", default="INFO", help="this process' log level, in the log file (stderr with --verbose; INFO)"
    )
    add_console_flags(parser)
    return parser


def overrides_from(args: argparse.Namespace, environ: dict[str, str]) -> dict[Key, tuple[Any, str]]:
    """The flags given, and the password from the environment (a flag beats it), as config overrides."""
    overrides: dict[Key, tuple[Any, str]] = {}
    if environ.get(PASSWORD_ENV):
        overrides[("server", "requirepass")] = (environ[PASSWORD_ENV], PASSWORD_ENV)
    overrides.update(flag_overrides(args))
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the server until SIGTERM or SIGINT; returns the exit code (2: bad flags or config)."""
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.conf_dir, overrides_from(args, dict(os.environ)))
    except ConfigError as error:
        print(f"{PROG}: config error: {error}", file=sys.stderr)
        return 2
    with console(PROG, verbose=args.verbose, level=args.log_level.upper(), log_file=args.log_file):
        return serve(config)


def serve(config: AppConfig) -> int:
    """Starts Spark, opens (or creates) the store and serves it until SIGTERM or SIGINT."""
    stop_requested = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_requested.set())
    spark = session_from_config(replace(config.spark, app_name=PROG))
    try:
        try:
            store = StreamStore.open(
                config.store.path, spark=spark, single_writer=config.store.single_writer, placement=config.placement
            )
        except UnsafeObjectStoreError as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return 2
        server = StreamClaimServer(store, config.server, config.store.history_retention_ms).start()
        print(f"{PROG} ready on {config.server.bind}:{server.port} (store {store.path})", flush=True)
        while not stop_requested.wait(1.0):
            pass
        log.info("shutting down: finishing running commands, refusing new ones", extra=C.PROGRESS)
        server.stop()
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())

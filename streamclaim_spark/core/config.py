"""Typed configuration of the jobs: the sections of ``conf/*.toml`` as frozen dataclasses, and their keys.

Each key is declared once, on its dataclass field (``conf_key``: its parser, and its name in the file or
on the command line where that differs from the field's); the parsers (``conf_keys``) check and convert a
value, or say how to fix it. ``config_loader`` reads the files and flags into these sections, deriving the
schema, ``known_keys`` and the flags' overrides from the same fields. Nothing here touches Spark.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from streamclaim_spark.core.backoff import Backoff, parse_backoff
from streamclaim_spark.core.conf_keys import (
    Key,
    conf_key,
    conf_keys,
    parse_boolean,
    parse_identifier,
    parse_log_level,
    parse_memory,
    parse_password,
    parse_patterns,
    parse_port,
    parse_positive_int,
    parse_remote,
    parse_text,
    value_parser,
)
from streamclaim_spark.core.durations import parse_duration_ms
from streamclaim_spark.core.placement import Placement
from streamclaim_spark.errors import InvalidArgumentError

DEFAULT_DATABASE = "streamclaim"

Assign = Literal["consumer", "live", "nack"]
ASSIGN_MODES: tuple[Assign, ...] = ("consumer", "live", "nack")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def resolve_store_path(path: str, base: Path | str | None = None) -> str:
    """The store folder ``path`` names: a URL (``s3a://``, ``abfss://``, ``file:/``) as it is, a local path
    made absolute from ``base``: the project folder for a conf file, the current folder (None) for a flag."""
    if _URL_SCHEME.match(path):
        return path
    return os.path.abspath(os.path.join(base if base is not None else os.getcwd(), path))


_assign = value_parser(
    lambda v: v in ASSIGN_MODES,
    'must be "consumer" (one recovery consumer), "live" (spread over live consumers) or "nack" '
    "(give them back to their group, as XNACK FAIL does)",
)


@dataclass(frozen=True)
class StoreConfig:
    """Where the store lives.

    Args:
        path: Folder of the store: a local path, ``s3a://...``, ``abfss://...``.
        database: Spark catalog database the SQL views are registered under (default ``streamclaim``).
        single_writer: Promise that one driver at a time writes the store, so it may open on a log store
            that is safe for one writing driver only (S3 without the DynamoDB log store; docs/DEPLOY.md).
        history_retention_ms: How long the store keeps replaced files and log commits (time travel, and
            readers on older versions), stored on its tables by ``streamclaim-maintain``; None keeps what
            the tables have (Delta's 7 days of files, 30 of log, unless set before).
    """

    TABLE: ClassVar[Key] = ("store",)

    path: str = field(metadata=conf_key(parse_text, flag="store", from_flag=resolve_store_path))
    database: str = field(default=DEFAULT_DATABASE, metadata=conf_key(parse_identifier))
    single_writer: bool = field(default=False, metadata=conf_key(parse_boolean))
    history_retention_ms: int | None = field(
        default=None, metadata=conf_key(parse_duration_ms, "history_retention", flag="retain")
    )


@dataclass(frozen=True)
class SparkConfig:
    """How the job builds its SparkSession.

    Args:
        app_name: Application name shown in Spark's UI and logs.
        master: Master URL when the job starts Spark itself (console script); spark-submit's
            ``--master`` always wins.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        driver_memory: ``spark.driver.memory`` (``"2g"``); only applies when the job starts the JVM.
        log_level: Spark's log level (``spark.log.level``).
        conf: Any other ``spark.*`` settings, passed as they are.
        remote: A Spark Connect URL (``sc://host:port``): run on that Connect server instead of starting
            Spark (docs/DEPLOY.md, "Spark Connect"); ``master`` and ``driver_memory`` are then the server's.
    """

    TABLE: ClassVar[Key] = ("spark",)
    # The session builder takes these as arguments, so that spark-submit's own master can win.
    BUILDER_SETTINGS: ClassVar[tuple[str, ...]] = ("spark.app.name", "spark.master", "spark.remote")

    app_name: str = field(default="streamclaim-recover", metadata=conf_key(parse_text, spark="spark.app.name"))
    master: str = field(
        default="local[*]",
        metadata=conf_key(
            parse_text, spark="spark.master", through="spark.master (use [spark] master, or spark-submit --master)"
        ),
    )
    shuffle_partitions: int = field(
        default=4, metadata=conf_key(parse_positive_int, spark="spark.sql.shuffle.partitions")
    )
    driver_memory: str | None = field(default=None, metadata=conf_key(parse_memory, spark="spark.driver.memory"))
    log_level: str = field(
        default="WARN", metadata=conf_key(parse_log_level, flag="spark_log_level", spark="spark.log.level")
    )
    conf: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = field(default=None, metadata=conf_key(parse_remote, spark="spark.remote"))

    def settings(self) -> dict[str, str]:
        """Every Spark setting this config makes as ``spark.*`` keys, but the builder's own arguments."""
        settings = dict(self.conf)
        for name, _, declared in conf_keys(SparkConfig):
            value = getattr(self, name)
            if declared.spark and declared.spark not in self.BUILDER_SETTINGS and value is not None:
                settings[declared.spark] = str(value)
        return settings


class GroupPolicy(Protocol):
    """What the run's options need of a per-group policy (``core.policies.RecoveryPolicy``, which reads
    and applies them): the options only carry them, so this module does not import that one."""

    @property
    def name(self) -> str: ...

    def names(self, stream: str, group: str) -> bool: ...

    def over(self, options: RecoveryOptions) -> RecoveryOptions: ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RecoveryOptions:
    """What a recovery run does (the ``[jobs.recover_stale]`` table).

    Args:
        min_idle_ms: Claim (or dead-letter) only entries idle at least this long (default 5 minutes).
        streams: Stream names or glob patterns (default every stream).
        groups: Group names or glob patterns (default every group).
        assign: ``"consumer"``: claim to ``consumer``; ``"live"``: spread over the group's live consumers;
            ``"nack"``: give them back to their group as ``XNACK ... FAIL`` does (no owner, first in the
            group's NACK zone, delivery count kept), for its consumers' ``XREADGROUP ... CLAIM`` to take.
        consumer: The recovery consumer; with ``assign="live"`` it takes the entries of groups without
            a live consumer.
        live_window_ms: A consumer is live when it was active (read or claimed) within this window.
        dead_letter: Dead-letter entries delivered more than ``max_deliveries`` times.
        max_deliveries: Highest delivery count an entry may have and still be claimed (default 10).
        dry_run: Report what the run would do and change nothing.
        backoff: An entry delivered ``n`` times is stale only once idle for the larger of ``min_idle_ms``
            and the schedule's step for ``n`` (``"1m,5m,30m,2h"``, ``"10s..10m"``; core/backoff.py);
            default none: ``min_idle_ms`` for every entry.
        policies: Per-group policies, first match wins (``[[jobs.recover_stale.policies]]``,
            core/policies.py); a group no policy names takes these options.
    """

    TABLE: ClassVar[Key] = ("jobs", "recover_stale")

    min_idle_ms: int = field(default=300_000, metadata=conf_key(parse_duration_ms, "min_idle"))
    streams: tuple[str, ...] = field(default=("*",), metadata=conf_key(parse_patterns))
    groups: tuple[str, ...] = field(default=("*",), metadata=conf_key(parse_patterns))
    assign: Assign = field(default="consumer", metadata=conf_key(_assign))
    consumer: str = field(default="recovery", metadata=conf_key(parse_text))
    live_window_ms: int = field(default=600_000, metadata=conf_key(parse_duration_ms, "live_window"))
    dead_letter: bool = field(default=True, metadata=conf_key(parse_boolean))
    max_deliveries: int = field(default=10, metadata=conf_key(parse_positive_int))
    dry_run: bool = field(default=False, metadata=conf_key(parse_boolean))
    backoff: Backoff | None = field(default=None, metadata=conf_key(parse_backoff))
    policies: tuple[GroupPolicy, ...] = ()

    def __post_init__(self) -> None:
        if self.min_idle_ms < 0:
            raise InvalidArgumentError(f"min_idle_ms={self.min_idle_ms}: give 0 or more milliseconds")
        if self.live_window_ms <= 0:
            raise InvalidArgumentError(f"live_window_ms={self.live_window_ms}: give a positive number of milliseconds")
        if self.max_deliveries < 1:
            raise InvalidArgumentError(
                f"max_deliveries={self.max_deliveries}: give 1 or more (or turn dead_letter off)"
            )
        if self.assign not in ASSIGN_MODES:
            raise InvalidArgumentError(f"assign={self.assign!r}: give one of {', '.join(ASSIGN_MODES)}")
        if not self.consumer:
            raise InvalidArgumentError("consumer: give the name of the recovery consumer, e.g. 'recovery'")
        for name in ("streams", "groups"):
            patterns = getattr(self, name)
            if isinstance(patterns, str) or not patterns:
                raise InvalidArgumentError(f"{name}: give a non-empty tuple of names or patterns, e.g. ('orders-*',)")


@dataclass(frozen=True)
class RedriveOptions:
    """What a redrive puts back (the ``[jobs.redrive]`` table; docs/RECOVERY.md, "Redrive").

    Args:
        streams: Stream names or glob patterns of the dead letters' groups (default every stream).
        groups: Group names or glob patterns (default every group).
        where: Spark SQL predicate over the ``dead_letters`` view's columns (``reason``, ``delivery_count``,
            ``dead_lettered_at``, ``run_id``, ...), e.g. ``"reason LIKE 'max-deliveries%'"``; default every one.
        reset_count: Put entries back with a delivery count of 0, instead of the count they died with (an
            entry given up on with XNACK FATAL always comes back with 0: its 2^63-1 is a marker, not a count).
        max_redrives: Redrive one entry at most this often; after that it stays dead (the report counts it
            as ``capped``). Default no cap.
        limit: Put back at most this many entries per run, oldest dead letter first (a rate for huge
            backlogs: the report says how many remain). Default all.
        to_stream: Where an entry whose stream entry is gone goes: a new entry of this stream with the
            dead letter's fields plus ``redriven_from_stream``, ``redriven_from_group``, ``redriven_from_id``.
            Default none: such letters stay dead (``entry_gone`` in the report).
        dry_run: Report what the run would do and change nothing.
    """

    TABLE: ClassVar[Key] = ("jobs", "redrive")

    streams: tuple[str, ...] = field(default=("*",), metadata=conf_key(parse_patterns))
    groups: tuple[str, ...] = field(default=("*",), metadata=conf_key(parse_patterns))
    where: str | None = field(default=None, metadata=conf_key(parse_text))
    reset_count: bool = field(default=False, metadata=conf_key(parse_boolean))
    max_redrives: int | None = field(default=None, metadata=conf_key(parse_positive_int))
    limit: int | None = field(default=None, metadata=conf_key(parse_positive_int))
    to_stream: str | None = field(default=None, metadata=conf_key(parse_text))
    dry_run: bool = field(default=False, metadata=conf_key(parse_boolean))

    def __post_init__(self) -> None:
        for name in ("streams", "groups"):
            patterns = getattr(self, name)
            if isinstance(patterns, str) or not patterns:
                raise InvalidArgumentError(f"{name}: give a non-empty tuple of names or patterns, e.g. ('orders-*',)")
        for name in ("max_redrives", "limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidArgumentError(f"{name}={value}: give 1 or more (or leave it unset for no bound)")
        if self.where is not None and not self.where.strip():
            raise InvalidArgumentError("where: give a Spark SQL predicate, e.g. \"reason LIKE 'XNACK%'\", or none")
        if self.to_stream is not None and not self.to_stream:
            raise InvalidArgumentError("to_stream: give the name of the stream for entries that are gone, or none")


@dataclass(frozen=True)
class ServerConfig:
    """How streamclaim-server listens (the ``[server]`` table; docs/SERVER.md).

    Args:
        bind: Address to listen on (default loopback). Any other address needs ``requirepass``.
        port: TCP port (default 6390; 0 picks a free one).
        requirepass: The password of the ``default`` user (AUTH); empty: no AUTH.
        max_clients: Most connections served at once; one more gets Redis' "max number of clients" error.
        max_bulk_bytes: Longest argument a command may carry (Redis' proto-max-bulk-len).
        max_arguments: Most arguments one command may carry.
        allow_flush: Let FLUSHDB and FLUSHALL delete every stream (off: they are refused).
        batch_max_commands: Most commands one group commit gathers (docs/SERVER.md, "Group commit").
        batch_max_bytes: Most bytes of arguments one group commit gathers.
        maintain: Run maintenance in the background (compaction, vacuum past ``store.history_retention``,
            the log; docs/MAINTENANCE.md).
        maintain_every_ms: Run it when this long has passed since the last run and something was committed.
        maintain_after_batches: Or as soon as this many batches were committed since the last run.
    """

    TABLE: ClassVar[Key] = ("server",)

    bind: str = field(default="127.0.0.1", metadata=conf_key(parse_text))
    port: int = field(default=6390, metadata=conf_key(parse_port))
    requirepass: str = field(default="", metadata=conf_key(parse_password))
    max_clients: int = field(default=1000, metadata=conf_key(parse_positive_int))
    max_bulk_bytes: int = field(default=64 * 1024 * 1024, metadata=conf_key(parse_positive_int))
    max_arguments: int = field(default=1024 * 1024, metadata=conf_key(parse_positive_int))
    allow_flush: bool = field(default=False, metadata=conf_key(parse_boolean))
    batch_max_commands: int = field(default=1000, metadata=conf_key(parse_positive_int))
    batch_max_bytes: int = field(default=64 * 1024 * 1024, metadata=conf_key(parse_positive_int))
    maintain: bool = field(default=True, metadata=conf_key(parse_boolean))
    maintain_every_ms: int = field(default=600_000, metadata=conf_key(parse_duration_ms, "maintain_every"))
    maintain_after_batches: int = field(default=10_000, metadata=conf_key(parse_positive_int))

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidArgumentError(f"port={self.port}: give a TCP port from 1 to 65535 (0 picks a free one)")
        if not is_loopback(self.bind) and not self.requirepass:
            raise InvalidArgumentError(
                f"bind={self.bind!r} is not a loopback address and no requirepass is set: anyone who reaches "
                "the port could read and delete every stream; set requirepass (or bind 127.0.0.1)"
            )
        if self.maintain_every_ms < 1000:
            raise InvalidArgumentError(f"maintain_every_ms={self.maintain_every_ms}: give 1000 (1 s) or more")
        for name, _, declared in conf_keys(ServerConfig):
            if declared.parse is parse_positive_int and getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name}={getattr(self, name)}: give 1 or more")


def is_loopback(address: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1: addresses only this machine can reach."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AppConfig:
    """The whole configuration of a job run, and the files it came from."""

    store: StoreConfig
    spark: SparkConfig
    recover_stale: RecoveryOptions
    sources: tuple[str, ...] = ()
    server: ServerConfig = field(default_factory=ServerConfig)
    redrive: RedriveOptions = field(default_factory=RedriveOptions)
    placement: Placement = field(default_factory=Placement)


# --- a key's value, parsed ------------------------------------------------------------------------------

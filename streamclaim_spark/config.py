"""Typed, layered configuration for the jobs: ``conf/base.toml``, then ``conf/local.toml``, then CLI flags.

Each layer overrides the one before key by key (tables merge, values replace). The merged keys are parsed
into frozen dataclasses; an unknown key, a wrong type or an out-of-range value raises ``ConfigError``
naming the file (or flag) and the key, and saying how to fix it. Nothing here touches Spark.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

BASE_FILE = "base.toml"
LOCAL_FILE = "local.toml"
DEFAULT_DATABASE = "streamclaim"

Assign = Literal["consumer", "live", "nack"]
ASSIGN_MODES: tuple[Assign, ...] = ("consumer", "live", "nack")
# Levels log4j (and SparkContext.setLogLevel) accept.
LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")

_DURATION_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_MEMORY = re.compile(r"^\d+[kmgt]b?$", re.IGNORECASE)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DURATION_FIX = 'write a whole number with a unit, e.g. "250ms", "90s", "5m", "2h", "1d", or an integer of milliseconds'


class ConfigError(ValueError):
    """Raised when the configuration cannot be read or a key holds a value the job cannot use."""


@dataclass(frozen=True)
class StoreConfig:
    """Where the store lives.

    Args:
        path: Folder of the store: a local path, ``s3a://...``, ``abfss://...``.
        database: Spark catalog database the SQL views are registered under (default ``streamclaim``).
        single_writer: Promise that one driver at a time writes the store, so it may open on a log store
            that is safe for one writing driver only (S3 without the DynamoDB log store; docs/DEPLOY.md).
    """

    path: str
    database: str = DEFAULT_DATABASE
    single_writer: bool = False


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
    """

    app_name: str = "streamclaim-recover"
    master: str = "local[*]"
    shuffle_partitions: int = 4
    driver_memory: str | None = None
    log_level: str = "WARN"
    conf: Mapping[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, str]:
        """Every Spark setting this config makes, as ``spark.*`` keys."""
        settings = {
            **self.conf,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.log.level": self.log_level,
        }
        if self.driver_memory is not None:
            settings["spark.driver.memory"] = self.driver_memory
        return settings


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
    """

    min_idle_ms: int = 300_000
    streams: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ("*",)
    assign: Assign = "consumer"
    consumer: str = "recovery"
    live_window_ms: int = 600_000
    dead_letter: bool = True
    max_deliveries: int = 10
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.min_idle_ms < 0:
            raise ValueError(f"min_idle_ms={self.min_idle_ms}: give 0 or more milliseconds")
        if self.live_window_ms <= 0:
            raise ValueError(f"live_window_ms={self.live_window_ms}: give a positive number of milliseconds")
        if self.max_deliveries < 1:
            raise ValueError(f"max_deliveries={self.max_deliveries}: give 1 or more (or turn dead_letter off)")
        if self.assign not in ASSIGN_MODES:
            raise ValueError(f"assign={self.assign!r}: give one of {', '.join(ASSIGN_MODES)}")
        if not self.consumer:
            raise ValueError("consumer: give the name of the recovery consumer, e.g. 'recovery'")
        for name in ("streams", "groups"):
            patterns = getattr(self, name)
            if isinstance(patterns, str) or not patterns:
                raise ValueError(f"{name}: give a non-empty tuple of names or patterns, e.g. ('orders-*',)")


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
    """

    bind: str = "127.0.0.1"
    port: int = 6390
    requirepass: str = ""
    max_clients: int = 1000
    max_bulk_bytes: int = 64 * 1024 * 1024
    max_arguments: int = 1024 * 1024
    allow_flush: bool = False
    batch_max_commands: int = 1000
    batch_max_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port={self.port}: give a TCP port from 1 to 65535 (0 picks a free one)")
        if not is_loopback(self.bind) and not self.requirepass:
            raise ValueError(
                f"bind={self.bind!r} is not a loopback address and no requirepass is set: anyone who reaches "
                "the port could read and delete every stream; set requirepass (or bind 127.0.0.1)"
            )
        for name in ("max_clients", "max_bulk_bytes", "max_arguments", "batch_max_commands", "batch_max_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: give 1 or more")


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


# --- the key schema --------------------------------------------------------------------------------------

Key = tuple[str, ...]
Parser = Callable[[Any], Any]


class _Invalid(Exception):
    """A value's problem and its fix, turned into a ConfigError that names the key and its origin."""


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("must be a non-empty string")
    return value


def _identifier(value: Any) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise _Invalid("must be a SQL identifier: letters, digits and _, not starting with a digit")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("must be true or false (TOML booleans, no quotes)")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Invalid("must be a whole number of 1 or more (no quotes)")
    return value


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise _Invalid("must be a TCP port from 0 to 65535 (no quotes; 0 picks a free port)")
    return value


def _password(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid('must be a string ("" for no password)')
    return value


def parse_duration_ms(value: Any) -> int:
    """Milliseconds from an integer (ms) or a string with a unit: ``"250ms"``, ``"90s"``, ``"5m"``, ``"2h"``."""
    if isinstance(value, bool):
        raise _Invalid(f"is not a duration; {_DURATION_FIX}")
    if isinstance(value, int):
        if value < 0:
            raise _Invalid(f"must not be negative; {_DURATION_FIX}")
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return int(match.group(1)) * _DURATION_UNITS_MS[match.group(2) or "ms"]
    raise _Invalid(f"is not a duration; {_DURATION_FIX}")


def _memory(value: Any) -> str:
    if not isinstance(value, str) or not _MEMORY.match(value):
        raise _Invalid('must be a JVM memory size such as "512m" or "2g"')
    return value


def _log_level(value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in LOG_LEVELS:
        raise _Invalid(f"must be one of {', '.join(LOG_LEVELS)}")
    return value.upper()


def _patterns(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _Invalid('must be a non-empty list of names or glob patterns, e.g. ["orders-*", "payments"]')
    return tuple(value)


def _assign(value: Any) -> Assign:
    if value not in ASSIGN_MODES:
        raise _Invalid(
            'must be "consumer" (one recovery consumer), "live" (spread over live consumers) or "nack" '
            "(give them back to their group, as XNACK FAIL does)"
        )
    return cast(Assign, value)


def _spark_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise _Invalid("must be a string, number or boolean")


# Every key a file may set: (section..., key) -> parser. ``spark.conf`` takes any ``spark.*`` key.
_LEAVES: dict[Key, Parser] = {
    ("store", "path"): _text,
    ("store", "database"): _identifier,
    ("store", "single_writer"): _boolean,
    ("spark", "app_name"): _text,
    ("spark", "master"): _text,
    ("spark", "shuffle_partitions"): _positive_int,
    ("spark", "driver_memory"): _memory,
    ("spark", "log_level"): _log_level,
    ("jobs", "recover_stale", "streams"): _patterns,
    ("jobs", "recover_stale", "groups"): _patterns,
    ("jobs", "recover_stale", "min_idle"): parse_duration_ms,
    ("jobs", "recover_stale", "assign"): _assign,
    ("jobs", "recover_stale", "consumer"): _text,
    ("jobs", "recover_stale", "live_window"): parse_duration_ms,
    ("jobs", "recover_stale", "dead_letter"): _boolean,
    ("jobs", "recover_stale", "max_deliveries"): _positive_int,
    ("jobs", "recover_stale", "dry_run"): _boolean,
    ("server", "bind"): _text,
    ("server", "port"): _port,
    ("server", "requirepass"): _password,
    ("server", "max_clients"): _positive_int,
    ("server", "max_bulk_bytes"): _positive_int,
    ("server", "max_arguments"): _positive_int,
    ("server", "allow_flush"): _boolean,
    ("server", "batch_max_commands"): _positive_int,
    ("server", "batch_max_bytes"): _positive_int,
}
SPARK_CONF: Key = ("spark", "conf")
# Settings with a typed key of their own, so there is one place to set them.
_TYPED_SPARK_KEYS = {
    "spark.master": "spark.master (use [spark] master, or spark-submit --master)",
    "spark.app.name": "[spark] app_name",
    "spark.sql.shuffle.partitions": "[spark] shuffle_partitions",
    "spark.driver.memory": "[spark] driver_memory",
    "spark.log.level": "[spark] log_level",
}
_TABLES = {key[:i] for key in (*_LEAVES, SPARK_CONF) for i in range(1, len(key))} | {SPARK_CONF}


def dotted(key: Key) -> str:
    """``("jobs", "recover_stale", "min_idle")`` as ``jobs.recover_stale.min_idle`` (spark keys quoted)."""
    return ".".join(f'"{part}"' if "." in part else part for part in key)


def _flatten(table: Mapping[str, Any], origin: str, prefix: Key = ()) -> dict[Key, Any]:
    """Leaf keys of a TOML document, each checked against the schema."""
    leaves: dict[Key, Any] = {}
    for name, value in table.items():
        key = (*prefix, name)
        if prefix == SPARK_CONF:
            _check_spark_key(key, origin)
            leaves[key] = value
        elif key in _TABLES:
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: {dotted(key)} must be a table; write it as [{dotted(key)}]")
            leaves.update(_flatten(value, origin, key))
        elif key in _LEAVES:
            leaves[key] = value
        else:
            raise ConfigError(f"{origin}: unknown key {dotted(key)}; {_suggest(key)}")
    return leaves


def _check_spark_key(key: Key, origin: str) -> None:
    name = key[-1]
    if not name.startswith("spark."):
        raise ConfigError(
            f'{origin}: {dotted(key)}: Spark setting names start with "spark."; '
            'quote the whole name, e.g. "spark.sql.adaptive.enabled" = "true"'
        )
    if name in _TYPED_SPARK_KEYS:
        raise ConfigError(f"{origin}: {dotted(key)}: set it through {_TYPED_SPARK_KEYS[name]} instead")


def _suggest(key: Key) -> str:
    """The keys allowed next to ``key``, and the closest one to what was written."""
    prefix = key[:-1]
    depth = len(prefix)
    siblings = sorted({k[depth] for k in (*_LEAVES, *_TABLES) if len(k) > depth and k[:depth] == prefix})
    close = difflib.get_close_matches(key[-1], siblings, n=1)
    hint = f"did you mean {dotted((*key[:-1], close[0]))}? " if close else ""
    where = f"[{dotted(key[:-1])}]" if len(key) > 1 else "the top level"
    return f"{hint}keys allowed in {where}: {', '.join(siblings)} (see conf/README.md)"


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; a syntax error names the file and the line."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error}); fix the syntax there") from None


def load_config(
    conf_dir: Path | str,
    overrides: Mapping[Key, tuple[Any, str]] | None = None,
    *,
    local: bool = True,
) -> AppConfig:
    """Reads ``base.toml`` and, when present, ``local.toml`` from ``conf_dir``, then applies ``overrides``.

    Args:
        conf_dir: Folder holding ``base.toml`` (required) and ``local.toml`` (optional, git-ignored).
        overrides: Values from the command line: key -> (value, flag that gave it), e.g.
            ``{("store", "path"): ("/data/s", "--store")}``.
        local: Read ``local.toml`` (default True).

    Raises:
        ConfigError: A file is missing or malformed, a key is unknown, or a value is invalid.
    """
    folder = Path(conf_dir)
    base = folder / BASE_FILE
    if not base.is_file():
        raise ConfigError(
            f"conf: no {BASE_FILE} in {folder.resolve()}; run from the project folder (the one holding conf/), "
            "or pass --conf-dir (or set STREAMCLAIM_CONF_DIR) to the folder with base.toml"
        )
    layers = [base]
    if local and (folder / LOCAL_FILE).is_file():
        layers.append(folder / LOCAL_FILE)
    values: dict[Key, Any] = {}
    origins: dict[Key, str] = {}
    for path in layers:
        for key, value in _flatten(read_toml(path), str(path)).items():
            values[key] = value
            origins[key] = str(path)
    for key, (value, flag) in (overrides or {}).items():
        if key[:-1] == SPARK_CONF:
            _check_spark_key(key, flag)
        elif key not in _LEAVES:
            raise ConfigError(f"{flag}: unknown key {dotted(key)}")
        values[key] = value
        origins[key] = flag
    parsed = _Parsed(values, origins)
    store_path = parsed.get(("store", "path"), _text)
    if store_path is None:
        raise ConfigError(f"store.path is not set; set it in {base} or {folder / LOCAL_FILE}, or pass --store")
    if origins[("store", "path")] in {str(p) for p in layers}:
        store_path = resolve_store_path(store_path, folder.resolve().parent)
    store = StoreConfig(
        path=store_path,
        database=parsed.get(("store", "database"), _identifier, DEFAULT_DATABASE),
        single_writer=parsed.get(("store", "single_writer"), _boolean, False),
    )
    spark = parsed.build(
        SparkConfig,
        {
            "app_name": ("spark", "app_name"),
            "master": ("spark", "master"),
            "shuffle_partitions": ("spark", "shuffle_partitions"),
            "driver_memory": ("spark", "driver_memory"),
            "log_level": ("spark", "log_level"),
        },
        conf=parsed.spark_conf(),
    )
    job = ("jobs", "recover_stale")
    recover = parsed.build(
        RecoveryOptions,
        {
            "streams": (*job, "streams"),
            "groups": (*job, "groups"),
            "min_idle_ms": (*job, "min_idle"),
            "assign": (*job, "assign"),
            "consumer": (*job, "consumer"),
            "live_window_ms": (*job, "live_window"),
            "dead_letter": (*job, "dead_letter"),
            "max_deliveries": (*job, "max_deliveries"),
            "dry_run": (*job, "dry_run"),
        },
    )
    server = parsed.build(
        ServerConfig,
        {
            "bind": ("server", "bind"),
            "port": ("server", "port"),
            "requirepass": ("server", "requirepass"),
            "max_clients": ("server", "max_clients"),
            "max_bulk_bytes": ("server", "max_bulk_bytes"),
            "max_arguments": ("server", "max_arguments"),
            "allow_flush": ("server", "allow_flush"),
            "batch_max_commands": ("server", "batch_max_commands"),
            "batch_max_bytes": ("server", "batch_max_bytes"),
        },
    )
    return AppConfig(
        store=store, spark=spark, recover_stale=recover, sources=tuple(str(p) for p in layers), server=server
    )


def resolve_store_path(path: str, project_root: Path) -> str:
    """A relative local path from a conf file is taken relative to the project folder (conf/'s parent)."""
    if _URL_SCHEME.match(path) or Path(path).is_absolute():
        return path
    return str(project_root / path)


class _Parsed:
    """Merged values plus where each came from; parses them key by key with errors that name both."""

    def __init__(self, values: Mapping[Key, Any], origins: Mapping[Key, str]) -> None:
        self.values = values
        self.origins = origins

    def get(self, key: Key, parser: Parser, default: Any = None) -> Any:
        if key not in self.values:
            return default
        value = self.values[key]
        try:
            return parser(value)
        except _Invalid as problem:
            raise ConfigError(f"{self.origins[key]}: {dotted(key)} = {value!r} {problem}") from None

    def build(self, cls: Callable[..., Any], fields: Mapping[str, Key], **extra: Any) -> Any:
        kwargs = dict(extra)
        for name, key in fields.items():
            if key in self.values:
                kwargs[name] = self.get(key, _LEAVES[key])
        try:
            return cls(**kwargs)
        except ValueError as error:
            # A cross-field rule of the dataclass; name the table the keys live in.
            table = dotted(next(iter(fields.values()))[:-1])
            sources = sorted({self.origins[k] for k in fields.values() if k in self.origins})
            raise ConfigError(f"{', '.join(sources) or 'defaults'}: [{table}] {error}") from None

    def spark_conf(self) -> dict[str, str]:
        conf = {}
        for key in sorted(k for k in self.values if k[:-1] == SPARK_CONF):
            conf[key[-1]] = self.get(key, _spark_value)
        return conf


def flag_overrides(args: object, flags: Iterable[tuple[str, Key]]) -> dict[Key, tuple[Any, str]]:
    """Overrides from parsed command-line flags: each (attribute, key) given (not None) sets ``key``,
    credited to the flag ``--attribute-name`` in error messages."""
    overrides: dict[Key, tuple[Any, str]] = {}
    for attribute, key in flags:
        value = getattr(args, attribute)
        if value is not None:
            overrides[key] = (value, "--" + attribute.replace("_", "-"))
    return overrides


def known_keys() -> Iterable[str]:
    """Every key the files may set, dotted (``spark.conf`` stands for any ``spark.*`` setting)."""
    return [dotted(key) for key in (*_LEAVES, SPARK_CONF)]

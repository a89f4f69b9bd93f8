"""How a configuration key is declared and its value checked: the declaration on a section's dataclass
field (``conf_key``) and the parsers that convert a file's (or flag's) value or say how to fix it.

``config`` declares its sections' keys with these; ``config_loader`` derives the schema, the known keys
and the flags' overrides from the same declarations. Nothing here touches Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from streamclaim_spark.errors import ConfigError, InvalidConfigValueError

Key = tuple[str, ...]
Parser = Callable[[Any], Any]

# Levels log4j (and SparkContext.setLogLevel) accept.
LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")

_MEMORY = re.compile(r"^\d+[kmgt]b?$", re.IGNORECASE)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --- value parsers: each returns the value or raises InvalidConfigValueError saying what the key needs ---


def value_parser(accepts: Callable[[Any], bool], problem: str, convert: Parser = lambda value: value) -> Parser:
    """A parser that converts the values ``accepts`` and refuses the others with ``problem``."""

    def parse(value: Any) -> Any:
        if not accepts(value):
            raise InvalidConfigValueError(problem)
        return convert(value)

    return parse


parse_text = value_parser(lambda v: isinstance(v, str) and bool(v.strip()), "must be a non-empty string")
parse_identifier = value_parser(
    lambda v: isinstance(v, str) and bool(_IDENTIFIER.match(v)),
    "must be a SQL identifier: letters, digits and _, not starting with a digit",
)
parse_remote = value_parser(
    lambda v: isinstance(v, str) and (v.startswith("sc://") or v.startswith("local")),
    'must be a Spark Connect URL such as "sc://host:15002" (or "local[2]" for a local Connect server)',
)
parse_boolean = value_parser(lambda v: isinstance(v, bool), "must be true or false (TOML booleans, no quotes)")
parse_positive_int = value_parser(
    lambda v: type(v) is int and v >= 1, "must be a whole number of 1 or more (no quotes)"
)
parse_port = value_parser(
    lambda v: type(v) is int and 0 <= v <= 65535, "must be a TCP port from 0 to 65535 (no quotes; 0 picks a free port)"
)
parse_password = value_parser(lambda v: isinstance(v, str), 'must be a string ("" for no password)')
parse_memory = value_parser(
    lambda v: isinstance(v, str) and bool(_MEMORY.match(v)), 'must be a JVM memory size such as "512m" or "2g"'
)
parse_log_level = value_parser(
    lambda v: isinstance(v, str) and v.upper() in LOG_LEVELS, f"must be one of {', '.join(LOG_LEVELS)}", str.upper
)
parse_patterns = value_parser(
    lambda v: isinstance(v, list) and bool(v) and all(isinstance(name, str) and name for name in v),
    'must be a non-empty list of names or glob patterns, e.g. ["orders-*", "payments"]',
    tuple,
)


def spark_value(value: Any) -> str:
    """A ``[spark.conf]`` value as the text Spark takes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise InvalidConfigValueError("must be a string, number or boolean")


# --- the keys: declared on the dataclass fields --------------------------------------------------------


@dataclass(frozen=True)
class ConfKey:
    """What makes a dataclass field a key of its class's ``TABLE``; declared with ``conf_key``."""

    parse: Parser  # checks and converts the file's (or flag's) value; raises InvalidConfigValueError saying the fix
    name: str = ""  # the key's name, when not the field's (min_idle for min_idle_ms)
    flag: str = ""  # the argparse attribute of the flag that sets it, when not the key's name
    from_flag: Parser | None = None  # turns the flag's value into the key's (--store: from the current folder)
    spark: str = ""  # the spark.* setting it stands for: refused in [spark.conf], so it has one place
    through: str = ""  # how that refusal names the key, when not "[table] name"


def conf_key(parse: Parser, name: str = "", **declared: Any) -> dict[str, ConfKey]:
    """Field metadata declaring the field a conf key (see ``ConfKey``)."""
    return {"conf_key": ConfKey(parse, name, **declared)}


def conf_keys(section: type[Any]) -> Iterator[tuple[str, Key, ConfKey]]:
    """(field name, key, declaration) of each conf key of a section dataclass."""
    for item in fields(section):
        if "conf_key" in item.metadata:
            declared: ConfKey = item.metadata["conf_key"]
            yield item.name, (*section.TABLE, declared.name or item.name), declared


def dotted(key: Key) -> str:
    """``("jobs", "recover_stale", "min_idle")`` as ``jobs.recover_stale.min_idle`` (spark keys quoted)."""
    return ".".join(f'"{part}"' if "." in part else part for part in key)


def parsed(merged: Mapping[Key, tuple[Any, str]], key: Key, parser: Parser) -> Any:
    """The value of ``key`` parsed; an invalid one raises ConfigError naming its file (or flag) and the key."""
    value, origin = merged[key]
    try:
        return parser(value)
    except InvalidConfigValueError as problem:
        raise ConfigError(f"{origin}: {dotted(key)} = {value!r} {problem}") from None

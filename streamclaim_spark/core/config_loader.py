"""Reads the jobs' configuration: ``conf/base.toml``, then ``conf/local.toml``, then CLI flags.

Each layer overrides the one before key by key (tables merge, values replace). The merged keys are parsed
into the frozen dataclasses of ``config``; an unknown key, a wrong type or an out-of-range value raises
``ConfigError`` naming the file (or flag) and the key, and saying how to fix it. The schema, the loader,
``known_keys`` and the flags' overrides are all derived from the keys declared on those dataclasses'
fields. Nothing here touches Spark.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streamclaim_spark.core.conf_keys import ConfKey, Key, conf_keys, dotted, parsed, spark_value
from streamclaim_spark.core.config import (
    AppConfig,
    RecoveryOptions,
    RedriveOptions,
    ServerConfig,
    SparkConfig,
    StoreConfig,
    resolve_store_path,
)
from streamclaim_spark.core.placement import Placement
from streamclaim_spark.core.policies import RecoveryPolicy, parse_policies
from streamclaim_spark.errors import ConfigError

BASE_FILE = "base.toml"
LOCAL_FILE = "local.toml"

# --- the schema, derived from the fields ----------------------------------------------------------------


_SECTIONS = (StoreConfig, Placement, SparkConfig, RecoveryOptions, ServerConfig, RedriveOptions)


# Every key a file may set. ``spark.conf`` takes any ``spark.*`` key.
_LEAVES: dict[Key, ConfKey] = {key: declared for section in _SECTIONS for _, key, declared in conf_keys(section)}
SPARK_CONF: Key = (*SparkConfig.TABLE, "conf")
# Per-group policies: an array of tables, read whole (core/policies.py); a later file's replace an earlier's.
POLICIES: Key = (*RecoveryOptions.TABLE, "policies")
# The table of every job's own settings ([jobs.recover_stale], [jobs.redrive]).
JOBS = RecoveryOptions.TABLE[0]
# Settings with a typed key of their own, so there is one place to set them.
_TYPED_SPARK_KEYS = {
    declared.spark: declared.through or f"[{dotted(key[:-1])}] {key[-1]}"
    for key, declared in _LEAVES.items()
    if declared.spark
}
_TABLES = {key[:i] for key in (*_LEAVES, SPARK_CONF) for i in range(1, len(key))} | {SPARK_CONF}


def known_keys() -> Iterable[str]:
    """Every key the files may set, dotted (``spark.conf`` stands for any ``spark.*`` setting)."""
    return [dotted(key) for key in (*_LEAVES, SPARK_CONF, POLICIES)]


def flag_overrides(args: object, job: Key = RecoveryOptions.TABLE) -> dict[Key, tuple[Any, str]]:
    """Overrides from parsed command-line flags: each key's flag (``--`` and its name, or its ``flag``, with
    dashes) that ``args`` has and was given (not None) sets the key, credited to the flag in errors. Of the
    ``[jobs.*]`` tables only ``job``'s keys are set: two jobs' flags of one name (``--streams``) are the job's."""
    overrides: dict[Key, tuple[Any, str]] = {}
    for key, declared in _LEAVES.items():
        if key[0] == JOBS and key[: len(job)] != job:
            continue
        attribute = declared.flag or key[-1]
        value = getattr(args, attribute, None)
        if value is not None:
            converted = declared.from_flag(value) if declared.from_flag else value
            overrides[key] = (converted, "--" + attribute.replace("_", "-"))
    return overrides


# --- loading ---------------------------------------------------------------------------------------------


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
        elif key in _LEAVES or key == POLICIES:
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
    siblings = sorted({k[depth] for k in (*_LEAVES, *_TABLES, POLICIES) if len(k) > depth and k[:depth] == prefix})
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
    merged: dict[Key, tuple[Any, str]] = {}  # key -> (value, the file or flag that set it)
    for path in layers:
        merged.update((key, (value, str(path))) for key, value in _flatten(read_toml(path), str(path)).items())
    for key, (_, flag) in (overrides or {}).items():
        if key[:-1] == SPARK_CONF:
            _check_spark_key(key, flag)
        elif key not in _LEAVES:
            raise ConfigError(f"{flag}: unknown key {dotted(key)}")
    merged.update(overrides or {})
    path_key: Key = (*StoreConfig.TABLE, "path")
    if path_key not in merged:
        raise ConfigError(f"store.path is not set; set it in {base} or {folder / LOCAL_FILE}, or pass --store")
    store_path = parsed(merged, path_key, _LEAVES[path_key].parse)
    if merged[path_key][1] in {str(p) for p in layers}:
        store_path = resolve_store_path(store_path, folder.resolve().parent)
    spark_conf = {key[-1]: parsed(merged, key, spark_value) for key in sorted(merged) if key[:-1] == SPARK_CONF}
    policies: tuple[RecoveryPolicy, ...] = ()
    if POLICIES in merged:
        value, origin = merged[POLICIES]
        policies = parse_policies(value, origin, Path(origin).read_text())
    return AppConfig(
        store=_build(merged, StoreConfig, path=store_path),
        spark=_build(merged, SparkConfig, conf=spark_conf),
        recover_stale=_build(merged, RecoveryOptions, policies=policies),
        sources=tuple(str(p) for p in layers),
        server=_build(merged, ServerConfig),
        redrive=_build(merged, RedriveOptions),
        placement=_build(merged, Placement),
    )


def _build(merged: Mapping[Key, tuple[Any, str]], section: type[Any], **given: Any) -> Any:
    """The section's dataclass from the keys set in its ``TABLE`` (``given`` fields as they are)."""
    kwargs = dict(given)
    origins = set()
    for name, key, declared in conf_keys(section):
        if key in merged:
            origins.add(merged[key][1])
            if name not in given:
                kwargs[name] = parsed(merged, key, declared.parse)
    try:
        return section(**kwargs)
    except ValueError as error:
        # A cross-field rule of the dataclass; name the table the keys live in.
        raise ConfigError(f"{', '.join(sorted(origins)) or 'defaults'}: [{dotted(section.TABLE)}] {error}") from None

"""Recovery policies per group: ``[[jobs.recover_stale.policies]]`` tables in conf/, the first match wins.

A policy names streams and groups by name or glob pattern and sets, for the groups it names, any of
``min_idle``, ``max_deliveries``, ``backoff``, ``assign`` and ``dead_letter``; the keys it leaves out, and
every group no policy names, take the run's own (``[jobs.recover_stale]`` and the flags). SQS sets its
redrive policy per queue, Pub/Sub per subscription, Kafka per share group: here one run still decides
and commits every group at once, whatever their policies (fleet/recovery/rules.py). Nothing here
touches Spark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from streamclaim_spark.core.backoff import Backoff
from streamclaim_spark.core.conf_keys import conf_keys
from streamclaim_spark.core.config import Assign, RecoveryOptions
from streamclaim_spark.core.patterns import matches
from streamclaim_spark.errors import ConfigError, InvalidConfigValueError

# The keys a policy may set (as written in the file), besides the streams and groups it names.
POLICY_KEYS = ("streams", "groups", "min_idle", "max_deliveries", "backoff", "assign", "dead_letter")
_HEADER = re.compile(r"^[ \t]*\[\[\s*jobs\s*\.\s*recover_stale\s*\.\s*policies\s*\]\]", re.MULTILINE)


@dataclass(frozen=True)
class RecoveryPolicy:
    """One policy: the groups it names and what it sets for them (None: the run's own value).

    ``name`` says where it was written (``policy 2 (conf/local.toml, line 14)``), for reports and errors.
    """

    streams: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ("*",)
    min_idle_ms: int | None = None
    max_deliveries: int | None = None
    backoff: Backoff | None = None
    assign: Assign | None = None
    dead_letter: bool | None = None
    name: str = ""

    def names(self, stream: str, group: str) -> bool:
        """Whether the policy applies to ``stream``/``group``."""
        return matches(stream, self.streams) and matches(group, self.groups)

    def over(self, options: RecoveryOptions) -> RecoveryOptions:
        """``options`` with what this policy sets (and no policies of their own)."""
        settings = {
            item.name: getattr(self, item.name)
            for item in fields(self)
            if item.name not in ("streams", "groups", "name") and getattr(self, item.name) is not None
        }
        return replace(options, policies=(), **settings)

    def to_json(self) -> dict[str, Any]:
        """The policy as the run's summary lists it (only what it sets)."""
        shown: dict[str, Any] = {"name": self.name, "streams": list(self.streams), "groups": list(self.groups)}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name not in shown and value is not None:
                shown[item.name] = value.text if isinstance(value, Backoff) else value
        return shown


def policy_for(options: RecoveryOptions, stream: str, group: str) -> tuple[int | None, RecoveryOptions]:
    """The number (from 1) of the first policy naming the group, or None, and the group's options."""
    for number, policy in enumerate(options.policies, 1):
        if policy.names(stream, group):
            return number, policy.over(options)
    return None, replace(options, policies=()) if options.policies else options


def parse_policies(value: Any, origin: str, text: str | None) -> tuple[RecoveryPolicy, ...]:
    """The policies of ``[[jobs.recover_stale.policies]]`` as read from ``origin`` (``text``: the file, to
    name each policy's line); an unknown key or a bad value raises ConfigError naming the policy."""
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ConfigError(
            f"{origin}: jobs.recover_stale.policies must be tables, each written as [[jobs.recover_stale.policies]]"
        )
    lines = [text.count("\n", 0, match.start()) + 1 for match in _HEADER.finditer(text)] if text else []
    where = [f"{origin}, line {lines[n]}" if n < len(lines) else origin for n in range(len(value))]
    return tuple(_policy(table, f"policy {n + 1} ({where[n]})") for n, table in enumerate(value))


def _policy(table: Mapping[str, Any], name: str) -> RecoveryPolicy:
    parsers = {key[-1]: (field_name, declared.parse) for field_name, key, declared in conf_keys(RecoveryOptions)}
    settings: dict[str, Any] = {}
    for key, value in table.items():
        if key not in POLICY_KEYS:
            raise ConfigError(
                f"{name}: unknown key {key!r}; a policy may set {', '.join(POLICY_KEYS)} (see conf/README.md)"
            )
        field_name, parse = parsers[key]
        try:
            settings[field_name] = parse(value)
        except InvalidConfigValueError as problem:
            raise ConfigError(f"{name}: {key} = {value!r} {problem}") from None
    return RecoveryPolicy(**settings, name=name)

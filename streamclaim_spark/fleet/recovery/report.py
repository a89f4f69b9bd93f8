"""What a recovery run reports: per-group numbers, the run's identity, status and errors, its log lines.

``RecoveryReport.to_json`` is the summary the job prints, ``RecoveryReport.run_row`` the row appended to
``recovery_runs``; ``group_report`` makes a group's numbers from its tally, and ``describe``,
``log_scan`` and ``warn_without_live_consumers`` write the run's log lines.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.object_store import MULTI_WRITER, WriterMode
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair
from streamclaim_spark.fleet.recovery.plan import ACK, CLAIM, FRESH, POISON, PURGE
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.columns import by_bytes
from streamclaim_spark.state.companion_schema import RECOVERY_GROUP_SCHEMA
from streamclaim_spark.state.count_check import CountMismatch

# The run's log lines name the job, not the module that writes them (docs/RECOVERY.md shows them).
log = logging.getLogger("streamclaim_spark.fleet.recovery")

SUCCEEDED = "succeeded"
# Some groups were still contended after MAX_CLAIM_ROUNDS claim commits; the others are recovered.
PARTIAL = "partial"
FAILED = "failed"


@dataclass(frozen=True)
class GroupReport:
    """What a run did (or, in a dry run, would do) to one consumer group.

    ``scanned`` counts the group's pending entries, ``stale`` those idle at least ``min_idle``.
    ``dead_letters_withdrawn`` counts copies taken back because their entry changed (was acknowledged or
    claimed by someone else) between the copy and the acknowledgement. ``skipped`` says the group was
    changed by others during every claim commit of the run (``conflicts_retried`` times) and was left
    as it was; its copies, if any, were withdrawn.
    """

    stream: str
    group: str
    scanned: int = 0
    stale: int = 0
    claimed: int = 0
    purged: int = 0
    dead_lettered: int = 0
    dead_letters_withdrawn: int = 0
    conflicts_retried: int = 0
    owners: tuple[str, ...] = ()
    skipped: bool = False
    policy: int | None = None  # the number (from 1) of the policy the group was recovered by; None: the run's

    def to_dict(self) -> dict[str, Any]:
        return {
            C.STREAM: self.stream,
            C.GROUP: self.group,
            "scanned": self.scanned,
            "stale": self.stale,
            "claimed": self.claimed,
            "purged": self.purged,
            "dead_lettered": self.dead_lettered,
            "dead_letters_withdrawn": self.dead_letters_withdrawn,
            "conflicts_retried": self.conflicts_retried,
            "owners": list(self.owners),
            "skipped": self.skipped,
            "policy": self.policy,
        }


_TOTALS = ("scanned", "stale", "claimed", "purged", "dead_lettered", "dead_letters_withdrawn", "conflicts_retried")


@dataclass(frozen=True)
class RecoveryReport:
    """The outcome of one run: per-group reports plus the run's identity, times and status.

    ``recorded`` says whether the run's row was appended to ``recovery_runs`` (never for dry runs).
    ``writer_mode`` is the store's (object_store.py): ``single-writer`` when it was opened on that promise.
    ``dead_letter_reasons`` counts the run's dead letters by why they died (``XNACK FATAL``,
    ``max-deliveries exceeded``); each row's own reason is in ``dead_letters``. ``count_mismatches``: a
    dry run's check of the selected groups' kept pending counts, each that differs from a recount (None:
    not checked, a run that is not dry).
    """

    run_id: str
    store: str
    options: RecoveryOptions
    started_at_ms: int
    ended_at_ms: int
    groups: tuple[GroupReport, ...] = ()
    status: str = SUCCEEDED
    error: str | None = None
    recorded: bool = False
    writer_mode: WriterMode = MULTI_WRITER
    dead_letter_reasons: Mapping[str, int] = field(default_factory=dict)
    count_mismatches: tuple[CountMismatch, ...] | None = None

    @property
    def totals(self) -> dict[str, int]:
        """Every per-group number summed over the groups, plus the number of groups."""
        totals = {name: sum(getattr(g, name) for g in self.groups) for name in _TOTALS}
        return {"groups": len(self.groups), **totals, "skipped": sum(g.skipped for g in self.groups)}

    def to_json(self) -> dict[str, Any]:
        """The JSON summary the job prints on stdout."""
        options = self.options
        return {
            **summary_head(self, options.dry_run),
            "writer_mode": self.writer_mode,
            "options": {
                "streams": list(options.streams),
                "groups": list(options.groups),
                "min_idle_ms": options.min_idle_ms,
                "assign": options.assign,
                "consumer": options.consumer,
                "live_window_ms": options.live_window_ms,
                "dead_letter": options.dead_letter,
                "max_deliveries": options.max_deliveries,
                "backoff": options.backoff.text if options.backoff is not None else None,
                "policies": [policy.to_json() for policy in options.policies],
            },
            "totals": self.totals,
            "dead_letter_reasons": dict(sorted(self.dead_letter_reasons.items())),
            "groups": [g.to_dict() for g in self.groups],
            "count_mismatches": None
            if self.count_mismatches is None
            else [mismatch.to_json() for mismatch in self.count_mismatches],
        }

    def run_row(self) -> tuple[Any, ...]:
        """The report as a ``recovery_runs`` row (companion_schema.RECOVERY_RUNS_SCHEMA)."""
        totals = self.totals
        groups = [tuple(g.to_dict()[name] for name in RECOVERY_GROUP_SCHEMA.names) for g in self.groups]
        return (
            self.run_id,
            as_timestamp(self.started_at_ms),
            as_timestamp(self.ended_at_ms),
            self.status,
            self.error,
            self.options.min_idle_ms,
            self.options.assign,
            self.options.max_deliveries if self.options.dead_letter else None,
            totals["scanned"],
            totals["claimed"],
            totals["dead_lettered"],
            totals["conflicts_retried"],
            groups,
            self.writer_mode,
            self.options.backoff.text if self.options.backoff is not None else None,
        )


def describe(report: GroupReport, options: RecoveryOptions) -> str:
    """One log line for a group's report."""
    verb = "would " if options.dry_run else ""
    owners = ", ".join(report.owners) or "-"
    parts = [
        f"{report.stream}/{report.group}: {report.scanned} pending, {report.stale} stale",
        f"{verb}dead-letter {report.dead_lettered}" if options.dead_letter else "dead-lettering off",
        f"{verb}claim {report.claimed} to {owners}",
        f"{verb}purge {report.purged}",
    ]
    if report.dead_letters_withdrawn:
        parts.append(f"{report.dead_letters_withdrawn} dead letter(s) withdrawn")
    parts.append(f"{report.conflicts_retried} conflict(s) retried")
    if report.skipped:
        parts.append("SKIPPED (still contended)")
    return "; ".join(parts)


def in_name_order(done: dict[Pair, GroupReport]) -> tuple[GroupReport, ...]:
    """The groups' reports in bytewise (stream, group) name order, as the run selected them."""
    return tuple(done[pair] for pair in sorted(done, key=lambda p: (by_bytes(p[0]), by_bytes(p[1]))))


def log_scan(tallies: dict[Pair, GroupTally], groups: int) -> None:
    """Logs what the classification found over all groups: pending, stale and each action's count."""
    totals: Counter[object] = sum((t.outcomes for t in tallies.values()), Counter())
    log.info(
        "scanned %d pending entries of %d group(s): %d stale (%d to dead-letter, %d acknowledged as dead letters, "
        "%d to claim, %d to purge)",
        sum(totals.values()),
        groups,
        sum(totals.values()) - totals[FRESH],
        totals[POISON],
        totals[ACK],
        totals[CLAIM],
        totals[PURGE],
        extra=C.PROGRESS,
    )


def group_report(
    pair: Pair, tally: GroupTally, rules: GroupRules, owners: dict[Pair, tuple[str, ...]], dead_lettered: int
) -> GroupReport:
    """A group's report from its tally, by its rule; ``dead_lettered`` is what the run counts as dead-lettered."""
    options = rules.rule(pair)
    actions = tally.outcomes
    scanned = sum(actions.values())
    claimed = actions[CLAIM]
    live = owners.get(pair) if options.assign == "live" else None
    assigned = () if options.assign == "nack" else live or (options.consumer,)
    return GroupReport(
        pair[0],
        pair[1],
        scanned=scanned,
        stale=scanned - actions[FRESH],
        claimed=claimed,
        purged=actions[PURGE],
        dead_lettered=dead_lettered if options.dead_letter else 0,
        owners=assigned if claimed else (),
        policy=rules.policy(pair),
    )


def warn_without_live_consumers(
    tallies: dict[Pair, GroupTally], owners: dict[Pair, tuple[str, ...]], rules: GroupRules
) -> None:
    """assign="live": warns of the groups whose claims go to the recovery consumer for want of live ones."""
    options = rules.options
    live = set(rules.where(lambda rule: rule.assign == "live"))
    orphans = sorted(
        pair for pair, tally in tallies.items() if pair in live and tally.outcomes[CLAIM] and not owners.get(pair)
    )
    if orphans:
        log.warning(
            "%d group(s) had no consumer active in the last %d ms; their entries go to the recovery consumer %r: %s",
            len(orphans),
            options.live_window_ms,
            options.consumer,
            ", ".join(f"{key}/{group}" for key, group in orphans[:10]) + (" ..." if len(orphans) > 10 else ""),
        )


class RunSummary(Protocol):
    """What a job's run report has in common: the recovery's and the redrive's."""

    @property
    def run_id(self) -> str: ...
    @property
    def store(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def recorded(self) -> bool: ...
    @property
    def started_at_ms(self) -> int: ...
    @property
    def ended_at_ms(self) -> int: ...


def summary_head(report: RunSummary, dry_run: bool) -> dict[str, Any]:
    """The fields every job's JSON summary starts with, in this order."""
    return {
        "run_id": report.run_id,
        "store": report.store,
        "status": report.status,
        "error": report.error,
        "dry_run": dry_run,
        "recorded": report.recorded,
        "started_at": iso_time(report.started_at_ms),
        "ended_at": iso_time(report.ended_at_ms),
    }


def as_timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso_time(ms: int) -> str:
    return as_timestamp(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")

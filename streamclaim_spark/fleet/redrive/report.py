"""What a redrive reports: per-group outcomes, what stayed dead and why, the run's identity and status.

``RedriveReport.to_json`` is the summary the job prints, ``RedriveReport.run_row`` the row appended to
``redrive_runs``. Counts are entries (stream, group, ID), not letters: an entry with two letters is one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.recovery.report import as_timestamp, summary_head
from streamclaim_spark.fleet.redrive.put_back import OUTCOMES

SUCCEEDED = "succeeded"
FAILED = "failed"
ADOPTED = "adopted"  # taken for gone by another run before its put-back landed: it committed nothing


@dataclass(frozen=True)
class RedriveReport:
    """What a redrive did (or, in a dry run, would do).

    ``groups`` holds each group's entries by outcome (put_back.OUTCOMES: ``redriven`` back in its PEL,
    ``re_added`` to ``to_stream``, or staying dead: ``entry_gone``, ``group_gone``, ``already_pending``).
    ``capped`` entries were redriven ``max_redrives`` times and stay dead; ``remaining`` ones were left for
    a later run by ``limit``; ``adopted`` ones were left half-done by runs that stopped (``adopted_runs``).
    """

    run_id: str
    store: str
    options: RedriveOptions
    started_at_ms: int
    ended_at_ms: int
    status: str = SUCCEEDED
    error: str | None = None
    groups: dict[Pair, Counter[str]] = field(default_factory=dict)
    capped: int = 0
    remaining: int = 0
    adopted: int = 0
    adopted_runs: tuple[str, ...] = ()
    recorded: bool = False

    @property
    def totals(self) -> dict[str, int]:
        """Entries by outcome over every group, and the run-wide counts."""
        totals = {name: sum(counts[name] for counts in self.groups.values()) for name in OUTCOMES}
        return {**totals, "capped": self.capped, "remaining": self.remaining, "adopted": self.adopted}

    def to_json(self) -> dict[str, Any]:
        """The JSON summary the job prints on stdout."""
        options = self.options
        return {
            **summary_head(self, options.dry_run),
            "options": {
                "streams": list(options.streams),
                "groups": list(options.groups),
                "where": options.where,
                "reset_count": options.reset_count,
                "max_redrives": options.max_redrives,
                "limit": options.limit,
                "to_stream": options.to_stream,
            },
            "totals": self.totals,
            "adopted_runs": list(self.adopted_runs),
            "groups": [
                {C.STREAM: key, C.GROUP: group, **{name: counts[name] for name in OUTCOMES}}
                for (key, group), counts in sorted(self.groups.items())
            ],
        }

    def run_row(self) -> tuple[Any, ...]:
        """The report as a ``redrive_runs`` row (companion_schema.REDRIVE_RUNS_SCHEMA)."""
        options, totals = self.options, self.totals
        return (
            self.run_id,
            as_timestamp(self.started_at_ms),
            as_timestamp(self.ended_at_ms),
            self.status,
            self.error,
            list(options.streams),
            list(options.groups),
            options.where,
            options.reset_count,
            options.max_redrives,
            options.limit,
            options.to_stream,
            *(totals[name] for name in OUTCOMES),
            self.capped,
            self.adopted,
            self.remaining,
        )

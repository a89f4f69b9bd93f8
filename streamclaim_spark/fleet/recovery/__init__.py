"""The recovery job beyond Redis: claim every stale pending entry of many groups, dead-letter the poison ones.

``recover_stale(store, RecoveryOptions(...))`` runs it (docs/RECOVERY.md). The package holds the report
(report.py), each group's rule by its policy (rules.py), what a round does to each entry and the MERGE
rows that do it (plan.py), the dead-letter copies (dead_letters.py), the claim commits in rounds
(rounds.py), and the run with its run log (run.py). ``RecoveryPolicy`` and ``parse_backoff`` build the
per-group policies and backoff schedules ``RecoveryOptions`` takes.
"""

from __future__ import annotations

from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.policies import RecoveryPolicy
from streamclaim_spark.errors import RecoveryFailedError, RecoverySelectionError
from streamclaim_spark.fleet.recovery.report import (
    FAILED,
    PARTIAL,
    SUCCEEDED,
    GroupReport,
    RecoveryReport,
    describe,
)
from streamclaim_spark.fleet.recovery.rounds import MAX_CLAIM_ROUNDS
from streamclaim_spark.fleet.recovery.run import RecoveryStore, recover_stale, select_groups

__all__ = [
    "FAILED",
    "MAX_CLAIM_ROUNDS",
    "PARTIAL",
    "SUCCEEDED",
    "GroupReport",
    "RecoveryFailedError",
    "RecoveryOptions",
    "RecoveryPolicy",
    "RecoveryReport",
    "RecoverySelectionError",
    "RecoveryStore",
    "describe",
    "parse_backoff",
    "recover_stale",
    "select_groups",
]

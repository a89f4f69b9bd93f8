"""Redrive: put dead-lettered entries back into the groups they died in, once the bug that poisoned them is fixed.

``redrive(store, RedriveOptions(...))`` runs it (docs/RECOVERY.md, "Redrive"). The package holds the
dead-letter side — which letters a run may take, taking and marking them (letters.py) — the state side,
one commit that puts the entries back (put_back.py), the report (report.py) and the run (run.py).
"""

from __future__ import annotations

from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.errors import RedriveFailedError, RedriveSelectionError
from streamclaim_spark.fleet.redrive.put_back import OUTCOMES
from streamclaim_spark.fleet.redrive.report import FAILED, SUCCEEDED, RedriveReport
from streamclaim_spark.fleet.redrive.run import redrive

__all__ = [
    "FAILED",
    "OUTCOMES",
    "SUCCEEDED",
    "RedriveFailedError",
    "RedriveOptions",
    "RedriveReport",
    "RedriveSelectionError",
    "redrive",
]

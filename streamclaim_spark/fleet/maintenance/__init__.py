"""Maintenance of a store that runs for months: compaction, vacuum and log trimming within a retention.

``maintain`` is what ``streamclaim-maintain`` and ``StreamStore.maintain`` run (docs/DESIGN.md, "History
through time travel", and docs/MAINTENANCE.md); ``verify_counts`` what ``streamclaim-maintain --verify``
and ``StreamStore.verify_counts`` run (docs/DESIGN.md, "Kept counts").
"""

from __future__ import annotations

from streamclaim_spark.fleet.maintenance.run import MaintenanceReport, TableReport, maintain
from streamclaim_spark.fleet.maintenance.verify import CountReport, verify_counts

__all__ = ["CountReport", "MaintenanceReport", "TableReport", "maintain", "verify_counts"]

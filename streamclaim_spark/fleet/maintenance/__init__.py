"""Maintenance of a store that runs for months: compaction, vacuum and log trimming within a retention.

``maintain`` is what ``streamclaim-maintain`` and ``StreamStore.maintain`` run (docs/DESIGN.md, "History
through time travel", and docs/MAINTENANCE.md).
"""

from __future__ import annotations

from streamclaim_spark.fleet.maintenance.run import MaintenanceReport, TableReport, maintain

__all__ = ["MaintenanceReport", "TableReport", "maintain"]

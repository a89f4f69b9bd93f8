"""A batch's reads of partitions it does not hold in memory: the stored rows with its changes laid over.

A partition that is too big to load (reads.py) used to be read through Spark over the pinned table with
every changed row replaced: a query, and a Spark job, for each read after the batch's first write. The
prefetch of such a partition instead reads the table as stored (on the driver from its kept files where
it can) and lays the batch's changes over the rows in Python: a point lookup of a row the batch changed
is known already, one it did not change reads as stored, and a range read takes as many more stored rows
as the batch changed in that partition, drops the changed ones and merges their new versions in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import Need, Scan
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.batch.rows import Key, Row, row_id
from streamclaim_spark.state.prefetch import ScanKey


def in_scan(row: Row, scan: Scan) -> bool:
    """Whether ``row`` is one ``scan`` reads (its ID range, owner and delivery time; not its limit)."""
    return (
        scan.low.stored() <= row_id(row) <= scan.high.stored()
        and (scan.owner is None or row[C.OWNER] == scan.owner)
        and (scan.delivered_at_or_before is None or row[C.DELIVERY_TIME_MS] <= scan.delivered_at_or_before)
    )


def in_order(rows: Iterable[Any], scan: Scan) -> list[Any]:
    """``rows`` (all in ``scan``) in its order, cut to its limit."""
    ordered = sorted(rows, key=row_id, reverse=scan.reverse)
    return ordered if scan.limit is None else ordered[: scan.limit]


@dataclass(frozen=True)
class WidenedScan:
    """A range a need reads, and the wider one read from the stored table to lay the changes over."""

    kind: str
    key: str
    group: str | None
    partition: str
    scan: Scan
    stored: Scan


def widened(needs: Sequence[Need], changed: dict[tuple[str, str], list[Key]]) -> tuple[list[Need], list[WidenedScan]]:
    """``needs`` with each range read over a partition the batch changed widened by the rows it changed
    there (``changed``: their keys by partition and kind): however many of them the stored range holds,
    the rest still fill the range's limit."""
    wide_needs: list[Need] = []
    scans: list[WidenedScan] = []
    for need in needs:
        entry_scan, pending_scan = need.entry_scan, need.pending_scan
        if need.entry_scan is not None:
            part = stream_partition(need.key)
            entry_scan = _wider(need.entry_scan, len(changed.get((part, C.KIND_ENTRY), ())))
            scans.append(WidenedScan(C.KIND_ENTRY, need.key, None, part, need.entry_scan, entry_scan))
        if need.pending_scan is not None:
            group = need.groups[0]
            part = group_partition(need.key, group)
            pending_scan = _wider(need.pending_scan, len(changed.get((part, C.KIND_PENDING), ())))
            scans.append(WidenedScan(C.KIND_PENDING, need.key, group, part, need.pending_scan, pending_scan))
        wide_needs.append(replace(need, entry_scan=entry_scan, pending_scan=pending_scan))
    return wide_needs, scans


def _wider(scan: Scan, changed: int) -> Scan:
    return scan if scan.limit is None or changed == 0 else replace(scan, limit=scan.limit + changed)


def overlaid(stored: Sequence[Any], changed: dict[Key, Row | None], scan: Scan) -> list[Any]:
    """A range's rows: ``stored`` (the widened range's stored rows) without those the batch changed,
    with the changed rows' current versions (``changed``: key to row, None when deleted) that fall in it."""
    kept = [row for row in stored if stored_key(row) not in changed]
    now = [row for row in changed.values() if row is not None and in_scan(row, scan)]
    return in_order(kept + now, scan)


def in_range_read(row: Any, scan_key: ScanKey | None) -> bool:
    """Whether a prefetched row belongs to the prefetch's range read (``scan_key``: kind, stream, group),
    as ``PrefetchedSnapshot._remember`` files it: such a row is laid over, not remembered by its key."""
    if scan_key is None or row[C.ROW_KIND] != scan_key[0] or row[C.STREAM] != scan_key[1]:
        return False
    return bool(row[C.ROW_KIND] == C.KIND_ENTRY or row[C.GROUP] == scan_key[2])


def stored_key(row: Any) -> Key:
    """A stored row's key (a dict read on the driver or a Spark ``Row``), as ``rows.row_key`` makes it."""
    return tuple(row[column] for column in C.KEY_COLUMNS)

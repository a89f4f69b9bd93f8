"""A group's PEL by delivery time: XREADGROUP CLAIM's idle entries, oldest delivery first, and the newest
time in XNACK's zone (``model.nack_time``).

Both read the whole PEL of one group, not a range of IDs, so they do not go through the prefetch: the
group's kept PEL files are read on the driver when they hold at most the placement's ``Work.PREFETCH``
rows (no Spark job), else Spark reads them (not kept, too many rows, Connect, time travel, a batch's
overlay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.model import PendingEntry
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state.columns import pending_from_row
from streamclaim_spark.state.prefetch_rows import rows_of

if TYPE_CHECKING:  # the snapshot calls these with itself
    from streamclaim_spark.state.snapshot import Snapshot

# What ``pending_from_row`` reads, and what picks the group's rows.
PEL_COLUMNS = (
    C.PARTITION_ID,
    C.ROW_KIND,
    C.STREAM,
    C.ID_MS,
    C.ID_SEQ,
    C.OWNER,
    C.DELIVERY_TIME_MS,
    C.DELIVERY_COUNT,
)


def idle_pending(
    snapshot: Snapshot, key: str, group: str, delivered_at_or_before: int, limit: int | None
) -> list[PendingEntry]:
    """PEL entries delivered at or before the cutoff, oldest delivery first (ties in ID order), at most
    ``limit``: the head of Redis' time-ordered PEL list, which XREADGROUP CLAIM walks."""
    stored = _stored_pel(snapshot, key, group)
    if stored is not None:
        idle = stored.filter(pc.less_equal(stored[C.DELIVERY_TIME_MS], delivered_at_or_before))
        oldest = idle.sort_by([(C.DELIVERY_TIME_MS, "ascending"), (C.ID_MS, "ascending"), (C.ID_SEQ, "ascending")])
        chosen = oldest if limit is None else oldest.slice(0, limit)
        return [pending_from_row(row) for row in chosen.to_pylist()]
    rows = (
        snapshot.rows_of(group_partition(key, group), C.KIND_PENDING)
        .where(F.col(C.DELIVERY_TIME_MS) <= delivered_at_or_before)
        .orderBy(C.DELIVERY_TIME_MS, C.ID_MS, C.ID_SEQ)
    )
    if limit is not None:
        rows = rows.limit(limit)
    return [pending_from_row(row) for row in rows.collect()]


def last_nack_time(snapshot: Snapshot, key: str, group: str) -> int | None:
    """The largest delivery time in the group's NACK zone (its times are negative), None when it is empty."""
    stored = _stored_pel(snapshot, key, group)
    if stored is not None:
        times = stored[C.DELIVERY_TIME_MS]
        latest = pc.max(times.filter(pc.less(times, 0))).as_py()
        return None if latest is None else int(latest)
    pending = snapshot.rows_of(group_partition(key, group), C.KIND_PENDING)
    row = pending.where(F.col(C.DELIVERY_TIME_MS) < 0).agg(F.max(C.DELIVERY_TIME_MS)).first()
    return None if row is None else row[0]


def _stored_pel(snapshot: Snapshot, key: str, group: str) -> pa.Table | None:
    """The group's PEL rows from its kept files, read on the driver; None where Spark must read them."""
    partition = group_partition(key, group)
    files = [FileQuery((partition,), (C.KIND_PENDING,))]
    stored = snapshot.stored_rows(files, PEL_COLUMNS, placement().rows_max(Work.PREFETCH))
    return None if stored is None else rows_of(stored, key, partition, C.KIND_PENDING)

"""A prefetch's lookups by ID and its range answered from stored rows on the driver, in Arrow.

A command's prefetch query is one Spark job over the few kept files it may read (XREADGROUP's entries,
XCLAIM's PEL rows by ID, XRANGE's range): 0.15-0.25 s of a command on a test-sized store
(CHANGELOG.md, "Heads from their own files in every command's read"). When those files hold
few rows, the snapshot reads them on the driver (``kept_rows``) and the same rows are picked here:
each lookup's partition, kind and stream, its IDs or its range (ID bounds, owner, delivery cutoff),
the range ordered by ID and cut at its limit, as the query's ``ORDER BY`` and ``LIMIT`` cut it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Scan
from streamclaim_spark.state.schema import COLUMN_NAMES

# Most lookups answered on the driver: each filters the stored rows once, so a fleet's thousands of
# needs are left to the Spark query, which tests them in one pass.
PREFETCH_LOOKUPS_MAX = 64
# The columns a prefetch's rows carry: all but the bucket, which is the files' partition value.
ROW_COLUMNS = tuple(name for name in COLUMN_NAMES if name != C.BUCKET)


@dataclass(frozen=True)
class Lookup:
    """One disjunct of a prefetch: rows of ``kind`` in ``partition`` of stream ``key``, by ID (``ids``)
    or in the ordered range ``scan``."""

    key: str
    partition: str
    kind: str
    ids: tuple[StreamId, ...] = ()
    scan: Scan | None = None


def prefetch_rows(stored: pa.Table, lookups: Sequence[Lookup]) -> list[dict[str, Any]]:
    """The rows of ``stored`` (every row of the files the lookups may read) that ``lookups`` select:
    those looked up by ID, then each range's, in its order and up to its limit."""
    found: list[dict[str, Any]] = []
    for lookup in lookups:
        rows = rows_of(stored, lookup.key, lookup.partition, lookup.kind)
        if lookup.scan is not None:
            found.extend(_in_range(rows, lookup.scan).to_pylist())
        else:
            found.extend(_by_id(rows, lookup.ids).to_pylist())
    return found


def rows_of(stored: pa.Table, key: str, partition: str, kind: str) -> pa.Table:
    """The rows of ``stored`` of ``kind`` in ``partition`` of stream ``key``."""
    return stored.filter(
        pc.and_(
            pc.and_(pc.equal(stored[C.PARTITION_ID], partition), pc.equal(stored[C.ROW_KIND], kind)),
            pc.equal(stored[C.STREAM], key),
        )
    )


def _by_id(rows: pa.Table, ids: Sequence[StreamId]) -> pa.Table:
    """The rows whose ID is one of ``ids``."""
    wanted = {wanted_id.stored() for wanted_id in ids}
    near = rows.filter(pc.is_in(rows[C.ID_MS], value_set=pa.array(sorted({ms for ms, _ in wanted}), pa.int64())))
    pairs = zip(near[C.ID_MS].to_pylist(), near[C.ID_SEQ].to_pylist(), strict=True)
    return near.filter(pa.array([pair in wanted for pair in pairs], pa.bool_()))


def _in_range(rows: pa.Table, scan: Scan) -> pa.Table:
    """The rows in ``scan``'s ID range (and of its owner, delivered early enough), ordered, cut at its limit."""
    ms, seq = rows[C.ID_MS], rows[C.ID_SEQ]
    low_ms, low_seq = scan.low.stored()
    high_ms, high_seq = scan.high.stored()
    at_least_low = pc.or_(pc.greater(ms, low_ms), pc.and_(pc.equal(ms, low_ms), pc.greater_equal(seq, low_seq)))
    at_most_high = pc.or_(pc.less(ms, high_ms), pc.and_(pc.equal(ms, high_ms), pc.less_equal(seq, high_seq)))
    keep = pc.and_(at_least_low, at_most_high)
    if scan.owner is not None:
        keep = pc.and_(keep, pc.equal(rows[C.OWNER], scan.owner))
    if scan.delivered_at_or_before is not None:
        keep = pc.and_(keep, pc.less_equal(rows[C.DELIVERY_TIME_MS], scan.delivered_at_or_before))
    order = "descending" if scan.reverse else "ascending"
    chosen = rows.filter(keep).sort_by([(C.ID_MS, order), (C.ID_SEQ, order)])
    return chosen if scan.limit is None else chosen.slice(0, scan.limit)

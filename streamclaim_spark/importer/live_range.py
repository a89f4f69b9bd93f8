"""Which stored entries a diffed stream may have lost in Redis, and which of those it did.

Redis trims from the front and XDEL (XACKDEL, XDELEX) raises ``max-deleted-entry-id``, so a re-run
after deletions reads only the live IDs between the stream's first live ID and the smaller of
``max-deleted-entry-id`` and the store's last ID (``StreamCopy.live_low``/``live_high``): a stored
entry below that range is gone, one above it is live, one inside it is live when among the live IDs
read. After one XDEL of an early entry in 1M, that is the IDs up to it instead of 1M (docs/IMPORT.md).
Both commit paths apply the rule: ``gone_on_driver`` in pyarrow, ``may_be_gone`` as a Spark filter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.partitions import stream_partition
from streamclaim_spark.importer.redis_reader import StreamCopy

_ID_KEYS = [C.PARTITION_ID, C.ID_MS, C.ID_SEQ]
_BOUNDS = pa.schema(
    [
        pa.field(C.PARTITION_ID, pa.string()),
        pa.field("_has_low", pa.bool_()),
        *(pa.field(name, pa.int64()) for name in ("_low_ms", "_low_seq", "_high_ms", "_high_seq")),
    ]
)


def live_bounds(copies: Sequence[StreamCopy]) -> pa.Table:
    """Each diffed stream's partition with its live range in stored ID parts (``_has_low`` false: no
    entry is live, every stored one is gone)."""
    rows: dict[str, list[object]] = {name: [] for name in _BOUNDS.names}
    for copy in copies:
        if copy.mode != "diff" or copy.live_high is None:
            continue
        low = copy.live_low.stored() if copy.live_low is not None else (0, 0)
        high = copy.live_high.stored()
        values = (stream_partition(copy.meta.key), copy.live_low is not None, *low, *high)
        for name, value in zip(_BOUNDS.names, values, strict=True):
            rows[name].append(value)
    return pa.table(rows, schema=_BOUNDS)


def gone_on_driver(stored: pa.Table, live: pa.Table, bounds: pa.Table) -> pa.Table:
    """The IDs (partition, ``id_ms``, ``id_seq``) of ``stored`` entries of the bounded streams that Redis no
    longer has, given its ``live`` IDs within each stream's range."""
    rows = stored.select(_ID_KEYS).join(bounds, C.PARTITION_ID, join_type="inner")
    ms, seq = rows[C.ID_MS].to_numpy(), rows[C.ID_SEQ].to_numpy()
    has_low = rows["_has_low"].to_numpy(zero_copy_only=False)
    below = ~has_low | _before(ms, seq, rows["_low_ms"].to_numpy(), rows["_low_seq"].to_numpy())
    above = _before(rows["_high_ms"].to_numpy(), rows["_high_seq"].to_numpy(), ms, seq)
    inside = rows.filter(pa.array(~below & ~above)).select(_ID_KEYS)
    unread = inside.join(live.select(_ID_KEYS), _ID_KEYS, join_type="left anti")
    return pa.concat_tables([rows.filter(pa.array(below)).select(_ID_KEYS), unread.select(_ID_KEYS)])


def may_be_gone(spark: SparkSession, entries: DataFrame, bounds: pa.Table) -> DataFrame:
    """The ``entries`` that may be gone: all of a stream without bounds (removed, or copied whole), and
    those not above the live range of a diffed one."""
    if not bounds.num_rows:
        return entries
    limits = F.broadcast(spark.createDataFrame(bounds))
    high_ms, high_seq = F.col("_high_ms"), F.col("_high_seq")
    above_high = (F.col(C.ID_MS) > high_ms) | ((F.col(C.ID_MS) == high_ms) & (F.col(C.ID_SEQ) > high_seq))
    low_ms, low_seq = F.col("_low_ms"), F.col("_low_seq")
    at_or_after_low = (F.col(C.ID_MS) > low_ms) | ((F.col(C.ID_MS) == low_ms) & (F.col(C.ID_SEQ) >= low_seq))
    kept = F.coalesce(F.col("_has_low") & at_or_after_low & above_high, F.lit(False))
    return entries.join(limits, C.PARTITION_ID, "left").where(~kept).select(*entries.columns)


def _before(ms: np.ndarray, seq: np.ndarray, other_ms: np.ndarray, other_seq: np.ndarray) -> np.ndarray:
    """Row by row: the ID (``ms``, ``seq``) is below (``other_ms``, ``other_seq``), stored parts compared."""
    result: np.ndarray = (ms < other_ms) | ((ms == other_ms) & (seq < other_seq))
    return result

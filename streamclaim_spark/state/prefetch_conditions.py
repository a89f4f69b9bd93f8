"""The Column conditions of a prefetch query (prefetch.py): each disjunct's rows, as Spark filters them.

A prefetch the driver answers from the kept files (prefetch_rows.py) never builds them: each is a few
py4j round trips an ID (``id_in``), ~20 ms of an XCLAIM when they were built for every prefetch.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import Scan
from streamclaim_spark.state.columns import id_between, id_in
from streamclaim_spark.state.schema import kind_in


def scan_filter(scan: Scan) -> Column:
    """The rows an ordered range read selects: its ID range, and its owner and delivery cutoff if any."""
    condition = id_between(scan.low, scan.high)
    if scan.owner is not None:
        condition = condition & (F.col(C.OWNER) == scan.owner)
    if scan.delivered_at_or_before is not None:
        condition = condition & (F.col(C.DELIVERY_TIME_MS) <= scan.delivered_at_or_before)
    return condition


def any_of(conditions: Sequence[Column]) -> Column:
    """The disjunction of ``conditions`` (at least one)."""
    combined = conditions[0]
    for condition in conditions[1:]:
        combined = combined | condition
    return combined


def rows_by_id(partition: str, kind: str, ids: Sequence[StreamId]) -> Column:
    """The rows of ``kind`` in ``partition`` whose ID is one of ``ids``."""
    return kind_in(partition, kind) & id_in(ids)


def rows_in_range(partition: str, kind: str, scan: Scan) -> Column:
    """The rows of ``kind`` in ``partition`` that ``scan`` selects."""
    return kind_in(partition, kind) & scan_filter(scan)


def consumer_rows(partitions: Sequence[str], name: str) -> Column:
    """The consumer rows named ``name`` in ``partitions``."""
    return kind_in(partitions, C.KIND_CONSUMER) & (F.col(C.CONSUMER) == name)

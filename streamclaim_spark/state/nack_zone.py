"""The NACK zone's times as Spark expressions: ``model.nack_time`` over columns, and its inverse.

Bulk paths that give entries back (a recovery round's ``assign="nack"``, a redrive) place them after the
zone's end as one XNACK would (``model.nack_time``), and a dead letter finds the ms its entry was given up
at from its NACK-zone time. One place keeps the formula those three share with the commands.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamclaim_spark.core.model import NACK_SLOTS_PER_MS, NACK_ZONE_BASE


def first_nack_time(zone_end: Column, now: int) -> Column:
    """``model.nack_time(now, zone_end)``: the slot of ``now``, or right after ``zone_end`` (the zone's
    largest time, null when empty) when that lies at or past the slot."""
    slot = F.lit(NACK_ZONE_BASE + now * NACK_SLOTS_PER_MS)
    return F.when(zone_end.isNull() | (zone_end < slot), slot).otherwise(zone_end + 1)


def nacked_at_ms(delivery_time: Column) -> Column:
    """The Unix ms at which an entry with NACK-zone time ``delivery_time`` was given back (the slot's ms)."""
    return F.floor((delivery_time - F.lit(NACK_ZONE_BASE)) / F.lit(NACK_SLOTS_PER_MS))

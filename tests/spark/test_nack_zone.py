"""The NACK zone's Column forms, which bulk paths use, against ``model.nack_time``, which commands use."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core.model import nack_time
from streamclaim_spark.state.nack_zone import first_nack_time, nacked_at_ms

pytestmark = pytest.mark.spark

NOW = 1_700_000_000_123


def test_first_nack_time_and_its_inverse_agree_with_the_commands_formula_at_every_zone_end(
    spark: SparkSession,
) -> None:
    slot = nack_time(NOW, None)
    # An empty zone, one ended a ms before now's slot, one ended at it, one already past it.
    ends = [None, nack_time(NOW - 1, None), slot, slot + 5]
    frame = spark.createDataFrame([(end,) for end in ends], "zone_end bigint")

    rows = frame.select(first_nack_time(F.col("zone_end"), NOW).alias("first")).collect()
    firsts = [row["first"] for row in rows]

    assert firsts == [nack_time(NOW, end) for end in ends] == [slot, slot, slot + 1, slot + 6]
    ms = frame.select(nacked_at_ms(F.lit(slot) + F.lit(7)).alias("ms")).first()
    assert ms is not None and ms["ms"] == NOW

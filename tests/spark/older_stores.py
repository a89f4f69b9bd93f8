"""Stores as older code left them on disk, made from a store of today's code: for the upgrade tests."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.errors import StoreLayoutError
from streamclaim_spark.state.schema import STATE_SCHEMA
from streamclaim_spark.state.tables import table_path, upgrade_layout


def drop_state_columns(spark: SparkSession, store_path: str, *columns: str) -> None:
    """Rewrites the store's state table without ``columns``: the rows as the code before them wrote them."""
    state = table_path(store_path, C.STATE_TABLE_DIR)
    rows = spark.read.format("delta").load(state).drop(*columns)
    old = rows.localCheckpoint().write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    old.partitionBy(C.BUCKET).save(state)


def has_todays_columns(spark: SparkSession, store_path: str) -> bool:
    """True when the state table's columns are today's, in today's order and types."""
    columns = spark.read.format("delta").load(table_path(store_path, C.STATE_TABLE_DIR)).schema.fields
    return [(c.name, c.dataType) for c in columns] == [(c.name, c.dataType) for c in STATE_SCHEMA.fields]


def assert_refused_until_upgraded(spark: SparkSession, store_path: str, keeps: str) -> None:
    """The store is refused naming what it ``keeps``; ``upgrade_layout`` upgrades it once (a second run
    finds nothing to do) to today's columns in today's order."""
    with pytest.raises(StoreLayoutError) as refused:
        StreamStore.open(store_path, spark=spark)
    assert f"keeps {keeps}" in str(refused.value)
    assert upgrade_layout(spark, store_path) is True
    assert upgrade_layout(spark, store_path) is False
    assert has_todays_columns(spark, store_path)

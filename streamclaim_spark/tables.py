"""Creates and opens the store's Delta tables. No other module writes DDL."""

from __future__ import annotations

import time

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from streamclaim_spark import _constants as C
from streamclaim_spark.schema import STATE_SCHEMA
from streamclaim_spark.transaction import is_lost_race

# Table properties of the state table, each for a reason given in docs/DESIGN.md ("Layout").
STATE_TABLE_PROPERTIES = {
    # Updates and deletes (claims, acks) write small deletion-vector files instead of rewriting data.
    "delta.enableDeletionVectors": "true",
    # Each command commits a few small files; compaction after commits keeps reads fast.
    "delta.autoOptimize.autoCompact": "true",
    # Statistics only on the columns commands filter on: IDs, kinds, names, delivery times.
    "delta.dataSkippingStatsColumns": ",".join(
        [C.ROW_KIND, C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, C.CONSUMER, C.OWNER, C.DELIVERY_TIME_MS, C.DELIVERY_COUNT]
    ),
}


def table_path(store_path: str, table_dir: str) -> str:
    return store_path.rstrip("/") + "/" + table_dir


def ensure_state_table(spark: SparkSession, store_path: str) -> str:
    """Creates the state table under ``store_path`` unless it exists; returns its path.

    Two processes opening a new store at once may both try to create it; the loser sees Delta's
    conflict (or the other's table) and simply uses the table that won.
    """
    path = table_path(store_path, C.STATE_TABLE_DIR)
    for attempt in range(5):
        if DeltaTable.isDeltaTable(spark, path):
            return path
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(STATE_SCHEMA)
        builder = builder.partitionedBy(C.PARTITION_ID)
        for key, value in STATE_TABLE_PROPERTIES.items():
            builder = builder.property(key, value)
        try:
            builder.execute()
            return path
        except Exception as error:
            if not is_lost_race(error) and "already exists" not in str(error).lower():
                raise
            time.sleep(0.2 * (attempt + 1))
    return path

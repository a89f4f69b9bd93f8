"""What a commit of files wrote, read back from its log entry and the files it added.

``files_added_at``: the files a commit added, with their statistics (a streaming batch's removal drops
files it added whole, unread). ``pending_rows_written``: the self-check of a claim.

A MERGE or UPDATE reports the rows it changed in its metrics, and a claim checks them against what it
decided. A commit of files reports files and rows written, copies of unchanged rows included, so the
claim reads back instead: the PEL rows of the files the commit added that carry the commit's own token
(``txn``), which a claim writes on exactly the rows it claims. Read on the driver (driver_files.py), from
the commit's log entry: no Spark job.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.state.delta_io import delta_log
from streamclaim_spark.state.driver_files import each_on_driver
from streamclaim_spark.state.scala_seqs import java_items


def pending_rows_written(spark: SparkSession, table_path: str, version: int, txn: str) -> int:
    """How many PEL rows the files commit ``version`` added hold with ``txn`` as their token."""
    jvm = spark._jvm
    assert jvm is not None
    changes = delta_log(spark, table_path).getChanges(version, version, jvm.scala.Option.empty(), True)
    actions = java_items(jvm, changes.next()._2()) if changes.hasNext() else []
    added = [action for action in actions if action.getClass().getSimpleName() == "AddFile"]

    def written(rows: pa.Table) -> int:
        mine = pc.and_kleene(pc.equal(rows.column(C.TXN), txn), pc.equal(rows.column(C.ROW_KIND), C.KIND_PENDING))
        return int(pc.sum(pc.fill_null(mine, False).cast(pa.int64())).as_py() or 0)

    return sum(each_on_driver(spark, table_path, added, [C.TXN, C.ROW_KIND], written))


def files_added_at(spark: SparkSession, table_path: str, version: int) -> dict[str, FileBounds]:
    """The data files the commit of ``version`` added, by path, each with its statistics' bounds.
    Read from that commit's log entry on the driver (no Spark job): a transaction's ``files_in`` drops
    every statistic but the row count. Empty when the entry is gone (log retention) or has no statistics."""
    jvm = spark._jvm
    assert jvm is not None
    try:
        changes = delta_log(spark, table_path).getChanges(version, version, jvm.scala.Option.empty(), False)
        actions = java_items(jvm, changes.next()._2()) if changes.hasNext() else []
    except Py4JError:
        return {}
    added: dict[str, FileBounds] = {}
    for action in actions:
        if action.getClass().getSimpleName() == "AddFile" and action.deletionVector() is None:
            bounds = FileBounds.from_stats(str(action.path()), action.stats())
            if bounds is not None:
                added[bounds.path] = bounds
    return added

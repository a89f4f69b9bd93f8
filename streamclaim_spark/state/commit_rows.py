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

from typing import Any

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
    added = _files_added(spark, table_path, version, fail_on_data_loss=True)

    def written(rows: pa.Table) -> int:
        mine = pc.and_kleene(pc.equal(rows.column(C.TXN), txn), pc.equal(rows.column(C.ROW_KIND), C.KIND_PENDING))
        return int(pc.sum(pc.fill_null(mine, False).cast(pa.int64())).as_py() or 0)

    return sum(each_on_driver(spark, table_path, added, [C.TXN, C.ROW_KIND], written))


def files_added_at(spark: SparkSession, table_path: str, version: int) -> dict[str, FileBounds]:
    """The data files the commit of ``version`` added, by path, each with its statistics' bounds.
    Read from that commit's log entry on the driver (no Spark job): a transaction's ``files_in`` drops
    every statistic but the row count. Empty when the entry is gone (log retention) or has no statistics."""
    try:
        files = _files_added(spark, table_path, version, fail_on_data_loss=False)
    except Py4JError:
        return {}
    added: dict[str, FileBounds] = {}
    for action in files:
        if action.deletionVector() is None:
            bounds = FileBounds.from_stats(str(action.path()), action.stats())
            if bounds is not None:
                added[bounds.path] = bounds
    return added


def _files_added(spark: SparkSession, table_path: str, version: int, *, fail_on_data_loss: bool) -> list[Any]:
    """The ``AddFile`` actions of the commit of ``version``, from its log entry (Delta's ``getChanges``)."""
    jvm = spark._jvm
    assert jvm is not None
    log = delta_log(spark, table_path)
    changes = log.getChanges(version, version, jvm.scala.Option.empty(), fail_on_data_loss)
    actions = java_items(jvm, changes.next()._2()) if changes.hasNext() else []
    return [action for action in actions if action.getClass().getSimpleName() == "AddFile"]

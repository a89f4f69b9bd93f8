"""What a commit of files wrote, read back from the files it added: the self-check of a claim.

A MERGE or UPDATE reports the rows it changed in its metrics, and a claim checks them against what it
decided. A commit of files reports files and rows written, copies of unchanged rows included, so the
claim reads back instead: the PEL rows of the files the commit added that carry the commit's own token
(``txn``), which a claim writes on exactly the rows it claims. Read on the driver (driver_files.py), from
the commit's log entry: no Spark job.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
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

"""A condition on a Delta table as the Catalyst filters Delta's file pruning and its conflict check take.

A transaction of files (delta_txn.py) lists the files a query may hold and records what it read with
these filters, as Delta's own MERGE records its reads: a concurrent commit adding a file they may match
makes it conflict.
"""

from __future__ import annotations

import weakref
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from streamclaim_spark.state.scala_seqs import scala_seq

# Each session's Delta table, per path, that ``pruning_filters`` resolves its conditions against: only
# the columns' names and types matter there, and loading the table again cost 16 ms a filter (two per
# command commit). The columns filtered on (partition, kind, bucket, IDs) are in every table version.
_FILTERED_TABLES: weakref.WeakKeyDictionary[SparkSession, dict[str, DataFrame]] = weakref.WeakKeyDictionary()


def pruning_filters(spark: SparkSession, table_path: str, condition: Column) -> Any:
    """``condition`` on the Delta table at ``table_path`` as the Catalyst filters Delta's file pruning
    and its conflict check take (a Scala ``Seq``)."""
    tables = _FILTERED_TABLES.setdefault(spark, {})
    if table_path not in tables:
        tables[table_path] = spark.read.format("delta").load(table_path)
    analyzed = tables[table_path].where(condition)._jdf.queryExecution().analyzed()
    jvm = spark._jvm
    assert jvm is not None
    # Delta prunes by the filters that name only partition columns, one conjunct each: a conjunction
    # given whole prunes nothing (it names a data column too).
    return scala_seq(jvm, _conjuncts(analyzed.condition()))


def _conjuncts(expression: Any) -> list[Any]:
    """The terms of a Catalyst ``And`` tree (``expression`` itself when it is no ``And``)."""
    if expression.getClass().getSimpleName() == "And":
        return [*_conjuncts(expression.left()), *_conjuncts(expression.right())]
    return [expression]

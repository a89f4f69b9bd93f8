"""A condition on a Delta table as the Catalyst filters Delta's file pruning and its conflict check take.

A transaction of files (delta_txn.py) lists the files a query may hold and records what it read with
these filters, as Delta's own MERGE records its reads: a concurrent commit adding a file they may match
makes it conflict. ``bucket_filters``, the read a command records, keeps what it built per table and buckets.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
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


# Each session's filters of ``bucket IN (...)`` per (table, buckets), the most recently used kept: a live
# command records the same few buckets commit after commit, and building them (a Catalyst analysis and a
# Scala Seq) cost an XADD, which records two reads, 84 py4j round trips and ~30 ms (interleaved A/B).
# Catalyst expressions are immutable, so transactions share them.
_BUCKET_FILTERS: weakref.WeakKeyDictionary[SparkSession, OrderedDict[tuple[str, tuple[str, ...]], Any]] = (
    weakref.WeakKeyDictionary()
)
_BUCKET_FILTERS_KEPT = 1024
_BUCKET_FILTERS_LOCK = threading.Lock()


def bucket_filters(spark: SparkSession, table_path: str, buckets: Iterable[str]) -> Any:
    """``pruning_filters`` of rows in ``buckets`` of the table at ``table_path``: what a transaction of
    files records as read (Delta's conflict check tests its partition predicates alone)."""
    key = (table_path, tuple(sorted(set(buckets))))
    with _BUCKET_FILTERS_LOCK:
        kept = _BUCKET_FILTERS.setdefault(spark, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
    filters = pruning_filters(spark, table_path, F.col(C.BUCKET).isin(*key[1]))
    with _BUCKET_FILTERS_LOCK:
        kept[key] = filters
        if len(kept) > _BUCKET_FILTERS_KEPT:
            kept.popitem(last=False)
    return filters


def _conjuncts(expression: Any) -> list[Any]:
    """The terms of a Catalyst ``And`` tree (``expression`` itself when it is no ``And``)."""
    if expression.getClass().getSimpleName() == "And":
        return [*_conjuncts(expression.left()), *_conjuncts(expression.right())]
    return [expression]

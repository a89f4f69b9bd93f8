"""The data files that may hold a plan's row writes, rewritten on the driver with the writes applied.

A command writes a few rows: its heads, a consumer, a few entries or PEL rows. A MERGE of them took
1.5-2.4 s whatever their number (a consumer added to a group of a 1,000-entry stream: 2.4 s; as files
0.85 s, CHANGELOG.md "A command's commit as files"): it plans a join, scans the files its
condition keeps, and writes in Spark. Here the files the writes' keys may lie in (their bucket,
partition and ID statistics) are read on the driver by pyarrow, the MERGE's clauses are applied to
the rows they hold (core/write_rules.py), and only the files whose rows change are written again, in
one local frame with the rows the writes insert. A write that inserts (a new entry, a delivery's PEL
row) finds no file holding its ID and rewrites none.

Heads in bulk (``create_groups``' thousands of head rows) take the same way: head files hold heads and
consumers only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.count_rules import CountInputs, counted_rows, needs_recount
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId, from_stored
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.partitions import (
    APART_KINDS,
    APART_PREFIX,
    BUCKET_HEX_CHARS,
    bucket_of,
    is_group_partition,
)
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.core.write_rules import Key, Row, apply_writes
from streamclaim_spark.state.add_files import row_count
from streamclaim_spark.state.arrow_schema import ARROW_SCHEMA, in_schema
from streamclaim_spark.state.delta_txn import DeltaTransaction
from streamclaim_spark.state.driver_files import readable_on_driver
from streamclaim_spark.state.head_files import driver_tables

# The order rows are written in: each file then covers one bucket's rows by partition, kind and ID,
# and reads by ID range skip files by their statistics.
WRITE_ORDER = (C.BUCKET, C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ, C.CONSUMER)


@dataclass(frozen=True)
class WrittenRows:
    """What the writes change: the files whose rows change (the commit removes them) and their rows
    after the writes with the rows the writes insert, in the state table's Arrow schema and
    ``WRITE_ORDER`` (None: no row to write)."""

    replaced: list[Any]
    rows: pa.Table | None


NOTHING_WRITTEN = WrittenRows([], None)


def rewrite_written_rows(
    spark: SparkSession,
    txn: DeltaTransaction,
    plan_writes: Sequence[Write],
    max_rows: int | None = None,
    counting: CountInputs | None = None,
) -> WrittenRows | None:
    """The files ``plan_writes`` change and their rows after them (see the module's text), the groups'
    kept counts with them (core/count_rules.py; ``counting``: the plan's PEL changes beyond its writes).

    Raises ``StaleSnapshotError`` for a guard whose row moved (a lost race), as the MERGE's guard does.
    With ``max_rows``, None when the files that may hold the writes hold more rows, or a deletion
    vector: the caller then commits by MERGE. Without it such files are read through Delta.
    """
    writes = list(plan_writes)  # apply_writes keeps the last write to each key; a key twice lists no more files
    if not writes:
        return NOTHING_WRITTEN
    counting = counting or CountInputs()
    groups_touched = _groups_touched(writes, counting)
    files = _files_of(txn, writes, groups_touched)
    if max_rows is not None and (
        sum(row_count(file) for file in files) > max_rows or not readable_on_driver(spark, files)
    ):
        return None
    groups = _stored_groups(spark, txn, files)
    located = _locate(groups, {write.key() for write in writes})
    stored = {key: groups[group][1].slice(position, 1).to_pylist()[0] for key, (group, position) in located.items()}
    changes: dict[Key, Row | None] = dict(apply_writes(stored, writes))
    if not changes:
        return NOTHING_WRITTEN
    group_rows, group_located = _group_rows(groups, groups_touched)
    # An uncounted change makes a recount moot; a removal's PEL is not reread (its dropped files stay unread).
    recountable = groups_touched - set(counting.uncounted) - set(counting.unread)
    recount = [p for p in sorted(recountable) if needs_recount(p, group_rows.get(p, {}), changes)]
    recounts = _recounts(spark, txn, recount) if recount else {}
    counted = counted_rows(groups_touched, stored, changes, group_rows, replace(counting, recounts=recounts))
    changes.update(counted)
    located.update({key: group_located[key] for key in counted if key not in located and key in group_located})
    dropped: dict[int, set[int]] = {}
    for key in changes:
        if key in located:
            group, position = located[key]
            dropped.setdefault(group, set()).add(position)
    kept = [_without_positions(groups[group][1], positions) for group, positions in sorted(dropped.items())]
    new_rows = pa.Table.from_pylist(
        [_with_bucket(row) for row in changes.values() if row is not None], schema=ARROW_SCHEMA
    )
    rows = in_write_order(pa.concat_tables([*kept, new_rows]))
    replaced = [file for group in sorted(dropped) for file in groups[group][0]]
    return WrittenRows(replaced, rows if rows.num_rows else None)


def as_state_rows(table: pa.Table) -> pa.Table:
    """Rows built on the driver (some of the state table's columns) in its Arrow schema: the others null,
    each row's bucket from its partition and kind."""
    rows = in_schema(table)
    prefix = pc.utf8_slice_codeunits(rows.column(C.PARTITION_ID), 0, 1 + BUCKET_HEX_CHARS)  # partitions.bucket_of
    apart = pc.is_in(rows.column(C.ROW_KIND), value_set=pa.array(APART_KINDS, pa.string()))
    bucket = pc.if_else(apart, pc.binary_join_element_wise(APART_PREFIX, prefix, ""), prefix)
    position = ARROW_SCHEMA.get_field_index(C.BUCKET)
    return rows.set_column(position, ARROW_SCHEMA.field(position), bucket)


def in_write_order(table: pa.Table) -> pa.Table:
    """Spark's order: nulls first (a head's ID columns), so the files keep the layout a sort in Spark gave."""
    return table.sort_by([(name, "ascending", "at_start") for name in WRITE_ORDER])


def _groups_touched(writes: Sequence[Write], counting: CountInputs) -> set[str]:
    """The group partitions whose kept counts the commit may move or must leave behind."""
    kinds = (C.KIND_GROUP, C.KIND_CONSUMER, C.KIND_PENDING)
    written = {write.partition for write in writes if write.row[C.ROW_KIND] in kinds}
    return written | set(counting.appended) | {p for p in counting.uncounted if is_group_partition(p)}


def _files_of(txn: DeltaTransaction, writes: Sequence[Write], groups_touched: set[str]) -> list[Any]:
    """The files (recorded as read) that may hold a row some write names: the head and consumer files
    of its partitions, and the entry and PEL files whose IDs span its ID; and the group head and
    consumer files of the groups whose counts the commit keeps."""
    queries: list[FileQuery] = []
    apart = [write for write in writes if write.row[C.ROW_KIND] in APART_KINDS]
    if apart or groups_touched:  # one listing: heads and consumers share the ``h`` buckets
        partitions = tuple(sorted({write.partition for write in apart} | groups_touched))
        kinds = {str(write.row[C.ROW_KIND]) for write in apart} | (
            {C.KIND_CONSUMER, C.KIND_GROUP} if groups_touched else set()
        )
        queries.append(FileQuery(partitions, tuple(sorted(kinds))))
    for kind in (C.KIND_ENTRY, C.KIND_PENDING):
        of_kind = [write for write in writes if write.row[C.ROW_KIND] == kind]
        if of_kind:
            ids = sorted((int(write.row[C.ID_MS]), int(write.row[C.ID_SEQ])) for write in of_kind)
            low, high = (StreamId(from_stored(ms), from_stored(seq)) for ms, seq in (ids[0], ids[-1]))
            queries.append(FileQuery(tuple(sorted({write.partition for write in of_kind})), (kind,), low, high))
    files: dict[str, Any] = {}
    for query in queries:
        for file in txn.files_in(query):
            files.setdefault(str(file.path()), file)
    return list(files.values())


def _stored_groups(
    spark: SparkSession, txn: DeltaTransaction, files: Sequence[Any]
) -> list[tuple[list[Any], pa.Table]]:
    """The files' rows, a group per file read on the driver; all in one group when Delta must read them
    (a deletion vector), so that a change to any of their rows rewrites them all."""
    tables = driver_tables(spark, txn.path, files)
    if tables is not None:
        return [([file], table) for file, table in zip(files, tables, strict=True)]
    return [(list(files), txn.read_files(files).toArrow().cast(ARROW_SCHEMA))] if files else []


def _locate(groups: Sequence[tuple[list[Any], pa.Table]], wanted: set[Key]) -> dict[Key, tuple[int, int]]:
    """Where the stored row of each wanted key lies: (group, row position). Rows are narrowed by
    partition and ID in Arrow first, so only a few rows of a file of 100,000 become Python tuples."""
    partitions = pa.array(sorted({str(key[0]) for key in wanted}), pa.string())
    id_ms = pa.array(sorted({int(key[2]) for key in wanted if key[2] is not None}), pa.int64())
    located: dict[Key, tuple[int, int]] = {}
    for group, (_, table) in enumerate(groups):
        ms = table.column(C.ID_MS)
        near = pc.and_(
            pc.is_in(table.column(C.PARTITION_ID), value_set=partitions),
            pc.or_(pc.is_null(ms), pc.is_in(ms, value_set=id_ms)),
        )
        positions = pc.indices_nonzero(near)
        keys = table.select(list(C.KEY_COLUMNS)).take(positions).to_pylist()
        for position, stored in zip(positions.to_pylist(), keys, strict=True):
            key = tuple(stored[name] for name in C.KEY_COLUMNS)
            if key in wanted:
                located[key] = (group, position)
    return located


def _group_rows(
    groups: Sequence[tuple[list[Any], pa.Table]], partitions: set[str]
) -> tuple[dict[str, dict[Key, Row]], dict[Key, tuple[int, int]]]:
    """The stored group head and consumer rows of ``partitions``, by partition and key, and where each lies."""
    rows: dict[str, dict[Key, Row]] = {}
    located: dict[Key, tuple[int, int]] = {}
    if not partitions:
        return rows, located
    wanted = pa.array(sorted(partitions), pa.string())
    kinds = pa.array([C.KIND_GROUP, C.KIND_CONSUMER], pa.string())
    for group, (_, table) in enumerate(groups):
        mine = pc.and_(
            pc.is_in(table.column(C.PARTITION_ID), value_set=wanted),
            pc.is_in(table.column(C.ROW_KIND), value_set=kinds),
        )
        positions = pc.indices_nonzero(mine)
        for position, row in zip(positions.to_pylist(), table.take(positions).to_pylist(), strict=True):
            key = tuple(row[name] for name in C.KEY_COLUMNS)
            rows.setdefault(str(row[C.PARTITION_ID]), {})[key] = row
            located[key] = (group, position)
    return rows, located


def _recounts(
    spark: SparkSession, txn: DeltaTransaction, partitions: Sequence[str]
) -> dict[str, dict[str | None, int]]:
    """Each group's stored PEL rows per owner, counted on the driver where their files hold at most
    the placement's ``Work.RECOUNT`` rows (recorded as read: the counts depend on them); {} where they
    hold more (a larger PEL keeps its counts unknown until a recount reaches it)."""
    files = txn.files_in(FileQuery(tuple(partitions), (C.KIND_PENDING,)))
    if sum(row_count(file) for file in files) > placement().rows_max(Work.RECOUNT):
        return {}
    tables = driver_tables(spark, txn.path, files) if files else []
    if tables is None:
        return {}
    counts: dict[str, dict[str | None, int]] = {partition: {} for partition in partitions}
    wanted = pa.array(list(partitions), pa.string())
    for table in tables:
        mine = table.filter(
            pc.and_(
                pc.is_in(table.column(C.PARTITION_ID), value_set=wanted),
                pc.equal(table.column(C.ROW_KIND), C.KIND_PENDING),
            )
        )
        for found in mine.group_by([C.PARTITION_ID, C.OWNER]).aggregate([([], "count_all")]).to_pylist():
            owners = counts[str(found[C.PARTITION_ID])]
            owners[found[C.OWNER]] = owners.get(found[C.OWNER], 0) + int(found["count_all"])
    return counts


def _without_positions(table: pa.Table, positions: set[int]) -> pa.Table:
    return table.filter(pa.array([position not in positions for position in range(table.num_rows)], pa.bool_()))


def _with_bucket(row: Mapping[str, Any]) -> Row:
    return {**row, C.BUCKET: bucket_of(str(row[C.PARTITION_ID]), str(row[C.ROW_KIND]))}

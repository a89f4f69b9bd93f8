"""The rows a removal of named IDs takes from each file, found on the driver.

A removal whose IDs are held on the driver (``Removal.ids``, core/named_ids.py: a bulk XACK of up to
a few million IDs) needs, before its commit, how many rows each file in its range holds of them: a
file holding none stays, one taken whole is dropped unread, the others are rewritten without them
(engine/file_commit.py). Counted by Spark, that was a join of the IDs with the files' rows and an
aggregate by file (1.1-1.5 s for 1M IDs over 1M PEL rows); here the files' four key columns are read
by pyarrow and matched by one vectorized membership test (CHANGELOG.md, "Named IDs on the driver").
The files it takes only some rows of are then rewritten there too, when they are small enough
(``kept_on_driver``): a Spark job rewriting one 100,000-row file took ~3.7 s in a new process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Removal
from streamclaim_spark.core.named_ids import NamedIds
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state.add_files import file_name, row_count
from streamclaim_spark.state.arrow_schema import in_schema
from streamclaim_spark.state.delta_txn import DeltaTransaction
from streamclaim_spark.state.driver_files import read_on_driver, readable_on_driver

_KEY_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.ID_MS, C.ID_SEQ)


@dataclass(frozen=True)
class Taken:
    """What a removal takes from the files it reaches: by file name, the stored IDs of its rows there
    (files it takes nothing from are absent)."""

    found: dict[str, tuple[np.ndarray, np.ndarray]]
    # For a removal of PEL rows, how many of the rows taken each owner held (None: XNACKed, no owner).
    owners: dict[str | None, int] | None = None

    def counts(self) -> dict[str, int]:
        """How many rows the removal takes from each file, by file name."""
        return {name: len(ms) for name, (ms, _) in self.found.items()}

    def rows(self, spark: SparkSession, partition: str, names: Sequence[str]) -> DataFrame:
        """The rows taken from the files ``names`` as a removal's ``rows`` (``partition_id``, ``id_ms``,
        ``id_seq``): what rewriting those files must leave out."""
        ms = np.concatenate([self.found[name][0] for name in names])
        seq = np.concatenate([self.found[name][1] for name in names])
        return ids_frame(spark, partition, ms, seq)


def taken_on_driver(spark: SparkSession, txn: DeltaTransaction, files: Sequence[Any], removal: Removal) -> Taken | None:
    """The rows ``removal`` (with ``ids``, of one partition) takes from each of ``files``, read on the
    driver; None where that cannot be done (a deletion vector, Spark Connect, IDs too spread to pack):
    Spark counts them then."""
    ids: NamedIds | None = removal.ids
    if ids is None or len(removal.partitions) != 1 or not readable_on_driver(spark, files) or ids.width is None:
        return None
    partition, found = removal.partitions[0], {}
    pending = removal.kind == C.KIND_PENDING
    owners: dict[str | None, int] = {}
    columns = (*_KEY_COLUMNS, C.OWNER) if pending else _KEY_COLUMNS
    for file, table in zip(files, read_on_driver(spark, txn.path, files, columns), strict=True):
        if C.ID_MS not in table.column_names:
            continue  # a file of heads only: no ID to match
        of_kind = pc.equal(table.column(C.ROW_KIND), removal.kind)
        rows = table.filter(pc.fill_null(pc.and_(pc.equal(table.column(C.PARTITION_ID), partition), of_kind), False))
        ms = rows.column(C.ID_MS).to_numpy()
        seq = rows.column(C.ID_SEQ).to_numpy()
        hit = ids.contains(ms, seq)
        assert hit is not None  # the box was checked above
        if hit.any():
            found[file_name(str(file.path()))] = (ms[hit], seq[hit])
            if pending:
                _count_owners(owners, rows.column(C.OWNER).filter(pa.array(hit)))
    return Taken(found, owners if pending else None)


def _count_owners(owners: dict[str | None, int], column: pa.ChunkedArray | pa.Array) -> None:
    """Adds each value's count in ``column`` to ``owners``."""
    for counted in pc.value_counts(column).to_pylist():
        owners[counted["values"]] = owners.get(counted["values"], 0) + counted["counts"]


def kept_on_driver(
    spark: SparkSession, txn: DeltaTransaction, files: Sequence[Any], removal: Removal
) -> pa.Table | None:
    """Every row of ``files`` but those ``removal`` (with ``ids``, as ``taken_on_driver`` takes them)
    names, all columns, file by file in stored order: the rows to write in their place. None when the
    files hold more than the driver rewrites (the placement's ``Work.REMOVE``: rows, and bytes as stored)."""
    ids: NamedIds | None = removal.ids
    rows, stored_bytes = sum(row_count(file) for file in files), sum(int(file.size()) for file in files)
    if ids is None or not placement().on_driver(Work.REMOVE, classic=True, rows=rows, stored_bytes=stored_bytes):
        return None
    partition, kept = removal.partitions[0], []
    for table in read_on_driver(spark, txn.path, files):
        rows = in_schema(table)
        mine = pc.and_(pc.equal(rows[C.PARTITION_ID], partition), pc.equal(rows[C.ROW_KIND], removal.kind))
        ms = pc.fill_null(rows[C.ID_MS], 0).to_numpy()
        seq = pc.fill_null(rows[C.ID_SEQ], 0).to_numpy()
        named = ids.contains(ms, seq)
        assert named is not None  # taken_on_driver checked the box
        kept.append(rows.filter(pc.invert(pc.and_(pc.fill_null(mine, False), pa.array(named)))))
    return pa.concat_tables(kept)


def ids_frame(spark: SparkSession, partition: str, ms: np.ndarray, seq: np.ndarray) -> DataFrame:
    """Stored IDs of ``partition`` as a DataFrame of (``partition_id``, ``id_ms``, ``id_seq``)."""
    table = pa.table({C.ID_MS: pa.array(ms, pa.int64()), C.ID_SEQ: pa.array(seq, pa.int64())})
    return spark.createDataFrame(table).select(F.lit(partition).alias(C.PARTITION_ID), C.ID_MS, C.ID_SEQ)

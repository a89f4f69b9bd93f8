"""A bucket's small files compacted on the driver, inside the commit that brings it to the threshold.

Delta runs its auto compaction (an OPTIMIZE after the commit: Spark jobs, ~0.8 s) only after commits
whose files its own writer wrote. The files a command writes on the driver (state/driver_writes.py)
never set it off, so a live store gained a small file per commit in every bucket it wrote: a soak's
server held 2,100 live files after 10 minutes, and each batch was slower for them (a round's p50 287 ->
592 ms). When a commit of files brings a bucket to ``AUTO_COMPACT_MIN_FILES`` small files
(state/small_files.py), those files are read on the driver and written back as one, in the same commit:
no Spark job, and the bucket starts again from one file. The rows are the same rows; a concurrent commit
that removed one of the files makes this one conflict and re-run, as any lost race does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from streamclaim_spark.core import constants as C
from streamclaim_spark.state.delta_txn import DeltaTransaction
from streamclaim_spark.state.head_files import driver_tables

# Rows in key order, so the compacted file's statistics bound each partition's IDs as tightly as the
# files it replaces did.
_KEY_ORDER = [(C.PARTITION_ID, "ascending"), (C.ROW_KIND, "ascending"), (C.ID_MS, "ascending"), (C.ID_SEQ, "ascending")]


def compacted(
    spark: Any, txn: DeltaTransaction, buckets: Iterable[str], below: int, rows_per_file: int, removed: Sequence[Any]
) -> tuple[list[Any], list[Any]] | None:
    """The files written for the small files of ``buckets`` as of the transaction's version (those under
    ``below`` bytes, less the ``removed`` the commit already drops) and the files they replace, as
    ``AddFile``s; None where the files cannot be read on the driver (a deletion vector, Spark Connect)."""
    gone = {str(file.path()) for file in removed}
    small = [file for files in txn.small_files(buckets, below).values() for file in files]
    small = [file for file in small if str(file.path()) not in gone]
    if len(small) < 2:
        return [], []
    tables = driver_tables(spark, txn.path, small)
    if tables is None:
        return None
    rows = pa.concat_tables(tables).sort_by(_KEY_ORDER)
    return txn.write_arrow(rows, rows_per_file), small

"""Whether Delta's auto compaction is worth running after a commit of files, decided without a query.

Left to itself, Delta runs its auto-compaction check after a commit for every bucket the process has
not compacted yet, and again each time a bucket was emptied, as a delivery's PEL bucket is by the
acknowledgement after it: a no-op OPTIMIZE of ~0.8 s (4 Spark jobs) after most commits of a delivery
or streaming loop, measured. Compaction can only find work where a bucket holds at least
``AUTO_COMPACT_MIN_FILES`` small files (Delta's own threshold), so a commit of files asks for it only
when some bucket it adds small files to reaches that many.

The count of a bucket's small files is kept per table and version in this process: a commit knows the
count after it from the count before and the files it adds and removes, so a writer that commits
again on top of its own last version (a delivery loop, a streaming query) never queries for it. After
another writer's commit the count is read from the snapshot's file list (~0.3 s, one Spark job).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from streamclaim_spark.state.add_files import bucket_of
from streamclaim_spark.state.delta_txn import DeltaTransaction

# How many small files a bucket must hold before auto compaction is worth checking: Delta's own
# threshold (``autoCompact.minNumFiles``, 50) for a bucket it has compacted before.
AUTO_COMPACT_MIN_FILES = 50

# (table path, size below which a file is small, bucket) -> (table version, small files it holds then).
_COUNTS: dict[tuple[str, int, str], tuple[int, int]] = {}
_COUNTS_LOCK = threading.Lock()
# More buckets than a store has (16 per kind of row): the map never grows past a few tables' worth.
_MAX_COUNTS = 4096


def small_file_change(added: Iterable[Any], removed: Iterable[Any], below: int) -> Counter[str]:
    """Per bucket, the small files (under ``below`` bytes) a commit adds (``AddFile``s) less those it removes."""
    change = Counter(bucket_of(file) for file in added if file.size() < below)
    change.subtract(Counter(bucket_of(file) for file in removed if file.size() < below))
    return change


def worth_compacting(txn: DeltaTransaction, table_path: str, change: Counter[str], below: int) -> bool:
    """True when some bucket ``change`` (``small_file_change``) adds small files to will hold
    ``AUTO_COMPACT_MIN_FILES`` or more after the commit."""
    growing = sorted(bucket for bucket, count in change.items() if count > 0)
    if not growing:
        return False
    before = _counts_at(txn, table_path, below, growing)
    return any(before[bucket] + change[bucket] >= AUTO_COMPACT_MIN_FILES for bucket in growing)


def record_commit(txn: DeltaTransaction, table_path: str, version: int, change: Counter[str], below: int) -> None:
    """Carries the table's kept counts over to ``version``, the commit just made: when it lies right on
    top of ``txn.read_version`` it holds only this commit's files, so each count changes by ``change``
    (a count not kept stays unknown; any other version drops the table's counts)."""
    follows = version == txn.read_version + 1
    with _COUNTS_LOCK:
        for key in [key for key in _COUNTS if key[0] == table_path]:
            kept_version, count = _COUNTS.pop(key)
            if follows and kept_version == txn.read_version and key[1] == below:
                _COUNTS[key] = (version, count + change[key[2]])


def _counts_at(txn: DeltaTransaction, table_path: str, below: int, buckets: Iterable[str]) -> dict[str, int]:
    with _COUNTS_LOCK:
        kept = {bucket: _COUNTS.get((table_path, below, bucket)) for bucket in buckets}
    counts = {bucket: value[1] for bucket, value in kept.items() if value is not None and value[0] == txn.read_version}
    missing = [bucket for bucket in kept if bucket not in counts]
    if missing:
        counts.update({bucket: len(files) for bucket, files in txn.small_files(missing, below).items()})
        with _COUNTS_LOCK:
            if len(_COUNTS) > _MAX_COUNTS:
                _COUNTS.clear()
            for bucket in missing:
                _COUNTS[(table_path, below, bucket)] = (txn.read_version, counts[bucket])
    return counts

"""Data files of the state table written on the driver by pyarrow, without a Spark job.

A commit of files writes the rows made on the driver (the head and consumer files it rewrites, an
append decided in Arrow) in one Spark write: a job whose task gets the rows from the driver, ~0.3 s
for a command's few rows and 2.0-2.3 s for 125,000 PEL rows (CHANGELOG.md, "Data files written
on the driver"). pyarrow writes the same Parquet files directly; each comes with the statistics Delta
would collect for it (row count, and per statistics column its smallest and largest value and its
nulls), so data skipping, the conflict check and this package's readers see what a Spark write gives.

Files are written where a ``FilePlace`` says: straight into a local table's folder, or into a local
staging folder from which each is published to the table's own file system (S3A, ABFS, GCS, HDFS:
state/hadoop_files.py) as soon as it is written. Where the table is not the kind these files fit (no
explicit statistics columns, a setting that changes how Delta writes a file: ``stats_columns``),
``DeltaTransaction.write`` takes the rows instead.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import STATS_STRING_PREFIX
from streamclaim_spark.state.arrow_schema import DATA_SCHEMA, in_schema, read_columns

# The table's statistics columns: files written here need them named (Delta's default, the first 32
# columns of any type, has rules of its own for nested and binary ones).
_STATS_COLUMNS = "delta.dataSkippingStatsColumns"
# Table settings under which Delta writes or describes a file otherwise (where it lies, what its
# action carries): such tables are written through Spark.
_WRITTEN_BY_DELTA = ("delta.enableDeletionVectors", "delta.randomizeFilePrefixes", "delta.enableRowTracking")
_COLUMN_MAPPING = "delta.columnMapping.mode"


def stats_columns(configuration: Mapping[str, str]) -> list[str] | None:
    """The columns Delta collects statistics on for a table of ``configuration``, or None when files
    written here would differ from Delta's (its statistics columns implicit, deletion vectors, random
    file prefixes, row tracking, column mapping)."""
    if any(configuration.get(name, "false").lower() == "true" for name in _WRITTEN_BY_DELTA):
        return None
    if configuration.get(_COLUMN_MAPPING, "none").lower() != "none":
        return None
    named = configuration.get(_STATS_COLUMNS)
    return [name.strip() for name in named.split(",")] if named else None


@dataclass(frozen=True)
class FilePlace:
    """Where the driver writes a table's new files, and how it reads the files it rewrites.

    Attributes:
        folder: A local folder the files are written under, by their path relative to the table: the
            table's own folder, or a staging folder when ``publish`` is set.
        publish: None for a local table; else moves a written file (its local path, its path relative
            to the table) to the table's file system, deleting the local copy.
        fetch: None for a local table; else copies a data file of the table (its location) to a local
            file (the second argument) to be read.
    """

    folder: str
    publish: Callable[[str, str], None] | None = None
    fetch: Callable[[str, str], None] | None = None


def write_files(place: FilePlace, rows: pa.Table, rows_per_file: int, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Writes ``rows`` (the state table's Arrow schema) as Parquet files at ``place``, one or more
    per bucket, at most ``rows_per_file`` rows each (0: no cap), each bucket's rows in the order given;
    returns each file's ``add`` action as Delta's log writes it, with the statistics of ``columns``."""
    if pc.count_distinct(rows.column(C.BUCKET)).as_py() > 1:
        rows = rows.sort_by(C.BUCKET)  # a stable sort: each bucket's rows keep their order
    bucket_position = rows.schema.get_field_index(C.BUCKET)
    data = rows.remove_column(bucket_position)
    actions: list[dict[str, Any]] = []
    start = 0
    for counted in pc.value_counts(rows.column(bucket_position)).to_pylist():  # in order of appearance
        bucket, count = counted["values"], counted["counts"]
        step = rows_per_file or count
        for offset in range(0, count, step):
            actions.append(_write_file(place, bucket, data.slice(start + offset, min(step, count - offset)), columns))
        start += count
    return actions


def rewrite_files(
    place: FilePlace,
    files: Sequence[tuple[str, str]],
    transform: Callable[[pa.Table], pa.Table],
    columns: Sequence[str],
) -> list[dict[str, Any]]:
    """Rewrites each of ``files`` (its location and bucket) as one new file at ``place`` holding
    ``transform`` of its rows (in ``DATA_SCHEMA``: a column the file predates as nulls), in the order
    given; returns each new file's ``add`` action with the statistics of ``columns``, as ``write_files``.

    One file at a time per thread, so memory holds a few files whatever their number; pyarrow reads,
    encodes and compresses outside Python's lock, so the threads use the machine's cores. A file in
    gives a file out: the rows keep their files, their order and the files' cap.
    """

    def rewrite(file: tuple[str, str]) -> dict[str, Any]:
        location, bucket = file
        if place.fetch is None:
            rows = read_columns(location, DATA_SCHEMA.names)
        else:
            local = os.path.join(place.folder, f"read-{uuid.uuid4()}.parquet")
            place.fetch(location, local)
            try:
                rows = read_columns(local, DATA_SCHEMA.names)
            finally:
                os.remove(local)
        return _write_file(place, bucket, transform(in_schema(rows, DATA_SCHEMA)), columns)

    with ThreadPoolExecutor(max_workers=max(1, min(DRIVER_THREADS, len(files)))) as pool:
        return list(pool.map(rewrite, files))


# Threads reading or rewriting files on the driver: pyarrow's Parquet reads and writes release Python's lock
# (10M PEL rows in 100 files: 7.7 s in one thread, 4.5 s in two, 4.2 s in three on 2 cores).
DRIVER_THREADS = min(4, os.cpu_count() or 1)


def _write_file(place: FilePlace, bucket: str, rows: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    relative = f"{C.BUCKET}={quote(bucket, safe='')}/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    local = os.path.join(place.folder, relative)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    pq.write_table(rows, local, compression="snappy")
    status = os.stat(local)
    if place.publish is not None:
        place.publish(local, relative)
    return {
        "path": relative,
        "partitionValues": {C.BUCKET: bucket},
        "size": status.st_size,
        "modificationTime": status.st_mtime_ns // 1_000_000,
        "dataChange": True,
        "stats": json.dumps(delta_statistics(rows, columns), separators=(",", ":")),
    }


def delta_statistics(rows: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    """Delta's statistics of one file's ``rows``: ``numRecords``, and per column of ``columns`` its
    smallest and largest value (absent when every value is null) and its nulls. A string's smallest
    value is cut to Delta's prefix, which still bounds it from below; a largest value longer than the
    prefix is left out (no bound: readers then keep the file), where Delta writes a cut one."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in columns:
        column = rows.column(name)
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        bounds = pc.min_max(column)
        smallest, largest = bounds["min"].as_py(), bounds["max"].as_py()
        if isinstance(smallest, str):
            smallest = smallest[:STATS_STRING_PREFIX]
        low[name] = smallest
        if not (isinstance(largest, str) and len(largest) > STATS_STRING_PREFIX):
            high[name] = largest
    return {"numRecords": rows.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls}

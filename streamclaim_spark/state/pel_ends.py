"""A group's smallest and largest pending ID, from the one or two kept PEL files that can hold them.

With its counts kept (core/count_rules.py), XPENDING's summary needs of the PEL only its two ends. The
files that may hold a group's pending rows carry Delta's statistics: per file the smallest and largest
of each ID part, which bound every ID in it. So the files are opened in order of their lower bound
until the next one's bound lies above the smallest ID found (the same from the top): usually one file
each, read on the driver by pyarrow, whatever the PEL's size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId, from_stored
from streamclaim_spark.state.kept_rows import columns_of
from streamclaim_spark.state.logged_files import LoggedFile
from streamclaim_spark.state.logged_table import kept_files_at
from streamclaim_spark.state.prefetch_rows import rows_of

# Most files opened for one end; past it (files of many groups interleaved) the caller reads the PEL.
FILES_PER_END_MAX = 8

_COLUMNS = (C.PARTITION_ID, C.ROW_KIND, C.STREAM, C.ID_MS, C.ID_SEQ)

StoredId = tuple[int, int]


def pel_ends_at(
    spark: SparkSession, table_path: str, version: int | None, key: str, partition_id: str
) -> tuple[StreamId, StreamId] | None:
    """The smallest and largest ID among the group's pending rows at ``version`` (the group of stream
    ``key`` whose partition is ``partition_id``); None where the kept files or their statistics cannot
    say, a deletion vector lies on one, more than ``FILES_PER_END_MAX`` files must be opened for an
    end, or no pending row is found."""
    files = kept_files_at(spark, table_path, version, [FileQuery((partition_id,), (C.KIND_PENDING,))])
    if files is None:
        return None
    bounds: dict[str, tuple[StoredId, StoredId]] = {}
    for file in files:
        if file.bounds is not None and file.bounds.nulls.get(C.ID_MS) == file.bounds.rows:
            continue  # no row of it has an ID
        found = None if file.bounds is None else file.bounds.id_range()
        if found is None:
            return None
        bounds[file.path] = found
    holding = [file for file in files if file.path in bounds]

    def read(file: LoggedFile) -> list[StoredId] | None:
        table = columns_of(spark, table_path, [file], _COLUMNS)
        if table is None:
            return None
        rows = rows_of(table, key, partition_id, C.KIND_PENDING)
        return list(zip(rows.column(C.ID_MS).to_pylist(), rows.column(C.ID_SEQ).to_pylist(), strict=True))

    lowest = _end(holding, read, lambda file: bounds[file.path][0], min)
    highest = _end(holding, read, lambda file: bounds[file.path][1], max)
    if lowest is None or highest is None:
        return None
    return _stream_id(lowest), _stream_id(highest)


def _end(
    files: Sequence[LoggedFile],
    read: Callable[[LoggedFile], list[StoredId] | None],
    bound: Callable[[LoggedFile], StoredId],
    pick: Callable[..., StoredId],
) -> StoredId | None:
    """The smallest (``pick`` min) or largest (max) ID of the files' rows, opening files in order of
    ``bound`` until no further file can hold a better one."""
    best: StoredId | None = None
    ordered = sorted(files, key=bound, reverse=pick is max)
    for opened, file in enumerate(ordered):
        if best is not None and pick(best, bound(file)) == best:
            break  # every later file's IDs lie beyond the best found
        if opened >= FILES_PER_END_MAX:
            return None
        ids = read(file)
        if ids is None:
            return None
        if ids:
            found = pick(ids)
            best = found if best is None else pick(best, found)
    return best


def _stream_id(stored: StoredId) -> StreamId:
    return StreamId(from_stored(stored[0]), from_stored(stored[1]))

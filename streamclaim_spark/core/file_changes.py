"""Bulk changes a plan commits only as a transaction of files (engine/file_commit.py), on a classic
session: rows removed by key, and rows changed where they lie. Plain values: the Columns and DataFrames
they carry are the caller's, typed ``Any`` so that nothing here touches Spark."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.named_ids import NamedIds


@dataclass
class Removal:
    """Rows of one kind removed by key in a plan's commit (a bulk XACK, a streaming batch's XACK), by
    rewriting only the files that hold them (engine/file_commit.py).

    ``rows`` is a DataFrame of (``partition_id``, ``id_ms``, ``id_seq``) naming them, all in
    ``partitions``, or None for every row of the kind there (unless ``ids`` names them);
    ``low``/``high`` bound their IDs (Delta skips files outside them). ``ids`` instead holds the IDs
    on the driver (core/named_ids.NamedIds, one partition): the files' rows are then matched with
    them there (engine/named_removal.py), and ``rows`` is built only for the files to rewrite. A
    commit of files sets ``removed`` to the number of rows that went, from the files' own row counts:
    no query counts them first (and, for PEL rows matched on the driver, ``removed_owners``).

    ``named``, when known, is how many rows ``rows`` holds (duplicates and IDs that are not pending
    included): up to ``file_removals.BROADCAST_NAMED_MAX`` of one partition are sent to the rewrite's tasks whole
    instead of shuffled with the files' rows. ``seq_range``, when known, is their smallest and largest
    sequence number: with ``low`` and ``high`` it bounds a box of IDs that, when small enough, packs
    each ID into one integer key, which Spark hashes faster than two columns.

    ``empties`` may name files the removal takes every row of, so that they are dropped unread: a
    test on the statistics of a file added by the commit of version ``written_at`` and still in the
    table (a file's rows never change under its name; a deletion vector since sends it to the rewrite).
    """

    kind: str
    partitions: tuple[str, ...]
    rows: Any
    low: StreamId | None = None
    high: StreamId | None = None
    removed: int | None = None
    named: int | None = None
    seq_range: tuple[int, int] | None = None
    empties: Callable[[FileBounds], bool] | None = None
    written_at: int | None = None
    ids: NamedIds | None = None
    # Set by a commit of files that found the removed PEL rows on the driver: how many each owner held
    # (None: no owner), so that the groups' kept counts stay exact; None leaves them behind.
    removed_owners: dict[str | None, int] | None = None

    @property
    def every_row(self) -> bool:
        """True when the removal takes every row of its kind in its partitions (no IDs named)."""
        return self.rows is None and self.ids is None


@dataclass
class Rewrite:
    """Rows of one kind changed where they lie (a fleet recovery's claims to its recovery consumer), by
    rewriting the files of ``partitions`` that hold that kind (engine/file_commit.py): each column in
    ``assignments`` (name to a Column over the row as stored) takes its new value on the rows that meet
    ``condition`` (a Column naming the partitions itself: the files also hold other partitions' rows).

    ``on_driver``, when given, is the same change over one file's rows as an Arrow table (every column
    but the bucket, in the file's order), returning them all, changed where ``condition`` holds: the
    files are then rewritten on the driver by pyarrow where the table allows it, each into one file
    (``DeltaTransaction.rewrite_arrow``), where a Spark job wrote them 8x slower (CHANGELOG.md,
    "A claim's rewrite on the driver"). The two must agree row for row; tests compare them."""

    kind: str
    partitions: tuple[str, ...]
    condition: Any
    assignments: Mapping[str, Any]
    on_driver: Callable[[Any], Any] | None = None

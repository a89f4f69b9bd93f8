"""What a snapshot has read of its pinned table, and the one query a prefetch reads it with.

A command says up front what it will read (``prefetch``): heads, consumers, entries and PEL rows by ID,
and at most one ordered range, all in **one** query, because every Delta query costs two Spark jobs
(file skipping over the log state, then the scan) whatever it reads. ``PrefetchedSnapshot`` plans that
query (``prefetch_query``) and files its rows under what they answer; ``snapshot.Snapshot``'s accessors
answer from them and query only for what was not prefetched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_query import FileQuery
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import ConsumerMeta, Entry, GroupMeta, Need, PendingEntry, Scan, StreamMeta
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.placement import Work, placement
from streamclaim_spark.state.columns import (
    StateRow,
    consumer_from_row,
    entry_from_row,
    pending_from_row,
    stored_id,
    value_or_none,
)
from streamclaim_spark.state.file_stats import bounded_needs
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.kept_rows import kept_rows_at
from streamclaim_spark.state.logged_table import logged_table
from streamclaim_spark.state.prefetch_conditions import any_of, consumer_rows, rows_by_id, rows_in_range
from streamclaim_spark.state.prefetch_rows import (
    PREFETCH_LOOKUPS_MAX,
    ROW_COLUMNS,
    Lookup,
    prefetch_rows,
)
from streamclaim_spark.state.schema import (
    APART_KINDS,
    NAMED_PARTITIONS_MAX,
    ROW_KEY_SCHEMA,
    in_partitions,
    kind_in,
    pruned_to,
    rows_with_keys,
)

# A range read: (row kind, stream, group or None for entries, the range).
ScanKey = tuple[str, str, str | None, Scan]


@dataclass
class _Query:
    """What one prefetch query gathers from its needs, before it is built."""

    # The disjuncts (one per lookup, range or kind of head), built only when Spark runs the query: a
    # prefetch the driver answers from the kept files would have paid ~20 py4j round trips an ID list.
    wanted: list[Callable[[], Column]] = field(default_factory=list)
    files: list[FileQuery] = field(default_factory=list)  # which files each disjunct may read
    partitions: set[str] = field(default_factory=set)
    # Heads (and consumers, by name) of every need share one IN list each: a fleet's thousands of
    # streams make one disjunct, not thousands.
    stream_heads: set[str] = field(default_factory=set)
    group_heads: set[str] = field(default_factory=set)
    consumers: dict[str, set[str]] = field(default_factory=dict)
    point_rows: int = 0
    scan: tuple[ScanKey, Callable[[], Column]] | None = None
    lookups: list[Lookup] = field(default_factory=list)  # the disjuncts by ID and the range, as the driver tests them

    def ask(self, condition: Callable[[], Column], files: FileQuery, lookup: Lookup | None = None) -> None:
        """Adds a disjunct: what builds its rows' condition, the files that may hold them, and (by ID or
        range) its lookup."""
        self.wanted.append(condition)
        self.files.append(files)
        if lookup is not None:
            self.lookups.append(lookup)

    def conditions(self) -> Column:
        """The disjunction of every disjunct, built."""
        return any_of([condition() for condition in self.wanted])

    def scan_key(self) -> ScanKey | None:
        return self.scan[0] if self.scan is not None else None

    def only_lookups(self) -> bool:
        """True when every disjunct is a lookup by ID or a range (no head or consumer is asked), and few."""
        few = 0 < len(self.lookups) <= PREFETCH_LOOKUPS_MAX
        return few and not (self.stream_heads or self.group_heads or self.consumers)


class PrefetchedSnapshot:
    """The table at one Delta version, and every head, consumer, entry, PEL row and range read of it."""

    def __init__(self, spark: SparkSession, table_path: str, version: int | None = None) -> None:
        self.spark = spark
        self.table_path = table_path
        self.version = version
        self._table: DataFrame | None = None
        self._streams: dict[str, StreamMeta | None] = {}
        self._groups: dict[tuple[str, str], GroupMeta | None] = {}
        self._consumers: dict[tuple[str, str, str], ConsumerMeta | None] = {}
        self._entries: dict[str, dict[StreamId, Entry | None]] = {}
        self._pending: dict[tuple[str, str], dict[StreamId, PendingEntry | None]] = {}
        self._scans: dict[ScanKey, list[StateRow]] = {}
        self._all_heads_read = False  # every stream and group head is in _streams and _groups

    def frame(self) -> DataFrame:
        """The whole table at this version through Delta's read, whose data skipping serves any filter
        a caller adds; the snapshot's own reads, whose files are known up front, use ``frame_of``.
        Loaded at its first use: a command answered by its prefetch needs none."""
        if self._table is None:
            reader = self.spark.read.format("delta")
            if self.version is not None:
                reader = reader.option("versionAsOf", self.version)
            self._table = reader.load(self.table_path)
        return self._table

    def frame_of(self, queries: Sequence[FileQuery]) -> DataFrame:
        """The table's rows at this version over only the files that may hold rows one of ``queries``
        names (by bucket and statistics, as Delta's data skipping leaves out the rest); the whole
        ``frame()`` where the files cannot be listed on the driver or ``frame()`` is not the stored
        table (a batch's writes lie over it). Callers still filter the rows."""
        if not self.reads_stored_rows():
            return self.frame()
        return self.stored_frame_of(queries)

    def stored_frame_of(self, queries: Sequence[FileQuery]) -> DataFrame:
        """``frame_of`` for the table as stored at this version, whatever lies over ``frame()``: the
        kept files ``queries`` may hold, or Delta's read of the version."""
        table = logged_table(self.spark, self.table_path, self.version, queries)
        return table if table is not None else PrefetchedSnapshot.frame(self)

    def stored_rows(
        self, queries: Sequence[FileQuery], columns: Sequence[str], max_rows: int | None
    ) -> pa.Table | None:
        """``columns`` of every row of the kept files ``queries`` may hold, read on the driver without a
        Spark job (state/kept_rows.py), when those files hold at most ``max_rows`` rows (None: any
        number); None where Spark must read them (an overlay on ``frame()``, Spark Connect, time travel,
        a deletion vector, more rows). Callers still filter the rows."""
        if not self.reads_stored_rows():
            return None
        return kept_rows_at(self.spark, self.table_path, self.version, queries, columns, max_rows)

    def reads_stored_rows(self) -> bool:
        """True when ``frame()`` is the table as stored at the snapshot's version (no overlay)."""
        return True

    # --- one query for all of a command's reads ---------------------------------------------------

    def prefetch(self, *needs: Need) -> None:
        """Reads everything ``needs`` ask for that is not known yet, in one query.

        Point lookups and the (at most one) range are ORed under a top-level filter on their partitions
        and streams; each disjunct names its row kind and ID range, so Delta still skips every file
        whose statistics rule it out. The range's rows sort after the point lookups' rows, so one
        ``LIMIT`` (point rows + range limit) serves both. When only IDs and a range are asked and the
        files that may hold them are kept and small, they are read on the driver instead (prefetch_rows.py).
        """
        gathered = self._gathered(needs)
        if gathered.only_lookups():
            stored = self.stored_rows(gathered.files, ROW_COLUMNS, placement().rows_max(Work.PREFETCH))
            if stored is not None:  # the few files the query would read, read on the driver: no Spark job
                self._remember(needs, prefetch_rows(stored, gathered.lookups), gathered.scan_key())
                return
        query = self._query_of(gathered, needs)
        if query is None:
            return
        frame, scan_key = query
        bounded = bounded_needs(self.spark, self.table_path, needs, scan_key)
        narrowed = self.prefetch_query(*bounded) if bounded is not None else None
        if narrowed is not None and scan_key is not None:
            # The range read up to where the log's statistics say its first rows end (file_stats); if
            # that bound held fewer rows than the limit, the unbounded query below answers instead.
            self._remember(needs, narrowed[0].collect(), scan_key)
            if len(self._scans[scan_key]) >= (scan_key[3].limit or 0):
                return
        self._remember(needs, frame.collect(), scan_key)

    def prefetch_query(self, *needs: Need) -> tuple[DataFrame, ScanKey | None] | None:
        """The one query ``prefetch`` runs for ``needs`` (None: all known), and which range it reads."""
        return self._query_of(self._gathered(needs), needs)

    def _query_of(self, query: _Query, needs: Sequence[Need]) -> tuple[DataFrame, ScanKey | None] | None:
        """``prefetch_query`` for what ``needs`` ask that is not known yet (``_gathered``)."""
        keyed = len(query.stream_heads) + len(query.group_heads) + sum(len(p) for p in query.consumers.values())
        if query.scan is None and keyed > NAMED_PARTITIONS_MAX:
            # A fleet's heads and consumers: one semi-join with their keys instead of IN lists of thousands;
            # ID lookups beside them name their partitions in their own disjuncts, so buckets prune enough.
            frame = self._keyed_rows(query.stream_heads, query.group_heads, query.consumers)
            if query.wanted:
                by_id = self.frame_of(query.files).where(pruned_to(query.partitions) & query.conditions())
                frame = frame.unionByName(by_id)
            return frame, None
        _ask_heads_by_name(query)
        if not query.wanted:
            return None
        return self._named_query(query, needs), query.scan_key()

    def _gathered(self, needs: Sequence[Need]) -> _Query:
        """What ``needs`` ask for that the snapshot does not know yet."""
        query = _Query()
        for need in needs:
            key = need.key
            stream_part = stream_partition(key)
            group_parts = {g: group_partition(key, g) for g in need.groups}
            self._ask_heads(query, need, stream_part, group_parts)
            entry_ids = self._ask_by_id(query, need, stream_part, group_parts)
            self._ask_range(query, need, stream_part, group_parts, entry_ids)
            query.partitions.update(group_parts.values())
        return query

    def _ask_heads(self, query: _Query, need: Need, stream_part: str, group_parts: dict[str, str]) -> None:
        """The heads and the consumer ``need`` names that the snapshot does not know yet."""
        key = need.key
        if key not in self._streams:
            query.stream_heads.add(stream_part)
        query.group_heads.update(group_parts[g] for g in need.groups if (key, g) not in self._groups)
        if need.consumer is not None:
            missing = [group_parts[g] for g in need.groups if (key, g, need.consumer) not in self._consumers]
            if missing:  # a consumer known already asks nothing (an empty entry made the query Spark's)
                query.consumers.setdefault(need.consumer, set()).update(missing)

    def _ask_by_id(self, query: _Query, need: Need, stream_part: str, group_parts: dict[str, str]) -> list[StreamId]:
        """The entries and PEL rows ``need`` looks up by ID and the snapshot does not know yet; returns the
        entries' IDs."""
        key = need.key
        entry_ids = sorted(set(need.entry_ids) - set(self._entries.get(key, {})))
        if entry_ids:
            entries = FileQuery((stream_part,), (C.KIND_ENTRY,), entry_ids[0], entry_ids[-1])
            lookup = Lookup(key, stream_part, C.KIND_ENTRY, tuple(entry_ids))
            query.ask(partial(rows_by_id, stream_part, C.KIND_ENTRY, entry_ids), entries, lookup)
            query.partitions.add(stream_part)
            query.point_rows += len(entry_ids)
        if need.pending_ids:
            for group in need.groups:
                pending_ids = sorted(set(need.pending_ids) - set(self._pending.get((key, group), {})))
                if pending_ids:
                    rows = FileQuery((group_parts[group],), (C.KIND_PENDING,), pending_ids[0], pending_ids[-1])
                    lookup = Lookup(key, group_parts[group], C.KIND_PENDING, tuple(pending_ids))
                    query.ask(partial(rows_by_id, group_parts[group], C.KIND_PENDING, pending_ids), rows, lookup)
                    query.point_rows += len(pending_ids)
        return entry_ids

    def _ask_range(
        self, query: _Query, need: Need, stream_part: str, group_parts: dict[str, str], entry_ids: list[StreamId]
    ) -> None:
        """The ordered range ``need`` reads, unless it is known or empty (then it is known to be empty)."""
        key = need.key
        scans: list[tuple[str, Scan | None, str, str | None]] = [(C.KIND_ENTRY, need.entry_scan, stream_part, None)]
        if need.pending_scan is not None:
            scans.append((C.KIND_PENDING, need.pending_scan, group_parts[need.groups[0]], need.groups[0]))
        for kind, range_scan, part, scan_group in scans:
            if range_scan is None:
                continue
            scan_key: ScanKey = (kind, key, scan_group, range_scan)
            if scan_key in self._scans or range_scan.limit == 0 or range_scan.low > range_scan.high:
                self._scans.setdefault(scan_key, [])
                continue
            assert query.scan is None, "prefetch reads at most one range"
            assert not (kind == C.KIND_ENTRY and entry_ids) and not (kind == C.KIND_PENDING and need.pending_ids), (
                "a range and lookups by ID of the same rows cannot share a query"
            )
            # Cached: the range's condition is a disjunct and the query's sort key both.
            query.scan = (scan_key, cache(partial(rows_in_range, part, kind, range_scan)))
            in_range = FileQuery((part,), (kind,), range_scan.low, range_scan.high)
            query.ask(query.scan[1], in_range, Lookup(key, part, kind, scan=range_scan))
            query.partitions.add(part)

    def _named_query(self, query: _Query, needs: Sequence[Need]) -> DataFrame:
        """The query's disjuncts under a filter naming its partitions (and streams, when few), its range's
        rows sorted after the point lookups' under one ``LIMIT``."""
        keys = sorted({need.key for need in needs})
        where = in_partitions(query.partitions) & query.conditions()
        if len(keys) <= NAMED_PARTITIONS_MAX:  # lets Delta skip files by stream; isin is a py4j call per name
            where = where & F.col(C.STREAM).isin(keys)
        frame = self.frame_of(query.files).where(where)
        if query.scan is not None:
            (_, _, _, range_scan), in_range_of = query.scan
            in_range = in_range_of()
            ids = [F.col(C.ID_MS), F.col(C.ID_SEQ)]
            order = [F.when(in_range, 1).otherwise(0)] + ([c.desc() for c in ids] if range_scan.reverse else ids)
            frame = frame.orderBy(*order)
            if range_scan.limit is not None:
                frame = frame.limit(query.point_rows + range_scan.limit)
        return frame

    def _keyed_rows(self, stream_heads: set[str], group_heads: set[str], consumers: dict[str, set[str]]) -> DataFrame:
        """The head rows of ``stream_heads`` and ``group_heads`` and the named consumers' rows.

        They are selected by a broadcast semi-join with their keys (partition, kind, consumer): one py4j
        call for any number of them.
        """
        records: list[dict[str, str | None]] = [
            {C.PARTITION_ID: part, C.ROW_KIND: kind, C.CONSUMER: None}
            for kind, heads in ((C.KIND_STREAM, stream_heads), (C.KIND_GROUP, group_heads))
            for part in sorted(heads)
        ]
        records += [
            {C.PARTITION_ID: part, C.ROW_KIND: C.KIND_CONSUMER, C.CONSUMER: name}
            for name, parts in sorted(consumers.items())
            for part in sorted(parts)
        ]
        keys = json_frame(self.spark, records, ROW_KEY_SCHEMA)
        kinds = F.col(C.ROW_KIND).isin(*APART_KINDS)
        in_buckets = pruned_to((str(r[C.PARTITION_ID]) for r in records), kinds=APART_KINDS)
        return rows_with_keys(self.frame().where(in_buckets & kinds), keys)

    def _remember(self, needs: Sequence[Need], rows: Sequence[StateRow], scan_key: ScanKey | None) -> None:
        """Files the rows of a prefetch under what they answer; what was asked for and absent is None."""
        scanned: list[StateRow] = []
        for row in rows:
            kind = row[C.ROW_KIND]
            in_scan = scan_key is not None and kind == scan_key[0] and row[C.STREAM] == scan_key[1]
            if in_scan and (kind == C.KIND_ENTRY or row[C.GROUP] == scan_key[2]):  # type: ignore[index]
                scanned.append(row)
                continue
            if kind in C.HEAD_KINDS:
                self._remember_head(row)
            elif kind == C.KIND_CONSUMER:
                self._consumers[(row[C.STREAM], row[C.GROUP], row[C.CONSUMER])] = consumer_from_row(row)
            elif kind == C.KIND_ENTRY:
                entry = entry_from_row(row)
                self._entries.setdefault(row[C.STREAM], {})[entry.id] = entry
            else:
                pending = pending_from_row(row)
                self._pending.setdefault((row[C.STREAM], row[C.GROUP]), {})[pending.id] = pending
        if scan_key is not None:
            self._scans[scan_key] = scanned
        for need in needs:
            key = need.key
            self._streams.setdefault(key, None)
            entries = self._entries.setdefault(key, {})
            for entry_id in need.entry_ids:
                entries.setdefault(entry_id, None)
            for group in need.groups:
                self._groups.setdefault((key, group), None)
                if need.consumer is not None:
                    self._consumers.setdefault((key, group, need.consumer), None)
                known = self._pending.setdefault((key, group), {})
                for entry_id in need.pending_ids:
                    known.setdefault(entry_id, None)

    def _remember_head(self, row: StateRow) -> None:
        key = row[C.STREAM]
        if row[C.ROW_KIND] == C.KIND_STREAM:
            self._streams[key] = StreamMeta(
                key=key,
                last_id=stored_id(row, C.LAST_MS, C.LAST_SEQ),
                entries_added=row[C.ENTRIES_ADDED],
                length=row[C.ENTRY_COUNT],
                first_id=stored_id(row, C.FIRST_MS, C.FIRST_SEQ),
                max_deleted_id=stored_id(row, C.MAX_DELETED_MS, C.MAX_DELETED_SEQ),
                groups=tuple(row[C.GROUP_NAMES] or ()),
                version=row[C.VERSION],
                some_deleted=row[C.SOME_DELETED] is not False,  # null: written before the marker, unknown
            )
        else:
            self._groups[(key, row[C.GROUP])] = GroupMeta(
                key=key,
                name=row[C.GROUP],
                last_id=stored_id(row, C.LAST_MS, C.LAST_SEQ),
                entries_read=row[C.ENTRIES_READ],
                version=row[C.VERSION],
                pending_count=value_or_none(row, C.PENDING_COUNT),
                counted_version=value_or_none(row, C.COUNTED_VERSION),
            )


def _ask_heads_by_name(query: _Query) -> None:
    """The query's heads and consumers as IN lists of their partitions, one disjunct per kind (and name)."""
    for kind, heads in ((C.KIND_STREAM, query.stream_heads), (C.KIND_GROUP, query.group_heads)):
        if heads:
            query.ask(partial(kind_in, sorted(heads), kind), FileQuery(tuple(sorted(heads)), (kind,)))
            query.partitions.update(heads)
            query.point_rows += len(heads)
    for name, parts in query.consumers.items():
        if parts:
            consumers = FileQuery(tuple(sorted(parts)), (C.KIND_CONSUMER,))
            query.ask(partial(consumer_rows, sorted(parts), name), consumers)
            query.point_rows += len(parts)

"""Bring a live Redis's streams, groups, consumers and PELs into a store, and keep it level on re-runs.

``import_redis(store, client, patterns)`` reads every matching stream with redis-py (never writing to
Redis), stages the pages in local Parquet files and commits them in one Delta transaction: a reader of
the store sees each stream either as it was or as Redis had it. ``streamclaim-import`` (importer.cli)
is the console script; docs/IMPORT.md says what is copied and how.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from streamclaim_spark.core.patterns import matches
from streamclaim_spark.errors import ImportRefusedError, StoreChangedError
from streamclaim_spark.importer.commit import commit_import
from streamclaim_spark.importer.redis_reader import StreamCopy, raw_replies, read_stream, stream_keys
from streamclaim_spark.importer.staging import Staging

if TYPE_CHECKING:
    from streamclaim_spark.store import StreamStore

__all__ = ["ImportRefusedError", "ImportSummary", "StoreChangedError", "StreamCopy", "import_redis"]

DEFAULT_PAGE = 10_000


@dataclass(frozen=True)
class ImportSummary:
    """What one import did; ``to_json`` is the console script's summary line."""

    store: str
    streams: int
    streams_removed: list[str]
    groups: int
    consumers: int
    entries_copied: int
    live_ids_compared: int
    pel_rows: int
    changed_while_read: list[str]
    commit_version: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    seconds: float
    modes: dict[str, int] = field(default_factory=dict)

    @property
    def entries_per_second(self) -> float:
        return self.entries_copied / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok", **asdict(self), "entries_per_second": round(self.entries_per_second, 1)}


def import_redis(
    store: StreamStore,
    client: Any,
    patterns: Sequence[str] = ("*",),
    *,
    page: int = DEFAULT_PAGE,
    staging_folder: str | None = None,
    progress: Callable[[StreamCopy], None] | None = None,
) -> ImportSummary:
    """Copies the streams matching ``patterns`` from the Redis behind ``client`` (a redis-py client on
    RESP2) into ``store`` in one commit; streams the store has under those patterns that Redis no longer
    has are deleted. Raises ImportRefusedError (nothing written) on bad input, StoreChangedError when
    another writer changed an imported stream in the store meanwhile.

    Args:
        store: The store to make level with Redis.
        client: ``redis.Redis(..., protocol=2)``; the replies of the commands read are left raw.
        patterns: Stream names or SCAN MATCH patterns (default every stream).
        page: Entries or PEL rows per Redis reply and per staged row group (default 10,000).
        staging_folder: Where the pages are staged (default the system's temporary folder).
        progress: Called with each stream's copy as soon as it is read.

    Example (against a live Redis; tests/parity/test_import.py runs it against redis-server)::

        >>> import redis
        >>> from streamclaim_spark.importer import import_redis
        >>> summary = import_redis(store, redis.Redis(port=6379, protocol=2), ["orders*"])  # doctest: +SKIP
        >>> summary.streams  # doctest: +SKIP
        1
    """
    if page < 1:
        raise ImportRefusedError(f"page={page}: give a positive number of entries per Redis reply, e.g. 10000")
    started = time.monotonic()
    raw_replies(client)
    keys = stream_keys(client, patterns)
    known = {meta.key: meta for meta in store.runner.snapshot().all_streams() if matches(meta.key, patterns)}
    staging = Staging(staging_folder, rows_per_group=page)
    try:
        copies: list[StreamCopy] = []
        for key in keys:
            copy = read_stream(client, key, known.get(key), staging, page)
            if copy is None:
                continue
            copies.append(copy)
            if progress is not None:
                progress(copy)
        removed = sorted(set(known) - {copy.meta.key for copy in copies})
        versions = {key: meta.version for key, meta in known.items()}
        version, rows = commit_import(store.runner, copies, removed, versions, staging)
    finally:
        staging.close()
    modes: dict[str, int] = {}
    for copy in copies:
        modes[copy.mode] = modes.get(copy.mode, 0) + 1
    return ImportSummary(
        store=store.path,
        streams=len(copies),
        streams_removed=removed,
        groups=sum(len(copy.groups) for copy in copies),
        consumers=sum(len(group.consumers) for copy in copies for group in copy.groups),
        entries_copied=sum(copy.entries for copy in copies),
        live_ids_compared=sum(copy.live_ids for copy in copies),
        pel_rows=sum(copy.pel_rows for copy in copies),
        changed_while_read=[copy.meta.key for copy in copies if copy.changed],
        commit_version=version,
        rows_inserted=rows.inserted,
        rows_updated=rows.updated,
        rows_deleted=rows.deleted,
        seconds=round(time.monotonic() - started, 3),
        modes=modes,
    )

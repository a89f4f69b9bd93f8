"""The store's state as plain values, and the row writes a command asks for.

Commands read these values from a snapshot, decide as Redis would, and return ``Write``s; the
transaction module commits all of a command's writes in one guarded Delta MERGE. Nothing here
touches Spark, so the command logic is testable without a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import ZERO_ID, StreamId
from streamclaim_spark.core.partitions import group_partition, stream_partition

# Field names and values are bytes, exactly as the client sent them (Redis streams are binary-safe).
FieldPairs = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Entry:
    """A stream entry: its ID and its field/value pairs in XADD order (duplicates kept)."""

    id: StreamId
    fields: FieldPairs

    def flat(self) -> list[bytes]:
        """Fields and values interleaved, as Redis replies with them."""
        return [item for pair in self.fields for item in pair]


@dataclass(frozen=True)
class StreamMeta:
    """A stream's head row: what XINFO STREAM reports besides entries, plus its groups' names."""

    key: str
    last_id: StreamId = ZERO_ID
    entries_added: int = 0
    length: int = 0
    first_id: StreamId = ZERO_ID
    max_deleted_id: StreamId = ZERO_ID
    groups: tuple[str, ...] = ()
    version: int = -1  # -1: not stored yet
    # True once an entry that a PEL row may name was deleted: claims then check each stale entry's
    # existence; while False every pending entry's entry exists and that join is skipped.
    some_deleted: bool = False


@dataclass(frozen=True)
class GroupMeta:
    """A consumer group's head row: its cursor (last delivered ID) and entries-read counter."""

    key: str
    name: str
    last_id: StreamId = ZERO_ID
    entries_read: int = C.ENTRIES_READ_UNKNOWN
    version: int = -1
    # The group's PEL size, and the version it and its consumers' counts were last made exact at
    # (core/count_rules.py); a write that does not keep them leaves them behind the version.
    pending_count: int | None = None
    counted_version: int | None = None

    @property
    def counts_kept(self) -> bool:
        """True when ``pending_count`` and every consumer's ``pending_count`` are exact."""
        return self.pending_count is not None and self.counted_version == self.version


@dataclass(frozen=True)
class ConsumerMeta:
    """A consumer of a group: when it was last seen and last active (-1: never active)."""

    name: str
    seen_time: int
    active_time: int = C.NEVER_ACTIVE
    pending_count: int | None = None  # exact while its group's ``counts_kept``


@dataclass(frozen=True)
class PendingEntry:
    """A PEL entry: delivered to ``owner``, not yet acknowledged.

    An entry given back by XNACK (Redis 8.8) has no owner (None) and a negative delivery time that
    places it in the group's NACK zone (``nack_time``).
    """

    id: StreamId
    owner: str | None
    delivery_time: int
    delivery_count: int

    @property
    def nacked(self) -> bool:
        return self.delivery_time < 0

    def idle(self, now: int) -> int:
        """Milliseconds since delivery; an entry in the NACK zone counts from 0, as Redis sets it."""
        return now - max(self.delivery_time, 0)


# XNACK's zone at the head of a group's time-ordered PEL (Redis 8.8): owner-less entries waiting for
# immediate redelivery, first NACKed first. Their stored delivery time is negative (real delivery
# times never are: XCLAIM clamps TIME/IDLE to [0, now]), so ordering by delivery time puts the zone
# first in NACK order and every idle-time cutoff lets them through, as Redis claims them whatever
# the min-idle-time. Value: NACK_ZONE_BASE + now * NACK_SLOTS_PER_MS + the position in the command.
NACK_ZONE_BASE = -(2**62)
NACK_SLOTS_PER_MS = 2**20


def nack_time(now: int, after: int | None) -> int:
    """The first NACK-zone time for a command at ``now``: after every NACK already in the zone
    (``after``, the zone's largest time, None when empty), so the zone stays FIFO within one ms."""
    slot = NACK_ZONE_BASE + now * NACK_SLOTS_PER_MS
    return slot if after is None or after < slot else after + 1


class RefPolicy(Enum):
    """What deleting an entry does to the consumer groups' references to it (Redis 8.2).

    KEEPREF (the default) leaves PEL entries dangling, as XDEL does; DELREF removes the ID from every
    group's PEL; ACKED deletes only entries no group references: in no PEL, and read by every group.
    """

    KEEPREF = "KEEPREF"
    DELREF = "DELREF"
    ACKED = "ACKED"


@dataclass(frozen=True)
class Claim:
    """How the MERGE claims one PEL entry; its conditions decide inside the transaction (XCLAIM §10).

    Args:
        live: The stream entry exists; when it does not, a pending row is purged instead.
        cutoff: Claim only if the stored delivery time is <= cutoff (``now - min_idle``); None: no
            idle check (min-idle 0).
        owner: The claiming consumer.
        delivery_time: The delivery time written on a win.
        steps: How many times the entry is claimed (XCLAIM processes a repeated ID once per occurrence).
        retry_count: RETRYCOUNT: the delivery count to write; None: count the deliveries.
        just_id: JUSTID: leave the delivery count unchanged.
        force: FORCE: create the PEL entry when the entry exists but is not pending.
    """

    live: bool
    cutoff: int | None
    owner: str
    delivery_time: int
    steps: int = 1
    retry_count: int | None = None
    just_id: bool = False
    force: bool = False


@dataclass(frozen=True)
class Write:
    """One row change of a command.

    ``guard`` marks a head row whose stored version must still be ``expect_version`` when the MERGE
    runs (``None``: the row must not exist yet); a guarded write that finds anything else aborts the
    whole commit so the command re-runs on a fresh snapshot.
    """

    row: Mapping[str, Any]
    delete: bool = False
    guard: bool = False
    expect_version: int | None = None
    claim: Claim | None = None

    @property
    def partition(self) -> str:
        return str(self.row[C.PARTITION_ID])

    def key(self) -> tuple[Any, ...]:
        return tuple(self.row.get(column) for column in C.KEY_COLUMNS)


# --- rows -------------------------------------------------------------------------------------------


def stream_head_row(meta: StreamMeta, txn: str) -> dict[str, Any]:
    """The stream head row for ``meta`` with its version bumped."""
    return {
        C.PARTITION_ID: stream_partition(meta.key),
        C.ROW_KIND: C.KIND_STREAM,
        C.STREAM: meta.key,
        **_stored_columns(C.LAST_MS, C.LAST_SEQ, meta.last_id),
        C.ENTRIES_ADDED: meta.entries_added,
        C.ENTRY_COUNT: meta.length,
        **_stored_columns(C.FIRST_MS, C.FIRST_SEQ, meta.first_id),
        **_stored_columns(C.MAX_DELETED_MS, C.MAX_DELETED_SEQ, meta.max_deleted_id),
        C.SOME_DELETED: meta.some_deleted,
        C.GROUP_NAMES: list(meta.groups),
        C.VERSION: meta.version + 1,
        C.TXN: txn,
    }


def stream_head_key(key: str) -> dict[str, Any]:
    return {C.PARTITION_ID: stream_partition(key), C.ROW_KIND: C.KIND_STREAM, C.STREAM: key}


def entry_row(key: str, entry: Entry, txn: str) -> dict[str, Any]:
    return {
        C.PARTITION_ID: stream_partition(key),
        C.ROW_KIND: C.KIND_ENTRY,
        C.STREAM: key,
        **_stored_columns(C.ID_MS, C.ID_SEQ, entry.id),
        C.FIELDS: [{"field": f, "value": v} for f, v in entry.fields],
        C.TXN: txn,
    }


def entry_key(key: str, entry_id: StreamId) -> dict[str, Any]:
    return {
        C.PARTITION_ID: stream_partition(key),
        C.ROW_KIND: C.KIND_ENTRY,
        C.STREAM: key,
        **_stored_columns(C.ID_MS, C.ID_SEQ, entry_id),
    }


def group_head_row(group: GroupMeta, txn: str) -> dict[str, Any]:
    """The group head row for ``group`` with its version bumped."""
    return {
        **_in_group(group.key, group.name, C.KIND_GROUP),
        **_stored_columns(C.LAST_MS, C.LAST_SEQ, group.last_id),
        C.ENTRIES_READ: group.entries_read,
        C.PENDING_COUNT: group.pending_count,
        C.VERSION: group.version + 1,
        C.COUNTED_VERSION: group.counted_version,  # behind the new version: a commit that counts sets it
        C.TXN: txn,
    }


def consumer_row(key: str, group: str, consumer: ConsumerMeta, txn: str) -> dict[str, Any]:
    return {
        **_in_group(key, group, C.KIND_CONSUMER),
        C.CONSUMER: consumer.name,
        C.SEEN_TIME_MS: consumer.seen_time,
        C.ACTIVE_TIME_MS: consumer.active_time,
        C.PENDING_COUNT: consumer.pending_count,
        C.TXN: txn,
    }


def pending_row(key: str, group: str, pending: PendingEntry, txn: str) -> dict[str, Any]:
    return {
        **pending_key(key, group, pending.id),
        C.OWNER: pending.owner,
        C.DELIVERY_TIME_MS: pending.delivery_time,
        C.DELIVERY_COUNT: pending.delivery_count,
        C.TXN: txn,
    }


def pending_key(key: str, group: str, entry_id: StreamId) -> dict[str, Any]:
    return {
        **_in_group(key, group, C.KIND_PENDING),
        **_stored_columns(C.ID_MS, C.ID_SEQ, entry_id),
    }


def _stored_columns(ms: str, seq: str, stream_id: StreamId) -> dict[str, int]:
    """The ID as its two stored columns of a row, named ``ms`` and ``seq`` (``StreamId.stored``)."""
    return dict(zip((ms, seq), stream_id.stored(), strict=True))


def _in_group(key: str, group: str, kind: str) -> dict[str, Any]:
    """The columns that place a row of ``kind`` in a group's partition."""
    return {C.PARTITION_ID: group_partition(key, group), C.ROW_KIND: kind, C.STREAM: key, C.GROUP: group}


# --- what a command reads (Snapshot.prefetch answers several in one query) ---------------------------------


@dataclass(frozen=True)
class Scan:
    """An ordered range read: the rows of one kind with low <= ID <= high, ascending (descending if
    ``reverse``), at most ``limit``; for pending rows optionally of one owner and delivered early enough."""

    low: StreamId
    high: StreamId
    limit: int | None = None
    reverse: bool = False
    owner: str | None = None
    delivered_at_or_before: int | None = None


@dataclass(frozen=True)
class Need:
    """What a command reads about one stream; ``Snapshot.prefetch`` fetches several needs in one query.

    Args:
        key: The stream (its head is always fetched).
        groups: Group heads to fetch.
        consumer: This consumer's row in each of ``groups``.
        entry_ids: Stream entries to look up by ID.
        pending_ids: PEL entries to look up by ID, in each of ``groups``.
        entry_scan: An ordered range of the stream's entries.
        pending_scan: An ordered range of the PEL of ``groups[0]``.
    """

    key: str
    groups: tuple[str, ...] = ()
    consumer: str | None = None
    entry_ids: tuple[StreamId, ...] = ()
    pending_ids: tuple[StreamId, ...] = ()
    entry_scan: Scan | None = None
    pending_scan: Scan | None = None

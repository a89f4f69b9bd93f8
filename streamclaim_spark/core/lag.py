"""Consumer-group entries-read and lag, as Redis 7.0 computes them (t_stream.c).

Pure functions of a stream head and a group head. ``None`` stands for Redis' "unknown" (-1, nil).
"""

from __future__ import annotations

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, StreamId
from streamclaim_spark.core.model import GroupMeta, StreamMeta


def range_has_tombstones(stream: StreamMeta, start: StreamId, end: StreamId = MAX_ID) -> bool:
    """streamRangeHasTombstones: may [start, end] hold an entry removed by XDEL?"""
    if stream.length == 0 or stream.max_deleted_id.is_zero:
        return False
    if stream.first_id > stream.max_deleted_id:
        return False  # the newest tombstone lies before the first live entry
    return start <= stream.max_deleted_id <= end


def estimate_entries_read(stream: StreamMeta, entry_id: StreamId) -> int:
    """streamEstimateDistanceFromFirstEverEntry: the logical read counter of ``entry_id`` or -1."""
    if stream.entries_added == 0:
        return 0
    if stream.length == 0 and entry_id <= stream.last_id:
        return stream.entries_added
    if entry_id == stream.last_id:
        return stream.entries_added
    if entry_id > stream.last_id:
        return C.ENTRIES_READ_UNKNOWN
    if stream.max_deleted_id.is_zero or stream.max_deleted_id < stream.first_id:
        if entry_id < stream.first_id:
            return stream.entries_added - stream.length
        if entry_id == stream.first_id:
            return stream.entries_added - stream.length + 1
    return C.ENTRIES_READ_UNKNOWN


def entries_read_after_delivery(stream: StreamMeta, group: GroupMeta, entry_id: StreamId) -> int:
    """The group's entries-read once ``entry_id`` (> the group's last ID) is delivered with ``>``."""
    if group.entries_read != C.ENTRIES_READ_UNKNOWN and not range_has_tombstones(stream, entry_id):
        return group.entries_read + 1
    if stream.entries_added:
        return estimate_entries_read(stream, entry_id)
    return group.entries_read


def lag(stream: StreamMeta, group: GroupMeta) -> int | None:
    """streamReplyWithCGLag: entries not yet delivered to the group, None when unknowable."""
    if stream.entries_added == 0:
        return 0
    if group.entries_read != C.ENTRIES_READ_UNKNOWN and not range_has_tombstones(stream, group.last_id):
        return stream.entries_added - group.entries_read
    estimate = estimate_entries_read(stream, group.last_id)
    if estimate == C.ENTRIES_READ_UNKNOWN:
        return None
    return stream.entries_added - estimate


def entries_read_reply(group: GroupMeta) -> int | None:
    return None if group.entries_read == C.ENTRIES_READ_UNKNOWN else group.entries_read

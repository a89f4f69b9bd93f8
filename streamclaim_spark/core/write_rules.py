"""What a command's row writes do to the stored rows they meet: the clauses of the MERGE a plan of
writes commits with (engine/merge_commit.py ``_merge``), as a pure function over rows.

A commit of files applies them on the driver (engine/file_commit.py) to the rows of the few files that
may hold the writes' keys, so that a command's commit needs no join in Spark. Both ways must leave the
same rows: tests/unit/test_write_rules.py checks each clause; the parity suite compares every command
with redis-server on classic sessions (files), and tests/connect a few scenarios, the bulk APIs, a
batched claim, recovery and redrive on Spark Connect (the MERGE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import Claim, Write
from streamclaim_spark.errors import StaleSnapshotError

Key = tuple[Any, ...]
Row = dict[str, Any]


def last_write_per_key(writes: Sequence[Write]) -> list[Write]:
    """``writes`` with only the last write to each key, in first-write order: a sequential program's
    outcome, and what the MERGE's source holds (one source row per target row)."""
    return list({write.key(): write for write in writes}.values())


def apply_writes(stored: Mapping[Key, Row], writes: Sequence[Write]) -> dict[Key, Row | None]:
    """The row each write leaves at its key (None: deleted), for the keys the writes change; a key a
    write leaves as it was (a claim of a row not idle enough, a delete of a row not there) is absent.

    ``stored`` holds the rows as committed, by key (``Write.key``), at least those of the writes' keys.
    Raises ``StaleSnapshotError`` when a guarded row's version is not the one its command read, or the
    row exists where the command found none, or is gone: the MERGE's guard, a lost race.
    """
    changed: dict[Key, Row | None] = {}
    for write in last_write_per_key(writes):
        key = write.key()
        current = stored.get(key)
        _check_guard(write, current)
        outcome = _matched(write, current) if current is not None else _not_matched(write)
        if not isinstance(outcome, _Unchanged):
            changed[key] = outcome
    return changed


class _Unchanged:
    """What ``_matched`` and ``_not_matched`` give for a write that leaves its key as it was."""


_UNCHANGED = _Unchanged()


def _check_guard(write: Write, current: Row | None) -> None:
    if not write.guard:
        return
    version = None if current is None else current.get(C.VERSION)
    if (current is not None) if write.expect_version is None else version != write.expect_version:
        raise StaleSnapshotError(
            f"the {write.row[C.ROW_KIND]} row of {write.partition} is at version {version}, "
            f"the command read {write.expect_version}"
        )


def _matched(write: Write, current: Row) -> Row | _Unchanged | None:
    """The MERGE's WHEN MATCHED clauses, in their order: delete, claim, write."""
    claim = write.claim
    if write.delete or (claim is not None and not claim.live):
        return None
    if claim is not None:
        idle = claim.cutoff is None or current[C.DELIVERY_TIME_MS] <= claim.cutoff
        if not idle:
            return _UNCHANGED
        return {
            **current,
            C.OWNER: claim.owner,
            C.DELIVERY_TIME_MS: claim.delivery_time,
            C.DELIVERY_COUNT: _claimed_count(claim, current[C.DELIVERY_COUNT]),
            C.TXN: write.row.get(C.TXN),
        }
    return _whole_row(write)


def _not_matched(write: Write) -> Row | _Unchanged | None:
    """The MERGE's WHEN NOT MATCHED clauses: a forced claim inserts, a plain write inserts."""
    claim = write.claim
    if claim is not None:
        if not (claim.force and claim.live):
            return _UNCHANGED
        forced = {**_whole_row(write), C.OWNER: claim.owner, C.DELIVERY_TIME_MS: claim.delivery_time}
        return {**forced, C.DELIVERY_COUNT: _claimed_count(claim, None)}
    if write.delete:
        return _UNCHANGED
    return _whole_row(write)


def _claimed_count(claim: Claim, stored: int | None) -> int:
    """RETRYCOUNT, else unchanged with JUSTID, else one more per step; a FORCE insert (``stored`` None)
    starts from Redis' fresh count of 1."""
    if claim.retry_count is not None:
        return claim.retry_count
    base = 1 if stored is None else stored
    return base if claim.just_id else base + claim.steps


def _whole_row(write: Write) -> Row:
    """The write's row; a state column it leaves out is written as null, as the MERGE sets it."""
    return dict(write.row)

"""The MERGE's clauses applied on the driver (core/write_rules.py): guards, deletes, claims, writes."""

from __future__ import annotations

from typing import Any

import pytest

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import (
    Claim,
    ConsumerMeta,
    GroupMeta,
    PendingEntry,
    StreamMeta,
    Write,
    consumer_row,
    group_head_row,
    pending_key,
    pending_row,
    stream_head_row,
)
from streamclaim_spark.core.write_rules import apply_writes
from streamclaim_spark.errors import StaleSnapshotError
from streamclaim_spark.state.conflicts import is_lost_race

FIRST, SECOND = StreamId(5, 0), StreamId(6, 0)
# As stored: the stream head at version 3, one group head at 7, two pending entries (idle since 100 and 900).
STORED_ROWS = [
    stream_head_row(StreamMeta("orders", version=2), "t"),
    group_head_row(GroupMeta("orders", "billing", version=6), "t"),
    pending_row("orders", "billing", PendingEntry(FIRST, "alice", 100, 2), "t"),
    pending_row("orders", "billing", PendingEntry(SECOND, "alice", 900, 1), "t"),
]
STORED = {
    tuple(row.get(name) for name in ("partition_id", "row_kind", "id_ms", "id_seq", "consumer")): row
    for row in STORED_ROWS
}


def claim_of(entry_id: StreamId, claim: Claim) -> Write:
    return Write({**pending_key("orders", "billing", entry_id), "txn": "u"}, claim=claim)


def outcome(*writes: Write) -> list[dict[str, Any] | None]:
    return list(apply_writes(STORED, writes).values())


def test_guarded_heads_at_the_versions_read_and_unguarded_rows_pass_and_are_written() -> None:
    writes = [
        Write(stream_head_row(StreamMeta("orders", version=3), "u"), guard=True, expect_version=3),
        Write(group_head_row(GroupMeta("orders", "audit"), "u"), guard=True, expect_version=None),
        Write(consumer_row("orders", "billing", ConsumerMeta("bob", 5), "u")),
    ]
    assert outcome(*writes) == [dict(write.row) for write in writes]


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            Write(stream_head_row(StreamMeta("orders", version=2), "u"), guard=True, expect_version=2),
            "is at version 3, the command read 2",
        ),
        (
            Write(group_head_row(GroupMeta("orders", "billing"), "u"), guard=True, expect_version=None),
            "is at version 7, the command read None",
        ),
        (
            Write(group_head_row(GroupMeta("orders", "gone", version=4), "u"), guard=True, expect_version=4),
            "is at version None, the command read 4",
        ),
    ],
    ids=["moved-since-read", "created-meanwhile", "deleted-meanwhile"],
)
def test_a_guarded_head_that_changed_since_the_read_is_a_lost_race(write: Write, message: str) -> None:
    with pytest.raises(StaleSnapshotError, match=message) as raised:
        outcome(write)
    assert is_lost_race(raised.value)


def test_a_claim_of_an_idle_entry_moves_it_and_counts_its_steps_and_one_not_idle_enough_stays() -> None:
    claim = Claim(live=True, cutoff=500, owner="bob", delivery_time=1000, steps=2)
    assert outcome(claim_of(FIRST, claim), claim_of(SECOND, claim)) == [
        pending_row("orders", "billing", PendingEntry(FIRST, "bob", 1000, 4), "u")
    ]


@pytest.mark.parametrize(
    ("claim", "count"),
    [
        (Claim(live=True, cutoff=None, owner="bob", delivery_time=1000, retry_count=9), 9),
        (Claim(live=True, cutoff=None, owner="bob", delivery_time=1000, just_id=True), 2),
    ],
    ids=["retrycount", "justid"],
)
def test_retrycount_sets_the_count_and_justid_leaves_it(claim: Claim, count: int) -> None:
    assert outcome(claim_of(FIRST, claim)) == [
        pending_row("orders", "billing", PendingEntry(FIRST, "bob", 1000, count), "u")
    ]


def test_a_claim_of_a_deleted_entry_purges_its_pending_row_and_a_delete_of_nothing_changes_nothing() -> None:
    gone = Claim(live=False, cutoff=None, owner="bob", delivery_time=1000)
    assert outcome(claim_of(SECOND, gone)) == [None]
    assert outcome(Write(pending_key("orders", "billing", StreamId(7, 0)), delete=True)) == []


@pytest.mark.parametrize(
    ("claim", "count"),
    [
        (Claim(live=True, cutoff=None, owner="bob", delivery_time=1000, force=True), 2),
        (Claim(live=True, cutoff=None, owner="bob", delivery_time=1000, force=True, just_id=True), 1),
        (Claim(live=True, cutoff=None, owner="bob", delivery_time=1000, force=True, retry_count=5), 5),
    ],
    ids=["force", "force-justid", "force-retrycount"],
)
def test_force_creates_the_pending_row_of_an_entry_not_pending(claim: Claim, count: int) -> None:
    third = StreamId(8, 0)
    assert outcome(claim_of(third, claim)) == [
        pending_row("orders", "billing", PendingEntry(third, "bob", 1000, count), "u")
    ]


def test_a_claim_without_force_of_an_entry_not_pending_and_a_forced_claim_of_a_deleted_entry_change_nothing() -> None:
    third = StreamId(8, 0)
    plain = Claim(live=True, cutoff=None, owner="bob", delivery_time=1000)
    gone = Claim(live=False, cutoff=None, owner="bob", delivery_time=1000, force=True)
    assert outcome(claim_of(third, plain)) == []
    assert outcome(claim_of(third, gone)) == []


def test_the_last_write_to_a_key_wins() -> None:
    first = Write(consumer_row("orders", "billing", ConsumerMeta("bob", 5), "u"))
    last = Write(consumer_row("orders", "billing", ConsumerMeta("bob", 9), "u"))
    assert outcome(first, last) == [dict(last.row)]

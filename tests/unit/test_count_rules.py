"""Kept pending counts as a commit's row changes move them (core/count_rules.py)."""

from __future__ import annotations

from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.count_rules import CountInputs, counted_rows, group_head_key
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import (
    ConsumerMeta,
    GroupMeta,
    PendingEntry,
    consumer_row,
    group_head_row,
    pending_row,
)
from streamclaim_spark.core.partitions import group_partition

PARTITION = group_partition("orders", "billing")
HEAD = group_head_key(PARTITION)
ONE, TWO = StreamId(1, 0), StreamId(2, 0)


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in C.KEY_COLUMNS)


def head(version: int, count: int | None, counted: int | None) -> dict[str, Any]:
    """The group head as stored at ``version`` (``group_head_row`` writes the version after the one given)."""
    return group_head_row(
        GroupMeta("orders", "billing", version=version - 1, pending_count=count, counted_version=counted), "t"
    )


def consumer(name: str, count: int | None) -> dict[str, Any]:
    return consumer_row("orders", "billing", ConsumerMeta(name, 0, pending_count=count), "t")


def pending(entry_id: StreamId, owner: str | None) -> dict[str, Any]:
    return pending_row("orders", "billing", PendingEntry(entry_id, owner, 0, 1), "t")


def as_stored(*rows: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {key_of(row): row for row in rows}


# Kept at version 4: alice owns ONE and TWO.
STORED_GROUP = as_stored(head(4, 2, 4), consumer("alice", 2), consumer("bob", 0))
STORED_PEL = as_stored(pending(ONE, "alice"), pending(TWO, "alice"))


def counts_after(changes: dict[tuple[Any, ...], Any], inputs: CountInputs | None = None) -> dict[str, Any]:
    stored = {**STORED_GROUP, **STORED_PEL}
    rows = counted_rows({PARTITION}, stored, changes, {PARTITION: STORED_GROUP}, inputs or CountInputs())
    return {
        ("head" if key == HEAD else key[4]): (row[C.PENDING_COUNT], row.get(C.COUNTED_VERSION))
        for key, row in rows.items()
    }


def test_a_claim_moves_one_count_from_the_old_owner_to_the_new_and_marks_the_head_counted_at_its_new_version() -> None:
    claimed = {**pending(ONE, "bob")}
    changes = {key_of(claimed): claimed, HEAD: head(5, 2, 4)}
    assert counts_after(changes) == {"head": (2, 5), "alice": (1, None), "bob": (1, None)}


def test_an_acknowledgement_lowers_the_owner_and_the_group_and_a_new_consumer_starts_at_zero() -> None:
    changes = {
        key_of(pending(ONE, "alice")): None,
        HEAD: head(5, 2, 4),
        key_of(consumer("carol", None)): consumer("carol", None),
    }
    assert counts_after(changes) == {"head": (1, 5), "alice": (1, None), "carol": (0, None)}


def test_a_nacked_entry_counts_in_the_group_and_in_no_consumer() -> None:
    nacked = pending(TWO, None)
    assert counts_after({key_of(nacked): nacked, HEAD: head(5, 2, 4)}) == {"head": (2, 5), "alice": (1, None)}


def test_rows_the_plan_does_not_count_leave_the_counts_behind_even_without_a_head_write() -> None:
    assert counts_after({HEAD: head(5, 2, 4)}, CountInputs(uncounted={PARTITION})) == {"head": (None, None)}
    assert counts_after({key_of(pending(ONE, "alice")): None}) == {"head": (None, None)}
    assert counts_after({}, CountInputs(uncounted={PARTITION})) == {"head": (None, None)}


def test_appended_rows_count_as_given_and_counts_not_kept_wait_for_a_recount() -> None:
    appended = CountInputs(appended={PARTITION: {"bob": 3}})
    assert counts_after({HEAD: head(5, 2, 4)}, appended) == {"head": (5, 5), "bob": (3, None)}
    behind = as_stored(head(4, 2, 3), consumer("alice", None), consumer("bob", None))
    changes = {HEAD: head(5, 2, 3)}
    assert counted_rows({PARTITION}, {**behind, **STORED_PEL}, changes, {PARTITION: behind}, CountInputs()) == {
        HEAD: {**head(5, 2, 3), C.PENDING_COUNT: None, C.COUNTED_VERSION: None}
    }
    recounted = counted_rows(
        {PARTITION},
        {**behind, **STORED_PEL},
        changes,
        {PARTITION: behind},
        CountInputs(recounts={PARTITION: {"alice": 2}}),
    )
    assert {key[4]: row[C.PENDING_COUNT] for key, row in recounted.items()} == {None: 2, "alice": 2, "bob": 0}


def test_rows_moved_or_removed_as_their_caller_counted_them_keep_the_counts() -> None:
    # A batched claim of both of alice's entries to bob, counted on the driver; then a bulk XACK of one.
    moved = CountInputs(appended={PARTITION: {"alice": -2, "bob": 2}})
    assert counts_after({HEAD: head(5, 2, 4)}, moved) == {"head": (2, 5), "alice": (0, None), "bob": (2, None)}
    removed = CountInputs(appended={PARTITION: {"alice": -1}})
    assert counts_after({HEAD: head(5, 2, 4)}, removed) == {"head": (1, 5), "alice": (1, None)}
    # More taken from an owner than it held: the caller's count cannot be right, so nothing is kept.
    assert counts_after({HEAD: head(5, 2, 4)}, CountInputs(appended={PARTITION: {"alice": -3}})) == {
        "head": (None, None)
    }


def test_a_repair_counts_from_its_recount_instead_of_the_wrong_kept_counts_while_the_head_still_claims_them() -> None:
    # Kept at version 4 but wrong: the head says 5 and alice 3, where the PEL holds alice's two entries.
    wrong = as_stored(head(4, 5, 4), consumer("alice", 3), consumer("bob", 0))
    changes = {HEAD: head(5, 2, 5)}
    repair = CountInputs(repaired={PARTITION: {"alice": 2}})
    rows = counted_rows({PARTITION}, {**wrong, **STORED_PEL}, changes, {PARTITION: wrong}, repair)
    assert {key[4]: (row[C.PENDING_COUNT], row.get(C.COUNTED_VERSION)) for key, row in rows.items()} == {
        None: (2, 5),
        "alice": (2, None),
    }
    # Left behind since the repair read it: the recount is not trusted, the counts stay behind.
    behind = as_stored(head(4, 5, 3), consumer("alice", 3), consumer("bob", 0))
    rows = counted_rows({PARTITION}, {**behind, **STORED_PEL}, changes, {PARTITION: behind}, repair)
    assert rows == {HEAD: {**head(5, 2, 5), C.PENDING_COUNT: None, C.COUNTED_VERSION: None}}


def test_entries_of_an_owner_with_no_consumer_row_leave_the_counts_behind() -> None:
    behind = as_stored(head(4, 2, 3), consumer("bob", None))
    recount = CountInputs(recounts={PARTITION: {"alice": 2}})
    rows = counted_rows({PARTITION}, {**behind, **STORED_PEL}, {HEAD: head(5, 2, 3)}, {PARTITION: behind}, recount)
    assert rows == {HEAD: {**head(5, 2, 3), C.PENDING_COUNT: None, C.COUNTED_VERSION: None}}

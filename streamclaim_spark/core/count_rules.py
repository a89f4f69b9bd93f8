"""Kept pending counts: what a commit's row changes do to its groups' counts, as a pure function.

Redis keeps each consumer's pending count and the PEL's size; the store keeps them on the consumer rows
and the group head (``pending_count``), so that XPENDING's summary and XINFO read a few small rows, not
the PEL. A count is exact only while the group head's ``counted_version`` equals its ``version``:
every write to a group bumps the head's version (its guard), and only a commit that counts every PEL
row it changes sets ``counted_version`` to the new version. A write that cannot count (a MERGE of
frames, a removal by ID, a rewrite given without its counts) leaves the counts behind, and readers
count the PEL as before; the next counted commit on a group whose PEL is small recounts it
(``recounts``) and makes the counts exact again. tests/spark/test_kept_counts.py compares them with
a recount after a random mix.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.write_rules import Key, Row


@dataclass(frozen=True)
class CountInputs:
    """What a commit tells about its groups' PEL changes beyond its row writes.

    ``uncounted``: group partitions whose PEL the plan changes by rows it does not count;
    ``appended``: per group partition, the PEL rows its appends add (or rewrites move: negative for the
    owners they leave) per owner;
    ``recounts``: per group partition whose counts were not kept, its stored PEL rows per owner
    (counted by the caller where the PEL is small enough to read on the driver);
    ``unread``: group partitions whose stored PEL must not be recounted (the commit removes rows of it,
    perhaps from files it drops unread): their counts stay kept only if they were;
    ``repaired``: per group partition, its whole stored PEL per owner as the plan's own recount found it
    on the snapshot its guards hold (a repair of wrong kept counts, fleet/maintenance/verify.py): the
    counts the commit starts from instead of the kept ones, while the stored head still says they are
    kept (a head left behind since is counted as any other)."""

    uncounted: Set[str] = frozenset()
    appended: Mapping[str, Mapping[str | None, int]] = field(default_factory=dict)
    recounts: Mapping[str, Mapping[str | None, int]] = field(default_factory=dict)
    unread: Set[str] = frozenset()
    repaired: Mapping[str, Mapping[str | None, int]] = field(default_factory=dict)


def group_head_key(partition: str) -> Key:
    return (partition, C.KIND_GROUP, None, None, None)


def needs_recount(partition: str, group_rows: Mapping[Key, Row], changes: Mapping[Key, Row | None]) -> bool:
    """True when the commit writes ``partition``'s group head and finds its counts not kept: a recount
    of its stored PEL would let the commit make them exact."""
    head_key = group_head_key(partition)
    stored, written = group_rows.get(head_key), changes.get(head_key)
    return written is not None and stored is not None and not counts_kept(stored)


def counts_kept(head: Row) -> bool:
    """True when a stored group head's counts (and its consumers') are exact."""
    return head.get(C.PENDING_COUNT) is not None and head.get(C.COUNTED_VERSION) == head.get(C.VERSION)


def counted_rows(
    partitions: Set[str],
    stored: Mapping[Key, Row],
    changes: Mapping[Key, Row | None],
    group_rows: Mapping[str, Mapping[Key, Row]],
    inputs: CountInputs,
) -> dict[Key, Row]:
    """The head and consumer rows the commit writes with their counts: ``changes``' own rows of those
    kinds with ``pending_count`` (and the head's ``counted_version``) set, stored consumer rows whose
    count moves, and stored heads whose counts the commit leaves behind. ``partitions`` are the group
    partitions the commit writes rows of, appends to or changes uncounted; ``stored`` holds the
    committed rows of ``changes``' keys; ``group_rows`` the committed head and consumer rows of each of
    ``partitions``."""
    by_partition: dict[str, dict[Key, Row | None]] = {}
    for key, row in changes.items():  # once: a fleet's commit writes 10,000 groups' rows
        by_partition.setdefault(key[0], {})[key] = row
    counted: dict[Key, Row] = {}
    for partition in sorted(partitions):
        own = by_partition.get(partition, {})
        counted.update(_counted_group(partition, stored, own, group_rows.get(partition, {}), inputs))
    return counted


def _counted_group(
    partition: str,
    stored: Mapping[Key, Row],
    changes: Mapping[Key, Row | None],
    group_rows: Mapping[Key, Row],
    inputs: CountInputs,
) -> dict[Key, Row]:
    head_key = group_head_key(partition)
    stored_head = group_rows.get(head_key)
    if head_key in changes and changes[head_key] is None:
        return {}  # the group is deleted
    owners, total = _pel_changes(partition, stored, changes, inputs.appended.get(partition, {}))
    consumers = _consumers_after(partition, changes, group_rows)
    if head_key not in changes:
        if owners or total or partition in inputs.uncounted:  # the PEL changed, its head not written
            return {head_key: _uncounted(stored_head)} if stored_head and counts_kept(stored_head) else {}
        kept = stored_head is not None and counts_kept(stored_head)
        return {
            key: {**row, C.PENDING_COUNT: _stored_count(group_rows.get(key)) if kept else None}
            for key, row in consumers.items()
            if key in changes
        }
    head = changes[head_key]
    assert head is not None
    base = _base_counts(partition, stored_head, group_rows, inputs)
    if base is None or partition in inputs.uncounted:
        return {head_key: _uncounted(head)}
    base_total, base_owners = base
    final: dict[Key, Row] = {}
    for key, row in consumers.items():
        count = base_owners.get(key[4], 0) + owners.get(key[4], 0)
        if count < 0:
            return {head_key: _uncounted(head)}
        if key in changes or _stored_count(group_rows.get(key)) != count:
            final[key] = {**row, C.PENDING_COUNT: count}
    named = {key[4] for key in consumers}
    for owner in owners.keys() | base_owners.keys():
        if owner is not None and owner not in named and base_owners.get(owner, 0) + owners.get(owner, 0) != 0:
            return {head_key: _uncounted(head)}  # entries owned by a consumer with no row: not counted
    if base_total + total < 0:
        return {head_key: _uncounted(head)}
    final[head_key] = {**head, C.PENDING_COUNT: base_total + total, C.COUNTED_VERSION: head[C.VERSION]}
    return final


def _pel_changes(
    partition: str, stored: Mapping[Key, Row], changes: Mapping[Key, Row | None], appended: Mapping[str | None, int]
) -> tuple[dict[str | None, int], int]:
    """The change of each owner's count (None: entries with no owner), and of the PEL's size."""
    owners: dict[str | None, int] = dict(appended)
    total = sum(appended.values())
    for key, row in changes.items():
        if key[0] != partition or key[1] != C.KIND_PENDING:
            continue
        before = stored.get(key)
        if before is not None:
            owners[before[C.OWNER]] = owners.get(before[C.OWNER], 0) - 1
            total -= 1
        if row is not None:
            owners[row[C.OWNER]] = owners.get(row[C.OWNER], 0) + 1
            total += 1
    return {owner: n for owner, n in owners.items() if n}, total


def _consumers_after(
    partition: str, changes: Mapping[Key, Row | None], group_rows: Mapping[Key, Row]
) -> dict[Key, Row]:
    """The group's consumer rows after the commit: the stored ones with the changes over them."""
    after = {key: row for key, row in group_rows.items() if key[1] == C.KIND_CONSUMER}
    for key, row in changes.items():
        if key[0] == partition and key[1] == C.KIND_CONSUMER:
            if row is None:
                after.pop(key, None)
            else:
                after[key] = row
    return after


def _base_counts(
    partition: str, stored_head: Row | None, group_rows: Mapping[Key, Row], inputs: CountInputs
) -> tuple[int, dict[str | None, int]] | None:
    """The counts before the commit: none for a new group, a repair's recount or the kept ones, or the
    caller's recount; None when none of them is known."""
    if stored_head is None:
        return 0, {}
    repaired = inputs.repaired.get(partition)
    if repaired is not None and counts_kept(stored_head):
        return sum(repaired.values()), dict(repaired)
    if counts_kept(stored_head):
        owners: dict[str | None, int] = {}
        for key, row in group_rows.items():
            if key[1] == C.KIND_CONSUMER:
                if row.get(C.PENDING_COUNT) is None:
                    return None
                owners[key[4]] = int(row[C.PENDING_COUNT])
        return int(stored_head[C.PENDING_COUNT]), owners
    recount = inputs.recounts.get(partition)
    if recount is None:
        return None
    return sum(recount.values()), dict(recount)


def _stored_count(row: Row | None) -> int | None:
    return None if row is None else row.get(C.PENDING_COUNT)


def _uncounted(head: Row) -> Row:
    return {**head, C.PENDING_COUNT: None, C.COUNTED_VERSION: None}

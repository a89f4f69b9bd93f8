"""Everything a command commits: its row writes, and the bulk changes beside them.

The engine commits a plan as one Delta transaction: a guarded MERGE of its writes and frames, one
update in place, or a commit of files (engine/file_commit.py) for writes, appends, removals and
rewrites. Nothing here touches Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_changes import Removal, Rewrite
from streamclaim_spark.core.model import Write
from streamclaim_spark.core.partitions import APART_KINDS


@dataclass
class Plan:
    """Everything a command commits: row writes plus, for bulk changes, source DataFrames.

    ``frames`` hold DataFrames shaped like the MERGE source (see merge_source.py); they let a command
    delete or rewrite millions of rows without collecting them to the driver. ``update`` (a
    ``merge_commit.InPlaceUpdate``) instead rewrites rows where they lie, with no source to join:
    a plan commits either writes and frames as one MERGE, or one update.
    """

    writes: list[Write] = field(default_factory=list)
    frames: list[Any] = field(default_factory=list)
    partitions: set[str] = field(default_factory=set)
    # The partitions ``frames`` write, whose rows may be of any kind (writes carry their own kinds).
    frame_partitions: set[str] = field(default_factory=set)
    update: Any = None
    # Target-only MERGE conditions (Columns over ``t.``) that every row the plan writes or deletes meets:
    # they change no outcome and let Delta skip the files of rows the plan cannot touch.
    bounds: list[Any] = field(default_factory=list)
    # True when every frame is pinned (a local checkpoint): the MERGE's two passes over its source
    # then read the same rows without Delta copying the source first (state/commit_settings.py).
    frames_pinned: bool = False
    # Rows new by construction (state-table columns; no existing row has their keys): a bulk append's
    # entries, a delivery's PEL rows. Written as plain files in the commit (engine/file_commit.py)
    # where the session allows, else inserted by the MERGE like any frame.
    appends: list[Any] = field(default_factory=list)
    # The appends whose rows already come in ID order within each Spark partition (written unsorted).
    ordered_appends: set[int] = field(default_factory=set)
    # Rows removed by ID (``Removal``), committed only as files (a classic session): see file_commit.py.
    removals: list[Removal] = field(default_factory=list)
    # Rows changed where they lie (``Rewrite``), committed only as files (a classic session).
    rewrites: list[Rewrite] = field(default_factory=list)
    # Group partitions whose PEL the plan changes by rows it does not count (frames, removals, an
    # update, rewrites and appends given without counts): their kept counts are left behind
    # (core/count_rules.py).
    uncounted: set[str] = field(default_factory=set)
    # Per group partition, how many PEL rows the plan's appends and rewrites add (or, negative, take)
    # per owner (None: no owner), as their callers counted them.
    counted_pending: dict[str, dict[str | None, int]] = field(default_factory=dict)
    # Per group partition, its whole PEL per owner as the plan's decision recounted it (a repair of wrong
    # kept counts): what the commit counts from instead of the stored counts (core/count_rules.py).
    recounted: dict[str, dict[str | None, int]] = field(default_factory=dict)

    def add(self, write: Write) -> None:
        self.writes.append(write)
        self.partitions.add(write.partition)

    def add_frame(self, frame: Any, *partitions: str) -> None:
        """Adds source rows as a DataFrame, with every partition they write (one or many)."""
        self.frames.append(frame)
        self.partitions.update(partitions)
        self.frame_partitions.update(partitions)
        self.uncounted.update(partitions)

    def add_append(
        self,
        rows: Any,
        *partitions: str,
        ordered: bool = False,
        pending_counts: Mapping[str, Mapping[str | None, int]] | None = None,
    ) -> None:
        """Adds rows no existing row can match (see ``appends``), with every partition they write;
        ``ordered``: each Spark partition of ``rows`` already holds one partition's rows in ID order, so
        they are written as they come (else sorted first, so each file covers a narrow ID range);
        ``pending_counts``: the PEL rows they add per group partition and owner, so that the groups'
        kept counts stay exact (without it they are left behind)."""
        if ordered:
            self.ordered_appends.add(len(self.appends))
        self.appends.append(rows)
        self.partitions.update(partitions)
        self.frame_partitions.update(partitions)
        self._count(partitions, pending_counts)

    def add_removal(self, removal: Removal) -> None:
        """Adds ``removal`` (committed by rewriting the files holding its rows)."""
        self.removals.append(removal)
        self.partitions.update(removal.partitions)
        self.frame_partitions.update(removal.partitions)
        # Counted, or left uncounted, by the commit of files that finds its rows (``removed_owners``).

    def add_rewrite(
        self, rewrite: Rewrite, pending_counts: Mapping[str, Mapping[str | None, int]] | None = None
    ) -> None:
        """Adds ``rewrite`` (committed by rewriting the files holding its rows); ``pending_counts``: how
        it moves PEL rows between owners per group partition (+n to the new owner, -n to each old one),
        so that the groups' kept counts stay exact (without it they are left behind)."""
        self.rewrites.append(rewrite)
        self.partitions.update(rewrite.partitions)
        self.frame_partitions.update(rewrite.partitions)
        self._count(rewrite.partitions, pending_counts)

    def _count(self, partitions: Iterable[str], pending_counts: Mapping[str, Mapping[str | None, int]] | None) -> None:
        """Notes the caller's counts of a change to ``partitions``' PEL rows, or that they were not counted."""
        if pending_counts is None:
            self.uncounted.update(partitions)
            return
        for partition, owners in pending_counts.items():
            counted = self.counted_pending.setdefault(partition, {})
            for owner, n in owners.items():
                counted[owner] = counted.get(owner, 0) + n

    def set_update(self, update: Any, *partitions: str) -> None:
        """Commits ``update`` (a ``merge_commit.InPlaceUpdate``) instead of a MERGE, over ``partitions``."""
        self.update = update
        self.partitions.update(partitions)
        self.uncounted.update(partitions)

    @property
    def empty(self) -> bool:
        bulk = self.frames or self.appends or self.removals or self.rewrites
        return not (self.writes or bulk) and self.update is None


# From this many partitions a plan of head rows only joins as a bulk plan (``is_heads_in_bulk``): at 200
# (create_groups of 100 groups) both ways took the same time, the bulk way in 13 Spark jobs against 6;
# at 2,000 the bulk way was 0.2-0.3 s faster, at 6,000 0.6-1.5 s.
HEADS_IN_BULK_FROM = 1_000


def is_heads_in_bulk(plan: Plan) -> bool:
    """True when ``plan``'s rows are heads and consumers of ``HEADS_IN_BULK_FROM`` partitions or more
    (``create_groups``, a fleet recovery round's new consumers): a commit of files on a classic session
    (engine/file_commit.py), else its MERGE runs as a bulk plan's (engine/merge_commit.py).

    A command's few rows join in one task with adaptive execution and broadcasts off (``small``), which
    saves Spark jobs; 20,000 head rows so joined took 5.4-6.8 s against 3.7-4.9 s as a bulk plan
    (create_groups of 10,000 groups, CHANGELOG.md, "Heads in bulk as a bulk plan"). Entries and PEL rows
    keep the one task, which writes them back ID-ordered (``_one_shuffle_partition``); head files are read
    by partition, not range.
    """
    return (
        len(plan.partitions) >= HEADS_IN_BULK_FROM
        and not (plan.frames or plan.appends or plan.removals or plan.rewrites or plan.bounds)
        and all(write.row.get(C.ROW_KIND) in APART_KINDS for write in plan.writes)
    )

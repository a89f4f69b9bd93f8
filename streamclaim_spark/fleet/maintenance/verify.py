"""``verify_counts``: every group's kept pending counts checked against a recount, and repaired in one commit.

What ``streamclaim-maintain --verify`` and ``StreamStore.verify_counts`` run. The check
(state/count_check.py) recounts every PEL of one snapshot in one Spark job and lists each count of a
group claiming exact counts (``counted_version`` = ``version``) that differs. The repair is one command
like any writer's (``Runner.transact``): on a fresh snapshot it checks again and writes, for every wrong
group, its head (guarded on the version it read, bumped, ``counted_version`` the new version, the
recounted size) and each wrong consumer row, all in one commit; a writer that changed one of those
groups meanwhile makes it lose its race and run again, recount included. A group whose PEL holds
entries of an owner with no consumer row keeps no count that could hold them: the repair leaves its
counts behind (``counted_version`` null), and readers recount it (docs/DESIGN.md, "Kept counts").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from streamclaim_spark.core.model import ConsumerMeta, Write, consumer_row
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.engine.writes import put_group
from streamclaim_spark.state.count_check import CountCheck, CountMismatch, WrongGroup, check_counts

log = logging.getLogger("streamclaim_spark.maintenance")

# The repair's commit, as DESCRIBE HISTORY's userMetadata names it (with the transaction's token).
REPAIR_OPERATION = "REPAIR COUNTS"


@dataclass(frozen=True)
class CountReport:
    """A check of the kept counts at one table version: how many groups claim exact counts (checked) and
    how many leave them to a recount, each count that differs, and what the repair (if asked) committed."""

    store: str
    version: int | None
    checked: int
    uncounted: int
    mismatches: tuple[CountMismatch, ...]
    repair: bool = False
    repaired_version: int | None = None  # the repair's commit; None: nothing to repair, or not asked
    attempts: int = 0  # the repair's attempts: more than 1 after a lost race
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "store": self.store,
            "version": self.version,
            "groups_checked": self.checked,
            "groups_uncounted": self.uncounted,
            "mismatches": [mismatch.to_json() for mismatch in self.mismatches],
            "repair": self.repair,
            "repaired": self.repair and bool(self.mismatches) and self.repaired_version is not None,
            "repaired_version": self.repaired_version,
            "repair_attempts": self.attempts,
            "seconds": round(self.seconds, 3),
        }


def verify_counts(
    runner: Runner, store_path: str, *, repair: bool = False, clock: Callable[[], float] = time.time
) -> CountReport:
    """Checks every group's kept counts against a recount of the store at ``store_path``; with ``repair``,
    rewrites the wrong ones in one guarded commit (re-run, recount included, after a lost race).

    The report lists the mismatches the committed attempt found (the check alone: the newest version's);
    each is also logged as a warning.
    """
    started = clock()
    if repair:
        check = runner.transact(REPAIR_OPERATION, _repairing)
        repaired_version, attempts = runner.last_commit_version, runner.last_attempts
    else:
        check = check_counts(runner.snapshot())
        repaired_version, attempts = None, 0
    mismatches = tuple(check.mismatches)
    for mismatch in mismatches:
        log.warning("kept count differs from a recount: %s", mismatch.describe())
    log.info(
        "kept counts at version %s: %d group(s) checked, %d uncounted, %d count(s) differ%s",
        check.version,
        check.checked,
        check.uncounted,
        len(mismatches),
        f"; repaired in version {repaired_version}" if repaired_version is not None else "",
    )
    return CountReport(
        store_path,
        check.version,
        check.checked,
        check.uncounted,
        mismatches,
        repair=repair,
        repaired_version=repaired_version,
        attempts=attempts,
        seconds=clock() - started,
    )


def _repairing(ctx: Context) -> CountCheck:
    """One attempt of the repair: the check on this attempt's snapshot, and the writes that correct it."""
    check = check_counts(ctx.snapshot)
    plan_repair(ctx, check.wrong)
    return check


def plan_repair(ctx: Context, wrong: Sequence[WrongGroup]) -> None:
    """Adds to ``ctx``'s plan the writes that make each wrong group's kept counts the recount's: its head
    guarded on the version read, with the recounted size and ``counted_version`` the version it writes,
    and its consumer rows whose count differs; a group with entries of an owner that has no consumer row
    gets its counts left behind instead. ``Plan.recounted`` carries the recount to the commit of files,
    whose count rules (core/count_rules.py) otherwise count from the stored, wrong, counts."""
    if not wrong:
        return
    ctx.snapshot.all_streams()  # every head in one read: the groups' below come from it
    for group in wrong:
        head = ctx.snapshot.group(group.stream, group.group)
        assert head is not None, "the check read this head from the same snapshot"
        if any(not consumer.has_row for consumer in group.consumers):
            put_group(ctx, head, replace(head, pending_count=None, counted_version=None))
            ctx.plan.uncounted.add(group.partition)
            continue
        put_group(ctx, head, replace(head, pending_count=group.counted, counted_version=head.version + 1))
        for consumer in group.consumers:
            if consumer.kept != consumer.counted:
                assert consumer.seen_time is not None and consumer.active_time is not None  # a stored row's
                meta = ConsumerMeta(consumer.name, consumer.seen_time, consumer.active_time, consumer.counted)
                ctx.plan.add(Write(consumer_row(group.stream, group.group, meta, ctx.txn)))
        ctx.plan.recounted[group.partition] = group.owners()

"""The recovery run: claim every stale pending entry of the selected groups and dead-letter the poison ones.

A run costs the same few commits whatever the number of groups (docs/RECOVERY.md):

1. **Read** every stream and group head (one query; the first claim round takes them from this
   snapshot when no commit came between), and every group's poison entries — stale and delivered more
   than ``max_deliveries`` times — in one query that Delta answers from file statistics when there are none.
2. **Copy** every poison entry of every group to ``dead_letters`` (one blind append; dead_letters.py).
3. **Classify and commit**: one aggregation over every pending entry of every group (fresh, copied,
   poison, to claim, to purge: the per-group numbers; plan.py), then one guarded MERGE over the groups
   with something to write: the copied entries that are still exactly as copied leave their PEL, every
   other stale entry is claimed (to the recovery consumer, or spread over its own group's live
   consumers), entries of deleted stream entries are purged. With ``assign="consumer"``, groups with
   nothing to acknowledge or purge (at least ``in_place_round.MIN_CLAIMS`` claims between them) are
   claimed in place: when every changed group is such a group, on a classic session, the round is one
   commit of files (their PEL files rewritten, heads and recovery consumers beside them); else they are
   left out of the MERGE, which creates the recovery consumer where they lack it, and claimed by an
   in-place UPDATE right after it (in_place_round.py).
4. **Withdraw** the copies of entries that changed before step 3 (one MERGE, only when there are any),
   and append one row to ``recovery_runs``.

A step-3 commit that loses a race to a consumer or another run does not start over for every group: the
groups whose heads changed are set aside into a later, smaller commit, and after ``MAX_CLAIM_ROUNDS``
commits the ones still contended are reported as skipped (rounds.py). A dry run computes step 3's numbers
and writes nothing; it also checks the selected groups' kept pending counts against a recount
(state/count_check.py) and reports each that differs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from pyspark.sql import DataFrame

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.object_store import WriterSafety
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.policies import policy_for
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import RecoveryFailedError, RecoverySelectionError
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair, tally
from streamclaim_spark.fleet.claims.selection import StaleSelection, selected_groups
from streamclaim_spark.fleet.recovery.dead_letters import (
    Copies,
    copy_dead_letters,
    reasons_of,
    run_copies,
    withdraw_copies,
)
from streamclaim_spark.fleet.recovery.plan import (
    ACTION,
    NEW_OWNER,
    POISON,
    classify,
    live_owners,
)
from streamclaim_spark.fleet.recovery.report import (
    FAILED,
    PARTIAL,
    GroupReport,
    RecoveryReport,
    describe,
    group_report,
    in_name_order,
    log_scan,
    warn_without_live_consumers,
)
from streamclaim_spark.fleet.recovery.rounds import MAX_CLAIM_ROUNDS, claim_rounds
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.columns import by_bytes
from streamclaim_spark.state.companion_schema import RECOVERY_RUNS_SCHEMA
from streamclaim_spark.state.count_check import CountMismatch, check_counts
from streamclaim_spark.state.snapshot import Snapshot
from streamclaim_spark.state.tables import ensure_recovery_runs_table

# The run's log lines name the job, not the module that writes them (docs/RECOVERY.md shows them).
log = logging.getLogger("streamclaim_spark.fleet.recovery")

# A failed run's error text is kept in recovery_runs; Java stack traces beyond this are cut.
_MAX_ERROR_CHARS = 2_000


class RecoveryStore(Protocol):
    """What a run needs of a store (a ``StreamStore`` has it): its root path, runner and writer safety."""

    @property
    def path(self) -> str: ...

    @property
    def runner(self) -> Runner: ...

    @property
    def safety(self) -> WriterSafety: ...


def recover_stale(store: RecoveryStore, options: RecoveryOptions, *, run_id: str | None = None) -> RecoveryReport:
    """Runs recovery over every (stream, group) the options select, in a constant number of commits.

    Args:
        store: The store (a ``StreamStore``, or anything with its ``path``, ``runner`` and ``safety``).
        options: What to select and how to recover it (``RecoveryOptions``).
        run_id: Identifier written to ``recovery_runs`` and ``dead_letters`` (default a random UUID).

    Returns:
        The run's report; it is also in ``recovery_runs`` unless ``options.dry_run``. Its status is
        ``partial`` when some groups stayed contended through every claim commit (they are skipped).

    Raises:
        RecoverySelectionError: No group matches the patterns (nothing is written).
        RecoveryFailedError: The run stopped on an error; (unless a dry run) the failed run is recorded
            with its error and the groups whose claim commit had landed.

    Example (every entry of ``orders`` pending for any time, to the consumer ``recovery``)::

        >>> from streamclaim_spark.fleet.recovery import RecoveryOptions, recover_stale
        >>> report = recover_stale(store, RecoveryOptions(min_idle_ms=0, streams=("orders",)))
        >>> report.status, report.totals["claimed"]
        ('succeeded', 1)
    """
    runner, path = store.runner, store.path
    run_id = run_id or uuid.uuid4().hex
    started = runner.clock()
    action = "dry run" if options.dry_run else "run"
    report = RecoveryReport(run_id, path, options, started, started, writer_mode=store.safety.mode)
    done: dict[Pair, GroupReport] = {}
    try:
        snapshot = runner.snapshot()  # the selection's, and the run's first read of the fleet
        groups = select_groups(runner, options, snapshot)
        log.info(
            "recovery %s %s on %s: selection read, %d group(s) on %d stream(s) match streams=%s groups=%s",
            action,
            run_id,
            path,
            len(groups),
            len({g.key for g in groups}),
            list(options.streams),
            list(options.groups),
            extra=C.PROGRESS,
        )
        reasons = _recover(runner, path, snapshot, options, run_id, [(g.key, g.name) for g in groups], done)
        mismatches = _count_mismatches(snapshot, groups) if options.dry_run else None
    except RecoverySelectionError:
        raise
    except Exception as error:
        failed = _failed(runner, path, report, done, error)
        raise RecoveryFailedError(f"recovery run {failed.run_id} failed: {failed.error}", failed) from error
    reports = in_name_order(done)
    report = _finished(
        replace(
            report,
            ended_at_ms=runner.clock(),
            groups=reports,
            dead_letter_reasons=reasons,
            count_mismatches=mismatches,
        )
    )
    for group in reports:
        log.info("%s", describe(group, policy_for(options, group.stream, group.group)[1]))
    if not options.dry_run:
        report = _record(runner, path, report)
    log.info("recovery %s %s done (%s): %s", action, run_id, report.status, report.totals, extra=C.PROGRESS)
    return report


def _failed(
    runner: Runner, path: str, report: RecoveryReport, done: dict[Pair, GroupReport], error: Exception
) -> RecoveryReport:
    """The report of a run stopped by ``error``, recorded in ``recovery_runs`` (unless a dry run)."""
    options, run_id = report.options, report.run_id
    action = "dry run" if options.dry_run else "run"
    message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_CHARS]
    failed = replace(report, ended_at_ms=runner.clock(), groups=in_name_order(done), status=FAILED, error=message)
    log.error("recovery %s %s failed after %d group(s): %s", action, run_id, len(done), message)
    if not options.dry_run:
        try:
            failed = _record(runner, path, failed)
        except Exception:
            log.exception("could not record failed run %s in recovery_runs", run_id)
    return failed


def _finished(report: RecoveryReport) -> RecoveryReport:
    """The report of a run that ended, ``partial`` when some groups were skipped."""
    skipped = [g for g in report.groups if g.skipped]
    if not skipped:
        return report
    names = ", ".join(f"{g.stream}/{g.group}" for g in skipped[:10])
    return replace(
        report,
        status=PARTIAL,
        error=f"{len(skipped)} group(s) skipped: changed by others during each of {MAX_CLAIM_ROUNDS} claim "
        f"commits; run again to recover them: {names}"[:_MAX_ERROR_CHARS],
    )


def select_groups(runner: Runner, options: RecoveryOptions, snapshot: Snapshot | None = None) -> list[GroupMeta]:
    """The consumer groups whose stream and group names match the options, in bytewise name order, as
    ``snapshot`` shows them (default: the store's newest version).

    Raises RecoverySelectionError when none does: a pattern that matches nothing is a mistake a
    scheduled job should report, not a run that silently does nothing.
    """
    selection = StaleSelection(options.min_idle_ms, streams=options.streams, groups=options.groups)
    context = Context(snapshot or runner.snapshot(), now=runner.clock(), txn="")
    groups = selected_groups(context, selection)
    if not groups:
        streams = context.snapshot.all_streams()
        raise RecoverySelectionError(
            f"streams={list(options.streams)} groups={list(options.groups)}: no consumer group matches "
            f"(the store has {sum(len(s.groups) for s in streams)} group(s) on {len(streams)} stream(s)); "
            "fix the patterns (--streams/--groups, jobs.recover_stale.streams/groups)"
        )
    return sorted(groups, key=lambda g: (by_bytes(g.key), by_bytes(g.name)))


def _recover(
    runner: Runner,
    path: str,
    snapshot: Snapshot,
    options: RecoveryOptions,
    run_id: str,
    pairs: list[Pair],
    done: dict[Pair, GroupReport],
) -> dict[str, int]:
    """Steps 1–4 of the module docstring on the selection's ``snapshot``; fills ``done`` with each
    group's report as its commit lands.

    Returns the run's dead letters counted by reason (none in a dry run, which copies nothing).
    """
    now = runner.clock()
    rules = GroupRules.of(options, pairs)
    _log_policies(rules)
    owners_frame, owners = live_owners(snapshot, rules, now)
    if options.dry_run:
        snapshot.all_streams()  # the heads classify reads (one query for the fleet)
        tallies = tally(classify(snapshot, pairs, rules, now, owners_frame, copies=None), ACTION, NEW_OWNER)
        log_scan(tallies, len(pairs))
        warn_without_live_consumers(tallies, owners, rules)
        for pair in pairs:
            group_tally = tallies.get(pair, GroupTally())
            done[pair] = group_report(pair, group_tally, rules, owners, dead_lettered=group_tally.outcomes[POISON])
        return {}
    copies: DataFrame | None = None
    copied = Copies()
    if rules.any(lambda rule: rule.dead_letter):
        copied = copy_dead_letters(runner, path, snapshot, pairs, rules, now, run_id)
        if copied.counts:
            copies = run_copies(runner, path, run_id)
    withdrawals = claim_rounds(runner, rules, pairs, owners_frame, owners, copies, copied.counts, done, snapshot)
    if copies is not None and withdrawals:
        withdraw_copies(runner, path, run_id, withdrawals)
        return reasons_of(runner, path, run_id)  # the copies left, by reason
    return copied.reasons()


def _count_mismatches(snapshot: Snapshot, groups: Sequence[GroupMeta]) -> tuple[CountMismatch, ...]:
    """A dry run's check of the selected groups' kept counts against a recount (state/count_check.py):
    each that differs is logged and reported; repairing is ``streamclaim-maintain --verify --repair``'s."""
    check = check_counts(snapshot, [group_partition(group.key, group.name) for group in groups])
    for mismatch in check.mismatches:
        log.warning(
            "kept count differs from a recount: %s (streamclaim-maintain --verify --repair)", mismatch.describe()
        )
    return tuple(check.mismatches)


def _log_policies(rules: GroupRules) -> None:
    """One line per policy: how many of the selected groups it recovers (none is worth a warning)."""
    for number, policy in enumerate(rules.options.policies, 1):
        groups = sum(1 for pair in rules.by_pair if rules.policy(pair) == number)
        if groups:
            log.info("%s recovers %d group(s)", policy.name, groups)
        else:
            log.warning("%s names none of the selected groups (or an earlier policy takes them)", policy.name)


def _record(runner: Runner, path: str, report: RecoveryReport) -> RecoveryReport:
    """Appends the run's row to the store's ``recovery_runs`` (a blind append: it never conflicts)."""
    session = runner.session()
    table = ensure_recovery_runs_table(session, path)
    frame = session.createDataFrame([report.run_row()], RECOVERY_RUNS_SCHEMA)
    # mergeSchema: a run log made before a column was added (writer_mode) gains it; older rows hold null.
    (
        frame.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("userMetadata", f"RECOVERY RUN {report.run_id}")
        .save(table)
    )
    return replace(report, recorded=True)

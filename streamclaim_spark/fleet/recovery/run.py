"""The recovery run: claim every stale pending entry of the selected groups and dead-letter the poison ones.

A run costs the same few commits whatever the number of groups (docs/RECOVERY.md):

1. **Read** the selected group heads (one query), and every group's poison entries — stale and
   delivered more than ``max_deliveries`` times — in one query that Delta answers from file statistics
   when there are none.
2. **Copy** every poison entry of every group to ``dead_letters`` (one blind append; dead_letters.py).
3. **Classify and commit**: one aggregation over every pending entry of every group (fresh, copied,
   poison, to claim, to purge: the per-group numbers; plan.py), then one guarded MERGE over the groups
   with something to write: the copied entries that are still exactly as copied leave their PEL, every
   other stale entry is claimed (to the recovery consumer, or spread over its own group's live
   consumers), entries of deleted stream entries are purged. With ``assign="consumer"``, groups with
   nothing to acknowledge or purge (at least ``in_place.MIN_CLAIMS`` claims between them) are left out
   of the MERGE and claimed by an in-place UPDATE right after it (in_place.py); the MERGE creates the
   recovery consumer where they lack it.
4. **Withdraw** the copies of entries that changed before step 3 (one MERGE, only when there are any),
   and append one row to ``recovery_runs``.

A step-3 commit that loses a race to a consumer or another run does not start over for every group: the
groups whose heads changed are set aside into a later, smaller commit, and after ``MAX_CLAIM_ROUNDS``
commits the ones still contended are reported as skipped. A dry run computes step 3's numbers and
writes nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyspark.sql import DataFrame

from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.object_store import WriterSafety
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.retries import ConflictRetriesExhaustedError, RetryPolicy
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.engine.transaction import commit_metrics
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair, tally
from streamclaim_spark.fleet.claims.selection import StaleSelection, selected_groups
from streamclaim_spark.fleet.recovery.dead_letters import (
    copy_dead_letters,
    pairs_only,
    run_copies,
    unmatched_copies,
    withdraw_copies,
)
from streamclaim_spark.fleet.recovery.in_place_round import claim_update, claims_only, missing_consumers
from streamclaim_spark.fleet.recovery.plan import (
    ACK,
    ACTION,
    CLAIM,
    NEW_OWNER,
    POISON,
    PURGE,
    changes,
    classify,
    consumer_source,
    head_source,
    live_owners,
    pending_source,
)
from streamclaim_spark.fleet.recovery.report import (
    FAILED,
    PARTIAL,
    GroupReport,
    RecoveryFailedError,
    RecoveryReport,
    RecoverySelectionError,
    describe,
    group_report,
    in_name_order,
    log_scan,
    warn_without_live_consumers,
)
from streamclaim_spark.state.columns import by_bytes
from streamclaim_spark.state.schema import in_partitions
from streamclaim_spark.state.tables import RECOVERY_RUNS_SCHEMA, ensure_recovery_runs_table

# The run's log lines name the job, not the module that writes them (docs/RECOVERY.md shows them).
log = logging.getLogger("streamclaim_spark.fleet.recovery")

# Claim commits per run at most: the first over every group, the next over the groups set aside
# because a consumer or another run changed them while the previous commit was being decided.
MAX_CLAIM_ROUNDS = 6
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


@dataclass
class _Round:
    """What one committed claim round decided and where: per-group tallies, read and commit versions."""

    tallies: dict[Pair, GroupTally]
    read_version: int
    version: int | None
    # The groups the round claims in place (recovery/in_place.py), with the heads its UPDATE guards on
    # as read, and the clock reading their classification used; the round's MERGE applies the others.
    in_place: dict[Pair, GroupMeta] = field(default_factory=dict)
    now: int = 0
    consumers_added: list[Pair] = field(default_factory=list)  # in-place groups whose head the MERGE bumped


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
    """
    runner, path = store.runner, store.path
    run_id = run_id or uuid.uuid4().hex
    started = runner.clock()
    action = "dry run" if options.dry_run else "run"
    report = RecoveryReport(run_id, path, options, started, started, writer_mode=store.safety.mode)
    done: dict[Pair, GroupReport] = {}
    try:
        groups = select_groups(runner, options)
        log.info(
            "recovery %s %s on %s: selection read, %d group(s) on %d stream(s) match streams=%s groups=%s",
            action,
            run_id,
            path,
            len(groups),
            len({g.key for g in groups}),
            list(options.streams),
            list(options.groups),
        )
        _recover(runner, path, options, run_id, [(g.key, g.name) for g in groups], done)
    except RecoverySelectionError:
        raise
    except Exception as error:
        message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_CHARS]
        failed = replace(report, ended_at_ms=runner.clock(), groups=in_name_order(done), status=FAILED, error=message)
        log.error("recovery %s %s failed after %d group(s): %s", action, run_id, len(done), message)
        if not options.dry_run:
            try:
                failed = _record(runner, path, failed)
            except Exception:
                log.exception("could not record failed run %s in recovery_runs", run_id)
        raise RecoveryFailedError(failed) from error
    reports = in_name_order(done)
    skipped = [g for g in reports if g.skipped]
    report = replace(report, ended_at_ms=runner.clock(), groups=reports)
    if skipped:
        names = ", ".join(f"{g.stream}/{g.group}" for g in skipped[:10])
        report = replace(
            report,
            status=PARTIAL,
            error=f"{len(skipped)} group(s) skipped: changed by others during each of {MAX_CLAIM_ROUNDS} claim "
            f"commits; run again to recover them: {names}"[:_MAX_ERROR_CHARS],
        )
    for group in reports:
        log.info("%s", describe(group, options))
    if not options.dry_run:
        report = _record(runner, path, report)
    log.info("recovery %s %s done (%s): %s", action, run_id, report.status, report.totals)
    return report


def select_groups(runner: Runner, options: RecoveryOptions) -> list[GroupMeta]:
    """The consumer groups whose stream and group names match the options, in bytewise name order.

    Raises RecoverySelectionError when none does: a pattern that matches nothing is a mistake a
    scheduled job should report, not a run that silently does nothing.
    """
    selection = StaleSelection(options.min_idle_ms, streams=options.streams, groups=options.groups)
    context = Context(runner.snapshot(), now=runner.clock(), txn="")
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
    runner: Runner, path: str, options: RecoveryOptions, run_id: str, pairs: list[Pair], done: dict[Pair, GroupReport]
) -> None:
    """Steps 1–4 of the module docstring; fills ``done`` with each group's report as its commit lands."""
    now = runner.clock()
    snapshot = runner.snapshot()
    owners_frame, owners = live_owners(snapshot, pairs, options, now)
    if options.dry_run:
        tallies = tally(classify(snapshot, pairs, options, now, owners_frame, copies=None), ACTION, NEW_OWNER)
        log_scan(tallies, len(pairs))
        warn_without_live_consumers(tallies, owners, options)
        for pair in pairs:
            group_tally = tallies.get(pair, GroupTally())
            done[pair] = group_report(pair, group_tally, options, owners, dead_lettered=group_tally.outcomes[POISON])
        return
    copies: DataFrame | None = None
    copied: dict[Pair, int] = {}
    if options.dead_letter:
        copied = copy_dead_letters(runner, path, snapshot, pairs, options, now, run_id)
        if copied:
            copies = run_copies(runner, path, run_id)
    withdrawals = _claim_rounds(runner, options, pairs, owners_frame, owners, copies, copied, done)
    if copies is not None and withdrawals:
        withdraw_copies(runner, path, run_id, withdrawals)


def _claim_rounds(
    runner: Runner,
    options: RecoveryOptions,
    pairs: list[Pair],
    owners_frame: DataFrame | None,
    owners: dict[Pair, tuple[str, ...]],
    copies: DataFrame | None,
    copied: dict[Pair, int],
    done: dict[Pair, GroupReport],
) -> list[DataFrame]:
    """Step 3 in at most MAX_CLAIM_ROUNDS rounds; returns frames of the copies to withdraw.

    Each round classifies its groups on a fresh snapshot and commits one MERGE over those with
    something to write, then (``_claim_in_place``) one UPDATE over those that only claim to the
    recovery consumer. When a commit loses, the groups it planned to write whose head moved meanwhile
    are set aside for a later round and the others go again at once; if all moved, the same groups go
    again after a backoff. Groups whose commit landed are done, whatever happens to the round's other commit.
    """
    remaining, deferred = list(pairs), list[Pair]()
    lost: Counter[Pair] = Counter()
    last_seen: dict[Pair, GroupTally] = {}
    withdrawals: list[DataFrame] = []
    one_attempt = RetryPolicy(max_attempts=1)

    def land(landed: list[Pair], outcome: _Round) -> None:
        """Reports the groups whose commit landed (and those with nothing to write) as done."""
        for pair in landed:
            group_tally = outcome.tallies.get(pair, GroupTally())
            done[pair] = replace(
                group_report(pair, group_tally, options, owners, dead_lettered=group_tally.outcomes[ACK]),
                dead_letters_withdrawn=copied.get(pair, 0) - group_tally.outcomes[ACK],
                conflicts_retried=lost[pair],
            )
        unmatched = [pair for pair in landed if done[pair].dead_letters_withdrawn]
        if copies is not None and unmatched:
            withdrawals.append(unmatched_copies(runner, copies, unmatched, outcome.read_version))

    def lose(error: ConflictRetriesExhaustedError, planned: dict[Pair, int], round_number: int) -> list[Pair]:
        """Notes a lost commit over ``planned`` and returns the groups that go again in the next round."""
        changed = _changed_groups(runner, planned)
        lost.update(changed or list(planned))
        set_aside = 0 < len(changed) < len(planned)
        log.warning(
            "claim commit %d over %d group(s) lost a race (%s); %d of them changed meanwhile%s",
            round_number,
            len(planned),
            type(error.last_race).__name__,
            len(changed),
            ", set aside for a later commit" if set_aside else "; trying them again",
        )
        if set_aside:
            deferred.extend(changed)
            return [pair for pair in planned if pair not in set(changed)]
        time.sleep(runner.retry_policy.delay(round_number))
        return list(planned)

    for round_number in range(1, MAX_CLAIM_ROUNDS + 1):
        if not remaining:
            remaining, deferred = deferred, []
        if not remaining:
            break
        planned: dict[Pair, int] = {}
        batch = list(remaining)

        def decide(ctx: Context, batch: list[Pair] = batch, planned: dict[Pair, int] = planned) -> _Round:
            outcome = _decide_round(ctx, batch, options, owners_frame, copies, planned)
            last_seen.update(outcome.tallies)
            return outcome

        try:
            outcome = runner.transact("RECOVER", decide, one_attempt)
        except ConflictRetriesExhaustedError as error:
            unplanned = [pair for pair in remaining if pair not in planned]  # nothing to write: go again as they are
            remaining = lose(error, planned, round_number) + unplanned
            continue
        outcome.version = runner.last_commit_version
        # The MERGE: the other groups' changes, plus a head and a consumer row per in-place group lacking one.
        merged = [pair for pair in remaining if pair not in outcome.in_place]
        _check_commit(runner, outcome.version, outcome, merged, extra=2 * len(outcome.consumers_added))
        if round_number == 1:
            log_scan(outcome.tallies, len(remaining))
            warn_without_live_consumers(outcome.tallies, owners, options)
        land(merged, outcome)
        if outcome.in_place:
            in_place = {pair: planned[pair] for pair in outcome.in_place}
            try:
                outcome.version = _claim_in_place(runner, outcome, options, in_place, one_attempt)
            except ConflictRetriesExhaustedError as error:
                remaining = lose(error, in_place, round_number)
                continue
            _check_commit(runner, outcome.version, outcome, list(outcome.in_place))
            land(list(outcome.in_place), outcome)
        totals: Counter[object] = sum((t.outcomes for t in outcome.tallies.values()), Counter())
        log.info(
            "claim committed (state version %s, commit %d of at most %d): %d group(s) written, %d dead letter(s) "
            "acknowledged, %d claimed, %d purged",
            outcome.version,
            round_number,
            MAX_CLAIM_ROUNDS,
            sum(1 for t in outcome.tallies.values() if changes(t)),
            totals[ACK],
            totals[CLAIM],
            totals[PURGE],
        )
        remaining = []
    for pair in remaining + deferred:
        done[pair] = replace(
            group_report(pair, last_seen.get(pair, GroupTally()), options, owners, dead_lettered=0),
            claimed=0,
            purged=0,
            dead_letters_withdrawn=copied.get(pair, 0),
            conflicts_retried=lost[pair],
            owners=(),
            skipped=True,
        )
        if copies is not None and copied.get(pair):
            withdrawals.append(pairs_only(runner.session(), copies, [pair]))
    return withdrawals


def _decide_round(
    ctx: Context,
    pairs: list[Pair],
    options: RecoveryOptions,
    owners_frame: DataFrame | None,
    copies: DataFrame | None,
    planned: dict[Pair, int],
) -> _Round:
    """Classifies the groups' PELs on the context's snapshot and plans the one MERGE that applies it.

    Groups that only claim to the recovery consumer (``claims_only``) are left out of the MERGE: it only
    creates the consumer where they lack it, and the round returns their heads for ``_claim_in_place``'s
    UPDATE. ``planned`` receives the head version of every group the round writes (and guards).
    """
    read_version = ctx.snapshot.version
    assert read_version is not None, "a transaction's snapshot is pinned to a version"
    ctx.snapshot.all_streams()
    heads = {pair: ctx.snapshot.group(*pair) for pair in pairs}
    present = [pair for pair, head in heads.items() if head is not None]
    if not present:
        return _Round({}, read_version, None)
    classified = classify(ctx.snapshot, present, options, ctx.now, owners_frame, copies)
    tallies = tally(classified, ACTION, NEW_OWNER)
    changed = [pair for pair in present if changes(tallies.get(pair, GroupTally()))]
    for pair in changed:
        head = heads[pair]
        assert head is not None
        planned[pair] = head.version
    in_place = set(claims_only(options, tallies, changed))
    merged = [pair for pair in changed if pair not in in_place]
    if merged:
        partitions = [group_partition(*pair) for pair in merged]
        rows = classified
        if in_place:  # the shorter list of partitions names which rows the MERGE takes
            others = [group_partition(*pair) for pair in sorted(in_place)]
            rows = rows.where(in_partitions(partitions) if len(merged) <= len(others) else ~in_partitions(others))
        source = (
            pending_source(rows, ctx, ctx.now - options.min_idle_ms, options.assign == "nack")
            .unionByName(head_source(ctx.snapshot, partitions, ctx.txn))
            .unionByName(consumer_source(rows, ctx))
        )
        ctx.plan.add_frame(source, *partitions)
    if not in_place:
        return _Round(tallies, read_version, None)
    # The same commit creates the recovery consumer where an in-place group lacks it: an UPDATE cannot.
    decided = {pair: head for pair in changed if pair in in_place and (head := heads[pair]) is not None}
    missing = missing_consumers(ctx.snapshot, sorted(in_place), options.consumer)
    for pair in missing:
        put_group(ctx, decided[pair], decided[pair])
        touch_consumer(ctx, *pair, options.consumer)
    return _Round(tallies, read_version, None, in_place=decided, now=ctx.now, consumers_added=missing)


def _claim_in_place(
    runner: Runner, outcome: _Round, options: RecoveryOptions, planned: dict[Pair, int], policy: RetryPolicy
) -> int | None:
    """Commits the UPDATE of a round's in-place groups, after its MERGE; returns the UPDATE's version.

    The MERGE was guarded on the heads as read and bumped the heads of the groups it gave a consumer,
    so the UPDATE guards on those one higher; ``planned`` follows, for a lost race's report of what moved.
    """
    heads = dict(outcome.in_place)
    for pair in outcome.consumers_added:
        heads[pair] = replace(heads[pair], version=heads[pair].version + 1)
        planned[pair] = heads[pair].version
    partitions = [group_partition(*pair) for pair in sorted(heads)]

    def rewrite(ctx: Context) -> None:
        ctx.plan.set_update(claim_update(heads, options, outcome.now, ctx.txn), *partitions)

    runner.transact("RECOVER", rewrite, policy)
    return runner.last_commit_version


def _check_commit(runner: Runner, version: int | None, outcome: _Round, pairs: list[Pair], extra: int = 0) -> None:
    """Checks a commit's metrics against what the round decided for ``pairs`` (and ``extra`` rows written).

    The group-head guard makes a commit apply exactly what was decided on the snapshot; this check
    makes a disagreement (a bug, not a race) fail the run loudly instead of reporting wrong numbers.
    """
    if version is None:
        return
    metrics = commit_metrics(runner.session(), runner.state_path, version)
    tallies = [outcome.tallies[pair] for pair in pairs if pair in outcome.tallies]
    deleted = sum(t.outcomes[ACK] + t.outcomes[PURGE] for t in tallies)
    # Updated or inserted: claimed rows, one head per changed group, one consumer row per (group, owner).
    written = extra + sum(t.outcomes[CLAIM] + (1 if changes(t) else 0) + len(t.owners) for t in tallies)
    # A MERGE's metrics, or an in-place round's UPDATE's (numUpdatedRows; on Spark Connect it is a MERGE).
    committed = (
        metrics.get("numTargetRowsDeleted", 0),
        metrics.get("numUpdatedRows", metrics.get("numTargetRowsUpdated", 0)) + metrics.get("numTargetRowsInserted", 0),
    )
    if committed != (deleted, written):
        raise RuntimeError(
            f"claim commit {version} deleted {committed[0]} and wrote {committed[1]} rows, "
            f"but the run decided on {deleted} and {written}: the per-group report would be wrong"
        )


def _changed_groups(runner: Runner, planned: dict[Pair, int]) -> list[Pair]:
    """The planned groups whose head moved since a lost round read it (re-read in one query)."""
    snapshot = runner.snapshot()
    snapshot.all_streams()
    changed = []
    for pair, version in planned.items():
        head = snapshot.group(*pair)
        if head is None or head.version != version:
            changed.append(pair)
    return changed


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

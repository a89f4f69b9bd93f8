"""Step 3 of a recovery run (run.py): the claim commits, in rounds that set contended groups aside.

Each round classifies its groups on a fresh snapshot and commits one MERGE over those with something to
write, then one UPDATE over those that only claim to the recovery consumer (in_place_round.py). A commit
that loses a race to a consumer or another run does not start over for every group: the groups whose
heads changed are set aside into a later, smaller commit, and after ``MAX_CLAIM_ROUNDS`` commits the
ones still contended are reported as skipped.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.retries import RetryPolicy
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.engine.transaction import rows_changed
from streamclaim_spark.engine.writes import put_group, touch_consumer
from streamclaim_spark.errors import CommitMismatchError, ConflictRetriesExhaustedError
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair, tally
from streamclaim_spark.fleet.claims.staleness import idle_cutoff
from streamclaim_spark.fleet.recovery.dead_letters import pairs_only, unmatched_copies
from streamclaim_spark.fleet.recovery.in_place_round import claim_rewrite, claim_update, claims_only, missing_consumers
from streamclaim_spark.fleet.recovery.plan import (
    ACK,
    ACTION,
    CLAIM,
    NEW_OWNER,
    PURGE,
    changes,
    classify,
    consumer_source,
    head_source,
    nacking,
    pending_source,
)
from streamclaim_spark.fleet.recovery.report import GroupReport, group_report, log_scan, warn_without_live_consumers
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.commit_rows import pending_rows_written
from streamclaim_spark.state.delta_txn import commits_files
from streamclaim_spark.state.schema import in_partitions
from streamclaim_spark.state.snapshot import Snapshot

# The run's log lines name the job, not the module that writes them (docs/RECOVERY.md shows them).
log = logging.getLogger("streamclaim_spark.fleet.recovery")

# Claim commits per run at most: the first over every group, the next over the groups set aside
# because a consumer or another run changed them while the previous commit was being decided.
MAX_CLAIM_ROUNDS = 6


@dataclass
class _Round:
    """What one committed claim round decided and where: per-group tallies, read and commit versions."""

    tallies: dict[Pair, GroupTally]
    read_version: int
    version: int | None
    # The groups the round claims in place (in_place_round.py), with the heads its UPDATE guards on
    # as read, and the clock reading their classification used; the round's MERGE applies the others.
    in_place: dict[Pair, GroupMeta] = field(default_factory=dict)
    now: int = 0
    consumers_added: list[Pair] = field(default_factory=list)  # in-place groups whose head the MERGE bumped
    # The groups the round claimed in its commit of files (when all its groups claim in place), and
    # that commit's token, which the rows it claims carry.
    rewritten: tuple[Pair, ...] = ()
    txn: str = ""


def claim_rounds(
    runner: Runner,
    rules: GroupRules,
    pairs: list[Pair],
    owners_frame: DataFrame | None,
    owners: dict[Pair, tuple[str, ...]],
    copies: DataFrame | None,
    copied: dict[Pair, int],
    done: dict[Pair, GroupReport],
    read: Snapshot | None = None,
) -> list[DataFrame]:
    """Step 3 in at most MAX_CLAIM_ROUNDS rounds; returns frames of the copies to withdraw. A round whose
    snapshot is ``read``'s version takes the heads ``read`` holds instead of reading them again.

    Each round classifies its groups on a fresh snapshot and commits one MERGE over those with
    something to write, then (``_claim_in_place``) one UPDATE over those that only claim to the
    recovery consumer. When a commit loses, the groups it planned to write whose head moved meanwhile
    are set aside for a later round and the others go again at once; if all moved, the same groups go
    again after a backoff. Groups whose commit landed are done, whatever happens to the round's other commit.
    """
    rounds = _ClaimRounds(runner, rules, owners_frame, owners, copies, copied, done, read)
    remaining = list(pairs)
    for round_number in range(1, MAX_CLAIM_ROUNDS + 1):
        if not remaining:
            remaining, rounds.deferred = rounds.deferred, []
        if not remaining:
            break
        remaining = rounds.claim(remaining, round_number)
    for pair in remaining + rounds.deferred:
        rounds.skip(pair)
    return rounds.withdrawals


@dataclass
class _ClaimRounds:
    """What the rounds of one run share: its inputs, and what they learn round after round."""

    runner: Runner
    rules: GroupRules
    owners_frame: DataFrame | None
    owners: dict[Pair, tuple[str, ...]]
    copies: DataFrame | None
    copied: dict[Pair, int]
    done: dict[Pair, GroupReport]
    read: Snapshot | None  # the run's selection: its heads spare a round at its version their query
    deferred: list[Pair] = field(default_factory=list)  # set aside for a later round
    lost: Counter[Pair] = field(default_factory=Counter)  # lost commits per group
    last_seen: dict[Pair, GroupTally] = field(default_factory=dict)
    withdrawals: list[DataFrame] = field(default_factory=list)
    one_attempt: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_attempts=1))

    def claim(self, remaining: list[Pair], round_number: int) -> list[Pair]:
        """One round over ``remaining``: its MERGE, then its UPDATE; returns the groups that go again."""
        planned: dict[Pair, int] = {}
        batch = list(remaining)

        def decide(ctx: Context) -> _Round:
            if self.read is not None:
                ctx.snapshot.adopt_heads(self.read)
            outcome = decide_round(ctx, batch, self.rules, self.owners_frame, self.copies, planned)
            self.last_seen.update(outcome.tallies)
            return outcome

        try:
            outcome = self.runner.transact("RECOVER", decide, self.one_attempt)
        except ConflictRetriesExhaustedError as error:
            unplanned = [pair for pair in remaining if pair not in planned]  # nothing to write: go again as they are
            return self.lose(error, planned, round_number) + unplanned
        outcome.version = self.runner.last_commit_version
        # The MERGE: the other groups' changes, plus a head and a consumer row per in-place group lacking one.
        merged = [pair for pair in remaining if pair not in outcome.in_place]
        _check_commit(self.runner, outcome.version, outcome, merged, extra=2 * len(outcome.consumers_added))
        if round_number == 1:
            log_scan(outcome.tallies, len(remaining))
            warn_without_live_consumers(outcome.tallies, self.owners, self.rules)
        self.land(merged, outcome)
        if outcome.in_place:
            in_place = {pair: planned[pair] for pair in outcome.in_place}
            try:
                outcome.version = _claim_in_place(self.runner, outcome, self.rules, in_place, self.one_attempt)
            except ConflictRetriesExhaustedError as error:
                return self.lose(error, in_place, round_number)
            _check_commit(self.runner, outcome.version, outcome, list(outcome.in_place))
            self.land(list(outcome.in_place), outcome)
        _log_committed(outcome, round_number)
        return []

    def land(self, landed: list[Pair], outcome: _Round) -> None:
        """Reports the groups whose commit landed (and those with nothing to write) as done."""
        for pair in landed:
            group_tally = outcome.tallies.get(pair, GroupTally())
            self.done[pair] = replace(
                group_report(pair, group_tally, self.rules, self.owners, dead_lettered=group_tally.outcomes[ACK]),
                dead_letters_withdrawn=self.copied.get(pair, 0) - group_tally.outcomes[ACK],
                conflicts_retried=self.lost[pair],
            )
        unmatched = [pair for pair in landed if self.done[pair].dead_letters_withdrawn]
        if self.copies is not None and unmatched:
            self.withdrawals.append(unmatched_copies(self.runner, self.copies, unmatched, outcome.read_version))

    def lose(self, error: ConflictRetriesExhaustedError, planned: dict[Pair, int], round_number: int) -> list[Pair]:
        """Notes a lost commit over ``planned`` and returns the groups that go again in the next round."""
        changed = _changed_groups(self.runner, planned)
        self.lost.update(changed or list(planned))
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
            self.deferred.extend(changed)
            return [pair for pair in planned if pair not in set(changed)]
        time.sleep(self.runner.retry_policy.delay(round_number))
        return list(planned)

    def skip(self, pair: Pair) -> None:
        """Reports a group still contended after the last round as skipped, its copies to withdraw."""
        self.done[pair] = replace(
            group_report(pair, self.last_seen.get(pair, GroupTally()), self.rules, self.owners, dead_lettered=0),
            claimed=0,
            purged=0,
            dead_letters_withdrawn=self.copied.get(pair, 0),
            conflicts_retried=self.lost[pair],
            owners=(),
            skipped=True,
        )
        if self.copies is not None and self.copied.get(pair):
            self.withdrawals.append(pairs_only(self.runner.session(), self.copies, [pair]))


def _log_committed(outcome: _Round, round_number: int) -> None:
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
        extra=C.PROGRESS,
    )


def decide_round(
    ctx: Context,
    pairs: list[Pair],
    rules: GroupRules,
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
    streams = ctx.snapshot.all_streams()
    heads = {pair: ctx.snapshot.group(*pair) for pair in pairs}
    present = [pair for pair, head in heads.items() if head is not None]
    if not present:
        return _Round({}, read_version, None)
    classified = classify(ctx.snapshot, present, rules, ctx.now, owners_frame, copies)
    tallies = tally(classified, ACTION, NEW_OWNER)
    changed = [pair for pair in present if changes(tallies.get(pair, GroupTally()))]
    for pair in changed:
        head = heads[pair]
        assert head is not None
        planned[pair] = head.version
    in_place = set(claims_only(rules, tallies, changed))
    merged = [pair for pair in changed if pair not in in_place]
    if in_place and not merged and commits_files(ctx.snapshot.spark):
        # Every changed group only claims in place: one commit of files rewrites their PEL files, heads
        # and recovery consumers (created where missing), where a MERGE of consumers and an UPDATE took two.
        for pair in sorted(in_place):
            head = heads[pair]
            assert head is not None
            put_group(ctx, head, head)
            touch_consumer(ctx, *pair, rules.options.consumer)
        every_group = [(meta.key, group) for meta in streams for group in meta.groups]
        ctx.plan.add_rewrite(claim_rewrite(sorted(in_place), rules, ctx.now, ctx.txn, every_group))
        return _Round(tallies, read_version, None, rewritten=tuple(sorted(in_place)), txn=ctx.txn)
    if merged:
        partitions = [group_partition(*pair) for pair in merged]
        rows = classified
        if in_place:  # the shorter list of partitions names which rows the MERGE takes
            others = [group_partition(*pair) for pair in sorted(in_place)]
            rows = rows.where(in_partitions(partitions) if len(merged) <= len(others) else ~in_partitions(others))
        cutoff = rules.column(lambda rule: idle_cutoff(ctx.now, rule.min_idle_ms, rule.backoff), merged)
        nacks = nacking(rules, merged) if rules.any(lambda rule: rule.assign == "nack", merged) else None
        source = (
            pending_source(rows, ctx, cutoff, nacks)
            .unionByName(head_source(ctx.snapshot, partitions, ctx.txn))
            .unionByName(consumer_source(rows, ctx))
        )
        ctx.plan.add_frame(source, *partitions)
    if not in_place:
        return _Round(tallies, read_version, None)
    # The same commit creates the recovery consumer where an in-place group lacks it: an UPDATE cannot.
    decided = {pair: head for pair in changed if pair in in_place and (head := heads[pair]) is not None}
    consumer = rules.options.consumer
    missing = missing_consumers(ctx.snapshot, sorted(in_place), consumer)
    for pair in missing:
        put_group(ctx, decided[pair], decided[pair])
        touch_consumer(ctx, *pair, consumer)
    return _Round(tallies, read_version, None, in_place=decided, now=ctx.now, consumers_added=missing)


def _claim_in_place(
    runner: Runner, outcome: _Round, rules: GroupRules, planned: dict[Pair, int], policy: RetryPolicy
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
        ctx.plan.set_update(claim_update(heads, rules, outcome.now, ctx.txn), *partitions)

    runner.transact("RECOVER", rewrite, policy)
    return runner.last_commit_version


def _check_commit(runner: Runner, version: int | None, outcome: _Round, pairs: list[Pair], extra: int = 0) -> None:
    """Checks a commit's metrics against what the round decided for ``pairs`` (and ``extra`` rows written).

    The group-head guard makes a commit apply exactly what was decided on the snapshot; this check
    makes a disagreement (a bug, not a race) fail the run loudly instead of reporting wrong numbers.
    """
    if version is None:
        return
    changed = rows_changed(runner.session(), runner.state_path, version)
    if changed is None:  # a round whose groups all claim in place: one commit of files, its rows read back
        claimed = sum(outcome.tallies[pair].outcomes[CLAIM] for pair in outcome.rewritten)
        written = pending_rows_written(runner.session(), runner.state_path, version, outcome.txn)
        if written != claimed:
            raise CommitMismatchError(
                f"claim commit {version} wrote {written} claimed PEL rows, but the run decided on {claimed}: "
                "the per-group report would be wrong"
            )
        return
    tallies = [outcome.tallies[pair] for pair in pairs if pair in outcome.tallies]
    deleted = sum(t.outcomes[ACK] + t.outcomes[PURGE] for t in tallies)
    # Updated or inserted: claimed rows, one head per changed group, one consumer row per (group, owner).
    written = extra + sum(t.outcomes[CLAIM] + (1 if changes(t) else 0) + len(t.owners) for t in tallies)
    committed = (changed.deleted, changed.updated + changed.inserted)
    if committed != (deleted, written):
        raise CommitMismatchError(
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

"""The recovery run: claim every stale pending entry of the selected groups and dead-letter the poison ones.

A run costs the same few commits whatever the number of groups (docs/RECOVERY.md):

1. **Read** the selected group heads (one query), and every group's poison entries — stale and
   delivered more than ``max_deliveries`` times — in one query that Delta answers from file statistics
   when there are none.
2. **Copy** every poison entry of every group to ``dead_letters`` (one blind append).
3. **Classify and commit**: one aggregation over every pending entry of every group (fresh, copied,
   poison, to claim, to purge: the per-group numbers), then one guarded MERGE over the groups with
   something to write: the copied entries that are still exactly as copied leave their PEL, every
   other stale entry is claimed (to the recovery consumer, or spread over its own group's live
   consumers), entries of deleted stream entries are purged.
4. **Withdraw** the copies of entries that changed before step 3 (one MERGE, only when there are any),
   and append one row to ``recovery_runs``.

Copy first, acknowledge second: a crash between the two leaves the entry pending, so the next run copies
it again (a duplicate dead letter) but no entry is ever lost. A step-3 commit that loses a race to a
consumer or another run does not start over for every group: the groups whose heads changed are set
aside into a later, smaller commit, and after ``MAX_CLAIM_ROUNDS`` commits the ones still contended
are reported as skipped. A dry run computes step 3's numbers and writes nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streamclaim_spark import _constants as C
from streamclaim_spark.batch_claim import StaleSelection, pending_with_fields, selected_groups
from streamclaim_spark.columns import by_bytes, id_text
from streamclaim_spark.config import RecoveryOptions
from streamclaim_spark.context import Context
from streamclaim_spark.model import NACK_SLOTS_PER_MS, NACK_ZONE_BASE, GroupMeta
from streamclaim_spark.object_store import MULTI_WRITER, WriterMode
from streamclaim_spark.partitions import group_partition, stream_partition
from streamclaim_spark.schema import STATE_SCHEMA, in_partitions
from streamclaim_spark.snapshot import Snapshot
from streamclaim_spark.tables import (
    RECOVERY_GROUP_SCHEMA,
    RECOVERY_RUNS_SCHEMA,
    ensure_dead_letter_table,
    ensure_recovery_runs_table,
    table_path,
)
from streamclaim_spark.transaction import (
    CLAIM_CUTOFF,
    CLAIM_FORCE,
    CLAIM_JUST_ID,
    CLAIM_LIVE,
    CLAIM_STEPS,
    OP_CLAIM,
    OP_DELETE,
    OP_EXPECT,
    OP_GUARD,
    SOURCE_SCHEMA,
    ConflictRetriesExhaustedError,
    RetryPolicy,
    commit_metrics,
    committed_version,
    json_frame,
    run_with_retries,
)

if TYPE_CHECKING:
    from streamclaim_spark.store import StreamStore

__all__ = [
    "GroupReport",
    "RecoveryFailedError",
    "RecoveryOptions",
    "RecoveryReport",
    "RecoverySelectionError",
    "recover_stale",
]

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
# Some groups were still contended after MAX_CLAIM_ROUNDS claim commits; the others are recovered.
PARTIAL = "partial"
FAILED = "failed"
# Claim commits per run at most: the first over every group, the next over the groups set aside
# because a consumer or another run changed them while the previous commit was being decided.
MAX_CLAIM_ROUNDS = 6
# A failed run's error text is kept in recovery_runs; Java stack traces beyond this are cut.
_MAX_ERROR_CHARS = 2_000
_COPY_ID = "_id"


@dataclass(frozen=True)
class GroupReport:
    """What a run did (or, in a dry run, would do) to one consumer group.

    ``scanned`` counts the group's pending entries, ``stale`` those idle at least ``min_idle``.
    ``dead_letters_withdrawn`` counts copies taken back because their entry changed (was acknowledged or
    claimed by someone else) between the copy and the acknowledgement. ``skipped`` says the group was
    changed by others during every claim commit of the run (``conflicts_retried`` times) and was left
    as it was; its copies, if any, were withdrawn.
    """

    stream: str
    group: str
    scanned: int = 0
    stale: int = 0
    claimed: int = 0
    purged: int = 0
    dead_lettered: int = 0
    dead_letters_withdrawn: int = 0
    conflicts_retried: int = 0
    owners: tuple[str, ...] = ()
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            C.STREAM: self.stream,
            C.GROUP: self.group,
            "scanned": self.scanned,
            "stale": self.stale,
            "claimed": self.claimed,
            "purged": self.purged,
            "dead_lettered": self.dead_lettered,
            "dead_letters_withdrawn": self.dead_letters_withdrawn,
            "conflicts_retried": self.conflicts_retried,
            "owners": list(self.owners),
            "skipped": self.skipped,
        }


_TOTALS = ("scanned", "stale", "claimed", "purged", "dead_lettered", "dead_letters_withdrawn", "conflicts_retried")


@dataclass(frozen=True)
class RecoveryReport:
    """The outcome of one run: per-group reports plus the run's identity, times and status.

    ``recorded`` says whether the run's row was appended to ``recovery_runs`` (never for dry runs).
    ``writer_mode`` is the store's (object_store.py): ``single-writer`` when it was opened on that promise.
    """

    run_id: str
    store: str
    options: RecoveryOptions
    started_at_ms: int
    ended_at_ms: int
    groups: tuple[GroupReport, ...] = ()
    status: str = SUCCEEDED
    error: str | None = None
    recorded: bool = False
    writer_mode: WriterMode = MULTI_WRITER

    @property
    def totals(self) -> dict[str, int]:
        """Every per-group number summed over the groups, plus the number of groups."""
        totals = {name: sum(getattr(g, name) for g in self.groups) for name in _TOTALS}
        return {"groups": len(self.groups), **totals, "skipped": sum(g.skipped for g in self.groups)}

    def to_json(self) -> dict[str, Any]:
        """The JSON summary the job prints on stdout."""
        options = self.options
        return {
            "run_id": self.run_id,
            "store": self.store,
            "status": self.status,
            "error": self.error,
            "dry_run": options.dry_run,
            "recorded": self.recorded,
            "writer_mode": self.writer_mode,
            "started_at": _iso(self.started_at_ms),
            "ended_at": _iso(self.ended_at_ms),
            "options": {
                "streams": list(options.streams),
                "groups": list(options.groups),
                "min_idle_ms": options.min_idle_ms,
                "assign": options.assign,
                "consumer": options.consumer,
                "live_window_ms": options.live_window_ms,
                "dead_letter": options.dead_letter,
                "max_deliveries": options.max_deliveries,
            },
            "totals": self.totals,
            "groups": [g.to_dict() for g in self.groups],
        }

    def run_row(self) -> tuple[Any, ...]:
        """The report as a ``recovery_runs`` row (tables.RECOVERY_RUNS_SCHEMA)."""
        totals = self.totals
        groups = [tuple(g.to_dict()[name] for name in RECOVERY_GROUP_SCHEMA.names) for g in self.groups]
        return (
            self.run_id,
            _timestamp(self.started_at_ms),
            _timestamp(self.ended_at_ms),
            self.status,
            self.error,
            self.options.min_idle_ms,
            self.options.assign,
            self.options.max_deliveries if self.options.dead_letter else None,
            totals["scanned"],
            totals["claimed"],
            totals["dead_lettered"],
            totals["conflicts_retried"],
            groups,
            self.writer_mode,
        )


class RecoveryFailedError(RuntimeError):
    """Raised when a run stops on an error; ``report`` holds what it did up to then (status ``failed``)."""

    def __init__(self, report: RecoveryReport) -> None:
        super().__init__(f"recovery run {report.run_id} failed: {report.error}")
        self.report = report


class RecoverySelectionError(ValueError):
    """Raised before anything is written when the run's stream and group patterns select no group."""


# What a run does to one pending entry (the ``_action`` column of a classified PEL).
FRESH = "fresh"  # idle less than min_idle: left alone
POISON = "poison"  # stale and delivered more than max_deliveries times: to dead-letter
ACK = "ack"  # copied to dead_letters by this run and still exactly as copied: acknowledged
CLAIM = "claim"  # stale, its stream entry exists: claimed (assign="nack": given back to the group)
WAITING = "waiting"  # assign="nack": already given back (XNACKed, owner-less), waiting for redelivery
PURGE = "purge"  # stale, its stream entry was deleted: leaves the PEL, as XAUTOCLAIM does
_ACTION = "_action"
_NEW_OWNER = "_new_owner"
_OWNERS = "_owners"
_COPIED = "_copied"
_ENTRY_EXISTS = "_entry_exists"
_NACK_TIME = "_nack_time"
_COPY_COLUMNS = [C.STREAM, C.GROUP, _COPY_ID, C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS]
# A copy matches its pending row on every column of _COPY_COLUMNS, the owner null-safely: an XNACKed
# entry has none, and null never equals null in a join. _COPY_KEY is _COPY_COLUMNS with the owner
# replaced by _OWNER_KEY (``_with_owner_key``).
_OWNER_KEY = "_owner_key"
_COPY_KEY = [C.STREAM, C.GROUP, _COPY_ID, _OWNER_KEY, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS]
_PAIR_SCHEMA = StructType([StructField(C.STREAM, StringType()), StructField(C.GROUP, StringType())])

Pair = tuple[str, str]


@dataclass
class _Tally:
    """One group's pending entries counted by action, and the consumers its claims went to."""

    actions: Counter[str] = field(default_factory=Counter)
    owners: set[str] = field(default_factory=set)

    @property
    def changes(self) -> int:
        """Rows the claim commit writes for this group (acknowledged, claimed, purged)."""
        return self.actions[ACK] + self.actions[CLAIM] + self.actions[PURGE]


@dataclass
class _Round:
    """What one committed claim round decided and where: per-group tallies, read and commit versions."""

    tallies: dict[Pair, _Tally]
    read_version: int
    version: int | None


def recover_stale(store: StreamStore, options: RecoveryOptions, *, run_id: str | None = None) -> RecoveryReport:
    """Runs recovery over every (stream, group) the options select, in a constant number of commits.

    Args:
        store: The store.
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
    run_id = run_id or uuid.uuid4().hex
    started = store.clock()
    action = "dry run" if options.dry_run else "run"
    report = RecoveryReport(run_id, store.path, options, started, started, writer_mode=store.safety.mode)
    done: dict[Pair, GroupReport] = {}
    try:
        groups = select_groups(store, options)
        log.info(
            "recovery %s %s on %s: selection read, %d group(s) on %d stream(s) match streams=%s groups=%s",
            action,
            run_id,
            store.path,
            len(groups),
            len({g.key for g in groups}),
            list(options.streams),
            list(options.groups),
        )
        _recover(store, options, run_id, [(g.key, g.name) for g in groups], done)
    except RecoverySelectionError:
        raise
    except Exception as error:
        message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_CHARS]
        failed = replace(report, ended_at_ms=store.clock(), groups=_ordered(done), status=FAILED, error=message)
        log.error("recovery %s %s failed after %d group(s): %s", action, run_id, len(done), message)
        if not options.dry_run:
            try:
                failed = _record(store, failed)
            except Exception:
                log.exception("could not record failed run %s in recovery_runs", run_id)
        raise RecoveryFailedError(failed) from error
    reports = _ordered(done)
    skipped = [g for g in reports if g.skipped]
    report = replace(report, ended_at_ms=store.clock(), groups=reports)
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
        report = _record(store, report)
    log.info("recovery %s %s done (%s): %s", action, run_id, report.status, report.totals)
    return report


def select_groups(store: StreamStore, options: RecoveryOptions) -> list[GroupMeta]:
    """The consumer groups whose stream and group names match the options, in bytewise name order.

    Raises RecoverySelectionError when none does: a pattern that matches nothing is a mistake a
    scheduled job should report, not a run that silently does nothing.
    """
    selection = StaleSelection(options.min_idle_ms, streams=options.streams, groups=options.groups)
    context = Context(store.snapshot(), now=store.clock(), txn="")
    groups = selected_groups(context, selection)
    if not groups:
        streams = context.snapshot.all_streams()
        raise RecoverySelectionError(
            f"streams={list(options.streams)} groups={list(options.groups)}: no consumer group matches "
            f"(the store has {sum(len(s.groups) for s in streams)} group(s) on {len(streams)} stream(s)); "
            "fix the patterns (--streams/--groups, jobs.recover_stale.streams/groups)"
        )
    return sorted(groups, key=lambda g: (by_bytes(g.key), by_bytes(g.name)))


def describe(report: GroupReport, options: RecoveryOptions) -> str:
    """One log line for a group's report."""
    verb = "would " if options.dry_run else ""
    owners = ", ".join(report.owners) or "-"
    parts = [
        f"{report.stream}/{report.group}: {report.scanned} pending, {report.stale} stale",
        f"{verb}dead-letter {report.dead_lettered}" if options.dead_letter else "dead-lettering off",
        f"{verb}claim {report.claimed} to {owners}",
        f"{verb}purge {report.purged}",
    ]
    if report.dead_letters_withdrawn:
        parts.append(f"{report.dead_letters_withdrawn} dead letter(s) withdrawn")
    parts.append(f"{report.conflicts_retried} conflict(s) retried")
    if report.skipped:
        parts.append("SKIPPED (still contended)")
    return "; ".join(parts)


def _ordered(done: dict[Pair, GroupReport]) -> tuple[GroupReport, ...]:
    return tuple(done[pair] for pair in sorted(done, key=lambda p: (by_bytes(p[0]), by_bytes(p[1]))))


def _recover(
    store: StreamStore, options: RecoveryOptions, run_id: str, pairs: list[Pair], done: dict[Pair, GroupReport]
) -> None:
    """Steps 1–4 of the module docstring; fills ``done`` with each group's report as its commit lands."""
    now = store.clock()
    snapshot = store.snapshot()
    owners_frame, owners = _live_owners(snapshot, pairs, options, now)
    if options.dry_run:
        tallies = _tally(_classify(snapshot, pairs, options, now, owners_frame, copies=None))
        _log_scan(tallies, len(pairs))
        _warn_without_live_consumers(tallies, owners, options)
        for pair in pairs:
            tally = tallies.get(pair, _Tally())
            done[pair] = _group_report(pair, tally, options, owners, dead_lettered=tally.actions[POISON])
        return
    copies: DataFrame | None = None
    copied: dict[Pair, int] = {}
    if options.dead_letter:
        copied = _copy_dead_letters(store, snapshot, pairs, options, now, run_id)
        if copied:
            copies = _run_copies(store, run_id)
    withdrawals = _claim_rounds(store, options, pairs, owners_frame, owners, copies, copied, done)
    if copies is not None and withdrawals:
        _withdraw_copies(store, run_id, withdrawals)


def _log_scan(tallies: dict[Pair, _Tally], groups: int) -> None:
    totals: Counter[str] = sum((t.actions for t in tallies.values()), Counter())
    log.info(
        "scanned %d pending entries of %d group(s): %d stale (%d to dead-letter, %d acknowledged as dead letters, "
        "%d to claim, %d to purge)",
        sum(totals.values()),
        groups,
        sum(totals.values()) - totals[FRESH],
        totals[POISON],
        totals[ACK],
        totals[CLAIM],
        totals[PURGE],
    )


def _claim_rounds(
    store: StreamStore,
    options: RecoveryOptions,
    pairs: list[Pair],
    owners_frame: DataFrame | None,
    owners: dict[Pair, tuple[str, ...]],
    copies: DataFrame | None,
    copied: dict[Pair, int],
    done: dict[Pair, GroupReport],
) -> list[DataFrame]:
    """Step 3 in at most MAX_CLAIM_ROUNDS commits; returns frames of the copies to withdraw.

    Each round classifies its groups on a fresh snapshot and commits one MERGE over those with
    something to write. When it loses, the groups it planned to write whose head moved meanwhile are
    set aside for a later round and the others go again at once; if all moved, the same groups go
    again after a backoff.
    """
    remaining, deferred = list(pairs), list[Pair]()
    lost: Counter[Pair] = Counter()
    last_seen: dict[Pair, _Tally] = {}
    withdrawals: list[DataFrame] = []
    one_attempt = RetryPolicy(max_attempts=1)
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
            outcome = store.runner.transact("RECOVER", decide, one_attempt)
        except ConflictRetriesExhaustedError as error:
            changed = _changed_groups(store, planned)
            lost.update(changed or list(planned))
            set_aside = 0 < len(changed) < len(planned)
            log.warning(
                "claim commit %d over %d group(s) lost a race (%s); %d of them changed meanwhile%s",
                round_number,
                len(planned),
                type(error.__cause__).__name__,
                len(changed),
                ", set aside for a later commit" if set_aside else "; trying them again",
            )
            if set_aside:
                deferred.extend(changed)
                remaining = [pair for pair in remaining if pair not in set(changed)]
            else:
                time.sleep(store.retry_policy.delay(round_number))
            continue
        _check_commit(store, outcome)
        if round_number == 1:
            _log_scan(outcome.tallies, len(remaining))
            _warn_without_live_consumers(outcome.tallies, owners, options)
        for pair in remaining:
            tally = outcome.tallies.get(pair, _Tally())
            done[pair] = replace(
                _group_report(pair, tally, options, owners, dead_lettered=tally.actions[ACK]),
                dead_letters_withdrawn=copied.get(pair, 0) - tally.actions[ACK],
                conflicts_retried=lost[pair],
            )
        unmatched = [pair for pair in remaining if done[pair].dead_letters_withdrawn]
        if copies is not None and unmatched:
            withdrawals.append(_unmatched_copies(store, copies, unmatched, outcome.read_version))
        totals: Counter[str] = sum((t.actions for t in outcome.tallies.values()), Counter())
        log.info(
            "claim committed (state version %s, commit %d of at most %d): %d group(s) written, %d dead letter(s) "
            "acknowledged, %d claimed, %d purged",
            outcome.version,
            round_number,
            MAX_CLAIM_ROUNDS,
            sum(1 for t in outcome.tallies.values() if t.changes),
            totals[ACK],
            totals[CLAIM],
            totals[PURGE],
        )
        remaining = []
    for pair in remaining + deferred:
        done[pair] = replace(
            _group_report(pair, last_seen.get(pair, _Tally()), options, owners, dead_lettered=0),
            claimed=0,
            purged=0,
            dead_letters_withdrawn=copied.get(pair, 0),
            conflicts_retried=lost[pair],
            owners=(),
            skipped=True,
        )
        if copies is not None and copied.get(pair):
            withdrawals.append(_pairs_only(store.session(), copies, [pair]))
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

    ``planned`` receives the head version of every group the MERGE writes (and guards).
    """
    read_version = ctx.snapshot.version
    assert read_version is not None, "a transaction's snapshot is pinned to a version"
    ctx.snapshot.all_streams()
    heads = {pair: ctx.snapshot.group(*pair) for pair in pairs}
    present = [pair for pair, head in heads.items() if head is not None]
    if not present:
        return _Round({}, read_version, None)
    classified = _classify(ctx.snapshot, present, options, ctx.now, owners_frame, copies)
    tallies = _tally(classified)
    changed = [pair for pair in present if tallies.get(pair, _Tally()).changes]
    for pair in changed:
        head = heads[pair]
        assert head is not None
        planned[pair] = head.version
    if changed:
        partitions = [group_partition(*pair) for pair in changed]
        source = (
            _pending_source(classified, ctx, ctx.now - options.min_idle_ms, options.assign == "nack")
            .unionByName(_head_source(ctx.snapshot, partitions, ctx.txn))
            .unionByName(_consumer_source(classified, ctx))
        )
        ctx.plan.add_frame(source, *partitions)
    return _Round(tallies, read_version, None)


def _check_commit(store: StreamStore, outcome: _Round) -> None:
    """Sets the round's commit version and checks the commit's MERGE metrics against its decision.

    The group-head guard makes the MERGE apply exactly what was decided on the snapshot; this check
    makes a disagreement (a bug, not a race) fail the run loudly instead of reporting wrong numbers.
    """
    outcome.version = store.runner.last_commit_version
    if outcome.version is None:
        return
    metrics = commit_metrics(store.session(), store.state_path, outcome.version)
    tallies = outcome.tallies.values()
    deleted = sum(t.actions[ACK] + t.actions[PURGE] for t in tallies)
    # Updated or inserted: claimed rows, one head per changed group, one consumer row per (group, owner).
    written = sum(t.actions[CLAIM] + (1 if t.changes else 0) + len(t.owners) for t in tallies)
    committed = (
        metrics.get("numTargetRowsDeleted", 0),
        metrics.get("numTargetRowsUpdated", 0) + metrics.get("numTargetRowsInserted", 0),
    )
    if committed != (deleted, written):
        raise RuntimeError(
            f"claim commit {outcome.version} deleted {committed[0]} and wrote {committed[1]} rows, "
            f"but the run decided on {deleted} and {written}: the per-group report would be wrong"
        )


def _changed_groups(store: StreamStore, planned: dict[Pair, int]) -> list[Pair]:
    """The planned groups whose head moved since a lost round read it (re-read in one query)."""
    snapshot = store.snapshot()
    snapshot.all_streams()
    changed = []
    for pair, version in planned.items():
        head = snapshot.group(*pair)
        if head is None or head.version != version:
            changed.append(pair)
    return changed


def _group_report(
    pair: Pair, tally: _Tally, options: RecoveryOptions, owners: dict[Pair, tuple[str, ...]], dead_lettered: int
) -> GroupReport:
    actions = tally.actions
    scanned = sum(actions.values())
    claimed = actions[CLAIM]
    live = owners.get(pair) if options.assign == "live" else None
    assigned = () if options.assign == "nack" else live or (options.consumer,)
    return GroupReport(
        pair[0],
        pair[1],
        scanned=scanned,
        stale=scanned - actions[FRESH],
        claimed=claimed,
        purged=actions[PURGE],
        dead_lettered=dead_lettered if options.dead_letter else 0,
        owners=assigned if claimed else (),
    )


def _warn_without_live_consumers(
    tallies: dict[Pair, _Tally], owners: dict[Pair, tuple[str, ...]], options: RecoveryOptions
) -> None:
    if options.assign != "live":
        return
    orphans = sorted(pair for pair, tally in tallies.items() if tally.actions[CLAIM] and not owners.get(pair))
    if orphans:
        log.warning(
            "%d group(s) had no consumer active in the last %d ms; their entries go to the recovery consumer %r: %s",
            len(orphans),
            options.live_window_ms,
            options.consumer,
            ", ".join(f"{key}/{group}" for key, group in orphans[:10]) + (" ..." if len(orphans) > 10 else ""),
        )


def _live_owners(
    snapshot: Snapshot, pairs: list[Pair], options: RecoveryOptions, now: int
) -> tuple[DataFrame | None, dict[Pair, tuple[str, ...]]]:
    """Each group's live consumers (active within the live window, the recovery consumer excluded).

    Returns the (stream, group_name, _owners) frame the claim joins, sorted bytewise per group, and the
    same as a dict for the report; (None, {}) unless ``assign`` is ``live``.
    """
    if options.assign != "live":
        return None, {}
    partitions = [group_partition(*pair) for pair in pairs]
    consumers = snapshot.frame().where(
        in_partitions(partitions)
        & (F.col(C.ROW_KIND) == C.KIND_CONSUMER)
        & (F.col(C.ACTIVE_TIME_MS) != C.NEVER_ACTIVE)
        & (F.col(C.ACTIVE_TIME_MS) >= now - options.live_window_ms)
        & (F.col(C.CONSUMER) != options.consumer)
    )
    frame = consumers.groupBy(C.STREAM, C.GROUP).agg(F.array_sort(F.collect_list(C.CONSUMER)).alias(_OWNERS))
    owners = {(row[C.STREAM], row[C.GROUP]): tuple(row[_OWNERS]) for row in frame.collect()}
    return frame, owners


def _classify(
    snapshot: Snapshot,
    pairs: Sequence[Pair],
    options: RecoveryOptions,
    now: int,
    owners: DataFrame | None,
    copies: DataFrame | None,
) -> DataFrame:
    """Every pending row of the groups with its ``_action`` and, for claims, its ``_new_owner``.

    The new owner is the recovery consumer, or one of the group's live consumers picked by a hash of
    the entry's stream, group and ID (stable: the same entry goes to the same consumer on a re-run).
    """
    pending = _pending_of(snapshot, pairs).drop(C.FIELDS)
    # Whether each entry still exists, not its payload: the payload column is never read here.
    entries = _entries_of(snapshot, pairs).select(C.STREAM, C.ID_MS, C.ID_SEQ, F.lit(True).alias(_ENTRY_EXISTS))
    rows = pending.join(entries, [C.STREAM, C.ID_MS, C.ID_SEQ], "left").withColumn(_COPY_ID, id_text(C.ID_MS, C.ID_SEQ))
    copied: Column = F.lit(False)
    if copies is not None:
        matches = _with_owner_key(copies).drop(C.OWNER).withColumn(_COPIED, F.lit(True))
        rows = _with_owner_key(rows).join(matches, _COPY_KEY, "left").drop(_OWNER_KEY)
        copied = F.col(_COPIED).isNotNull()
    stale = F.col(C.DELIVERY_TIME_MS) <= F.lit(now - options.min_idle_ms)
    poison = (F.col(C.DELIVERY_COUNT) > F.lit(options.max_deliveries)) if options.dead_letter else F.lit(False)
    nacking = options.assign == "nack"
    action = (
        F.when(copied, ACK)
        .when(~stale, FRESH)
        .when(poison, POISON)
        .when(F.lit(nacking) & F.col(C.OWNER).isNull(), WAITING)
        .when(F.col(_ENTRY_EXISTS).isNotNull(), CLAIM)
        .otherwise(PURGE)
    )
    rows = rows.withColumn(_ACTION, action)
    if nacking:
        return _with_nack_times(rows, now)
    new_owner: Column = F.lit(options.consumer)
    if owners is not None:
        rows = rows.join(F.broadcast(owners), [C.STREAM, C.GROUP], "left")
        spread = F.pmod(F.xxhash64(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ), F.size(_OWNERS)) + 1
        new_owner = F.coalesce(F.element_at(F.col(_OWNERS), spread.cast("int")), F.lit(options.consumer))
    return rows.withColumn(_NEW_OWNER, F.when(F.col(_ACTION) == CLAIM, new_owner))


def _with_nack_times(rows: DataFrame, now: int) -> DataFrame:
    """assign="nack": each group's entries to give back get no new owner and consecutive NACK-zone
    delivery times after the zone's current end (model.nack_time), oldest delivery first, as one
    ``XNACK ... FAIL`` per group listing them in that order would give them."""
    is_claim = F.col(_ACTION) == CLAIM
    per_group = Window.partitionBy(C.STREAM, C.GROUP)
    in_order = per_group.orderBy(F.when(is_claim, 0).otherwise(1), C.DELIVERY_TIME_MS, C.ID_MS, C.ID_SEQ)
    zone_end = F.max(F.when(F.col(C.DELIVERY_TIME_MS) < 0, F.col(C.DELIVERY_TIME_MS))).over(per_group)
    slot = F.lit(NACK_ZONE_BASE + now * NACK_SLOTS_PER_MS)
    first = F.when(zone_end.isNull() | (zone_end < slot), slot).otherwise(zone_end + 1)
    return rows.withColumn(_NEW_OWNER, F.lit(None).cast(StringType())).withColumn(
        _NACK_TIME, F.when(is_claim, first + F.row_number().over(in_order) - 1)
    )


def _tally(classified: DataFrame) -> dict[Pair, _Tally]:
    """Counts the classified rows per group and action, in one aggregation collected to the driver."""
    tallies: dict[Pair, _Tally] = {}
    for row in classified.groupBy(C.STREAM, C.GROUP, _ACTION, _NEW_OWNER).count().collect():
        tally = tallies.setdefault((row[C.STREAM], row[C.GROUP]), _Tally())
        tally.actions[row[_ACTION]] += row["count"]
        if row[_NEW_OWNER] is not None:
            tally.owners.add(row[_NEW_OWNER])
    return tallies


def _state_columns(values: dict[str, Column]) -> list[Column]:
    """A state-table row's columns: ``values`` where given, null elsewhere, in schema order and types."""
    return [values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in STATE_SCHEMA.fields]


def _operations(**values: Column) -> list[Column]:
    """The MERGE source's operation columns: ``values`` where given, null (or false) elsewhere."""
    defaults = {OP_DELETE: F.lit(False), OP_GUARD: F.lit(False), OP_CLAIM: F.lit(False)}
    names = [n for n in SOURCE_SCHEMA.names if n not in STATE_SCHEMA.names]
    return [values.get(n, defaults.get(n, F.lit(None))).cast(SOURCE_SCHEMA[n].dataType).alias(n) for n in names]


def _pending_source(classified: DataFrame, ctx: Context, cutoff: int, nacking: bool) -> DataFrame:
    """MERGE rows that acknowledge (ACK), purge (PURGE) or claim (CLAIM, under the MERGE's idle condition).

    A claim gives the entry its new owner, delivery time now and one more delivery; with ``nacking``
    it gives it back instead: no owner, its NACK-zone time, the count kept (XNACK FAIL).
    """
    is_claim = F.col(_ACTION) == CLAIM
    kept = {name: F.col(name) for name in STATE_SCHEMA.names if name != C.FIELDS}
    delivered_at = F.col(_NACK_TIME) if nacking else F.lit(ctx.now)
    values = {
        **kept,
        C.OWNER: F.when(is_claim, F.col(_NEW_OWNER)).otherwise(F.col(C.OWNER)),
        C.DELIVERY_TIME_MS: F.when(is_claim, delivered_at).otherwise(F.col(C.DELIVERY_TIME_MS)),
        C.TXN: F.lit(ctx.txn),
    }
    return classified.where(F.col(_ACTION).isin(ACK, CLAIM, PURGE)).select(
        *_state_columns(values),
        *_operations(
            **{
                OP_DELETE: ~is_claim,
                OP_CLAIM: is_claim,
                CLAIM_LIVE: F.when(is_claim, F.lit(True)),
                CLAIM_CUTOFF: F.when(is_claim, F.lit(cutoff)),
                CLAIM_STEPS: F.when(is_claim, F.lit(1)),
                CLAIM_JUST_ID: F.when(is_claim, F.lit(nacking)),  # JUSTID keeps the count
                CLAIM_FORCE: F.when(is_claim, F.lit(False)),
            }
        ),
    )


def _head_source(snapshot: Snapshot, partitions: list[str], txn: str) -> DataFrame:
    """The changed groups' head rows, version bumped and guarded on the version this round read."""
    heads = snapshot.frame().where(in_partitions(partitions) & (F.col(C.ROW_KIND) == C.KIND_GROUP))
    values = {name: F.col(name) for name in STATE_SCHEMA.names}
    values.update({C.VERSION: F.col(C.VERSION) + 1, C.TXN: F.lit(txn)})
    return heads.select(*_state_columns(values), *_operations(**{OP_GUARD: F.lit(True), OP_EXPECT: F.col(C.VERSION)}))


def _consumer_source(classified: DataFrame, ctx: Context) -> DataFrame:
    """One consumer row per (group, new owner): seen and active now, whether it existed or not."""
    claims = classified.where((F.col(_ACTION) == CLAIM) & F.col(_NEW_OWNER).isNotNull())  # none when nacking
    owners = claims.select(C.PARTITION_ID, C.STREAM, C.GROUP, _NEW_OWNER).distinct()
    values = {
        C.PARTITION_ID: F.col(C.PARTITION_ID),
        C.ROW_KIND: F.lit(C.KIND_CONSUMER),
        C.STREAM: F.col(C.STREAM),
        C.GROUP: F.col(C.GROUP),
        C.CONSUMER: F.col(_NEW_OWNER),
        C.SEEN_TIME_MS: F.lit(ctx.now),
        C.ACTIVE_TIME_MS: F.lit(ctx.now),
        C.TXN: F.lit(ctx.txn),
    }
    return owners.select(*_state_columns(values), *_operations())


def _pending_of(snapshot: Snapshot, pairs: Sequence[Pair]) -> DataFrame:
    """The groups' pending rows."""
    partitions = [group_partition(*pair) for pair in pairs]
    return snapshot.frame().where(in_partitions(partitions) & (F.col(C.ROW_KIND) == C.KIND_PENDING))


def _entries_of(snapshot: Snapshot, pairs: Sequence[Pair]) -> DataFrame:
    """The entries of the groups' streams."""
    partitions = [stream_partition(key) for key in sorted({key for key, _ in pairs})]
    return snapshot.frame().where(in_partitions(partitions) & (F.col(C.ROW_KIND) == C.KIND_ENTRY))


def _copy_dead_letters(
    store: StreamStore, snapshot: Snapshot, pairs: list[Pair], options: RecoveryOptions, now: int, run_id: str
) -> dict[Pair, int]:
    """Step 2: appends every poison entry of the groups, as ``snapshot`` shows it, to ``dead_letters``.

    Returns how many each group had. The poison filter comes first, so Delta skips every file whose
    delivery counts stay within ``max_deliveries`` (usually all of them) before anything is joined.
    """
    poison = _pending_of(snapshot, pairs).where(
        (F.col(C.DELIVERY_TIME_MS) <= F.lit(now - options.min_idle_ms))
        & (F.col(C.DELIVERY_COUNT) > F.lit(options.max_deliveries))
    )
    counts = {
        (row[C.STREAM], row[C.GROUP]): row["count"] for row in poison.groupBy(C.STREAM, C.GROUP).count().collect()
    }
    if not counts:
        return {}
    entries = _entries_of(snapshot, list(counts)).select(C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
    rows = pending_with_fields(poison, entries, [C.STREAM, C.ID_MS, C.ID_SEQ]).select(
        F.lit(run_id).alias("run_id"), F.timestamp_millis(F.lit(now)).alias("dead_lettered_at"), "*"
    )
    session = store.session()
    path = ensure_dead_letter_table(session, store.path)
    rows.write.format("delta").mode("append").option("userMetadata", f"DEAD LETTER {run_id}").save(path)
    log.info(
        "dead letters copied: %d entries of %d group(s) (dead_letters version %d)",
        sum(counts.values()),
        len(counts),
        committed_version(session),
    )
    return counts


def _run_copies(store: StreamStore, run_id: str) -> DataFrame:
    """This run's dead letters, keyed as ``_classify`` joins them."""
    path = table_path(store.path, C.DEAD_LETTER_TABLE_DIR)
    copies = store.session().read.format("delta").load(path).where(F.col("run_id") == F.lit(run_id))
    return copies.select(C.STREAM, C.GROUP, F.col("id").alias(_COPY_ID), C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS)


def _pairs_only(session: SparkSession, frame: DataFrame, pairs: Iterable[Pair]) -> DataFrame:
    """``frame``'s rows of the given (stream, group) pairs."""
    wanted = json_frame(session, [{C.STREAM: key, C.GROUP: group} for key, group in pairs], _PAIR_SCHEMA)
    return frame.join(F.broadcast(wanted), [C.STREAM, C.GROUP], "left_semi")


def _unmatched_copies(store: StreamStore, copies: DataFrame, pairs: list[Pair], read_version: int) -> DataFrame:
    """The groups' copies whose entry the round found changed (acknowledged or claimed by others)."""
    partitions = [group_partition(*pair) for pair in pairs]
    pending = (
        store.runner.table_at(read_version)
        .where(in_partitions(partitions) & (F.col(C.ROW_KIND) == C.KIND_PENDING))
        .select(
            C.STREAM, C.GROUP, id_text(C.ID_MS, C.ID_SEQ).alias(_COPY_ID), C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS
        )
    )
    unmatched = _with_owner_key(_pairs_only(store.session(), copies, pairs))
    return unmatched.join(_with_owner_key(pending).drop(C.OWNER), _COPY_KEY, "left_anti").drop(_OWNER_KEY)


def _with_owner_key(frame: DataFrame) -> DataFrame:
    """``frame`` with _OWNER_KEY: its owner, or a value no consumer name is expected to take when it has
    none (an XNACKed entry), so that equality joins match owner-less rows too."""
    return frame.withColumn(_OWNER_KEY, F.coalesce(F.col(C.OWNER), F.lit("\x00xnack\x00")))


def _withdraw_copies(store: StreamStore, run_id: str, frames: list[DataFrame]) -> None:
    """Deletes this run's copies of entries it did not acknowledge (they are still, or again, in use)."""
    unmatched = frames[0]
    for frame in frames[1:]:
        unmatched = unmatched.unionByName(frame)
    unmatched = unmatched.select(C.STREAM, C.GROUP, _COPY_ID).distinct()
    sample = [f"{row[C.STREAM]}/{row[C.GROUP]} {row[_COPY_ID]}" for row in unmatched.limit(10).collect()]
    log.warning(
        "dead-lettered entries changed before the acknowledgement; withdrawing their copies: %s", ", ".join(sample)
    )
    path = table_path(store.path, C.DEAD_LETTER_TABLE_DIR)
    condition = (
        (F.col("t.run_id") == F.lit(run_id))
        & (F.col(f"t.{C.STREAM}") == F.col(f"s.{C.STREAM}"))
        & (F.col(f"t.{C.GROUP}") == F.col(f"s.{C.GROUP}"))
        & (F.col("t.id") == F.col(f"s.{_COPY_ID}"))
    )

    def delete(_: int) -> None:
        session = store.session()
        session.conf.set("spark.databricks.delta.commitInfo.userMetadata", f"DEAD LETTER WITHDRAW {run_id}")
        table = DeltaTable.forPath(session, path).alias("t")
        table.merge(unmatched.alias("s"), condition).whenMatchedDelete().execute()

    run_with_retries(delete, store.retry_policy, "DEAD LETTER WITHDRAW")


def _record(store: StreamStore, report: RecoveryReport) -> RecoveryReport:
    """Appends the run's row to ``recovery_runs`` (a blind append: it never conflicts)."""
    session = store.session()
    path = ensure_recovery_runs_table(session, store.path)
    frame = session.createDataFrame([report.run_row()], RECOVERY_RUNS_SCHEMA)
    # mergeSchema: a run log made before a column was added (writer_mode) gains it; older rows hold null.
    (
        frame.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("userMetadata", f"RECOVERY RUN {report.run_id}")
        .save(path)
    )
    return replace(report, recorded=True)


def _timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _iso(ms: int) -> str:
    return _timestamp(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")

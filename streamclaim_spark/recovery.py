"""The recovery run: claim every stale pending entry of the selected groups and dead-letter the poison ones.

For each selected (stream, group), in name order, a run (1) copies the stale entries delivered more than
``max_deliveries`` times to the ``dead_letters`` table, then acknowledges them in the group; (2) claims the
other stale entries, to one recovery consumer or spread over the group's live consumers; and at the end
appends one row to ``recovery_runs``. Copy first, acknowledge second: a crash between the two leaves the
entry pending, so the next run copies it again (a duplicate dead letter) but no entry is ever lost
(docs/RECOVERY.md). A dry run computes the same numbers and writes nothing.
"""

from __future__ import annotations

import glob
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamclaim_spark import _constants as C
from streamclaim_spark.batch_claim import StaleSelection, pending_with_fields, selected_groups
from streamclaim_spark.commands.groups import put_group
from streamclaim_spark.config import RecoveryOptions
from streamclaim_spark.context import Context
from streamclaim_spark.model import GroupMeta
from streamclaim_spark.schema import group_partition, stream_partition
from streamclaim_spark.snapshot import Snapshot, by_bytes, id_text
from streamclaim_spark.tables import (
    RECOVERY_GROUP_SCHEMA,
    RECOVERY_RUNS_SCHEMA,
    ensure_dead_letter_table,
    ensure_recovery_runs_table,
    table_path,
)
from streamclaim_spark.transaction import run_with_retries, source_frame_for_deletes

if TYPE_CHECKING:
    from streamclaim_spark.store import StreamStore

__all__ = ["GroupReport", "RecoveryFailedError", "RecoveryOptions", "RecoveryReport", "recover_stale"]

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
FAILED = "failed"
# A failed run's error text is kept in recovery_runs; Java stack traces beyond this are cut.
_MAX_ERROR_CHARS = 2_000
_COPY_ID = "_id"


@dataclass(frozen=True)
class GroupReport:
    """What a run did (or, in a dry run, would do) to one consumer group.

    ``scanned`` counts the group's pending entries, ``stale`` those idle at least ``min_idle``.
    ``dead_letters_withdrawn`` counts copies taken back because their entry changed (was acknowledged or
    claimed by someone else) between the copy and the acknowledgement.
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
        }


_TOTALS = ("scanned", "stale", "claimed", "purged", "dead_lettered", "dead_letters_withdrawn", "conflicts_retried")


@dataclass(frozen=True)
class RecoveryReport:
    """The outcome of one run: per-group reports plus the run's identity, times and status.

    ``recorded`` says whether the run's row was appended to ``recovery_runs`` (never for dry runs).
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

    @property
    def totals(self) -> dict[str, int]:
        """Every per-group number summed over the groups, plus the number of groups."""
        totals = {name: sum(getattr(g, name) for g in self.groups) for name in _TOTALS}
        return {"groups": len(self.groups), **totals}

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
        )


class RecoveryFailedError(RuntimeError):
    """Raised when a run stops on an error; ``report`` holds what it did up to then (status ``failed``)."""

    def __init__(self, report: RecoveryReport) -> None:
        super().__init__(f"recovery run {report.run_id} failed: {report.error}")
        self.report = report


def recover_stale(store: StreamStore, options: RecoveryOptions, *, run_id: str | None = None) -> RecoveryReport:
    """Runs recovery over every (stream, group) the options select, one group at a time.

    Each group costs up to three commits (dead-letter copy, acknowledgement, claim), each retried on
    its own when it loses a race, so one busy group never holds up the others.

    Args:
        store: The store.
        options: What to select and how to recover it (``RecoveryOptions``).
        run_id: Identifier written to ``recovery_runs`` and ``dead_letters`` (default a random UUID).

    Returns:
        The run's report; it is also in ``recovery_runs`` unless ``options.dry_run``.

    Raises:
        RecoveryFailedError: A group failed; groups before it stay recovered, and (unless a dry run)
            the failed run is recorded with its error.
    """
    run_id = run_id or uuid.uuid4().hex
    started = store.clock()
    action = "dry run" if options.dry_run else "run"
    reports: list[GroupReport] = []
    report = RecoveryReport(run_id, store.path, options, started, started)
    try:
        groups = select_groups(store, options)
        log.info(
            "recovery %s %s on %s: %d group(s) match streams=%s groups=%s",
            action,
            run_id,
            store.path,
            len(groups),
            list(options.streams),
            list(options.groups),
        )
        for position, group in enumerate(groups, start=1):
            reports.append(_recover_group(store, group, options, run_id))
            log.info("[%d/%d] %s", position, len(groups), describe(reports[-1], options))
    except Exception as error:
        message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_CHARS]
        failed = replace(report, ended_at_ms=store.clock(), groups=tuple(reports), status=FAILED, error=message)
        log.error("recovery %s %s failed after %d group(s): %s", action, run_id, len(reports), message)
        if not options.dry_run:
            try:
                failed = _record(store, failed)
            except Exception:
                log.exception("could not record failed run %s in recovery_runs", run_id)
        raise RecoveryFailedError(failed) from error
    report = replace(report, ended_at_ms=store.clock(), groups=tuple(reports))
    if not options.dry_run:
        report = _record(store, report)
    log.info("recovery %s %s done: %s", action, run_id, report.totals)
    return report


def select_groups(store: StreamStore, options: RecoveryOptions) -> list[GroupMeta]:
    """The consumer groups whose stream and group names match the options, in bytewise name order."""
    selection = StaleSelection(options.min_idle_ms, streams=options.streams, groups=options.groups)
    context = Context(store.snapshot(), now=store.clock(), txn="")
    groups = selected_groups(context, selection)
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
    return "; ".join(parts)


def _recover_group(store: StreamStore, group: GroupMeta, options: RecoveryOptions, run_id: str) -> GroupReport:
    """Scans one group, dead-letters its poison entries, then claims its other stale entries."""
    key, name = group.key, group.name
    snapshot = store.snapshot()
    now = store.clock()
    is_stale = F.col(C.DELIVERY_TIME_MS) <= F.lit(now - options.min_idle_ms)
    is_poison = is_stale & (F.col(C.DELIVERY_COUNT) > F.lit(options.max_deliveries))
    if not options.dead_letter:
        is_poison = F.lit(False)
    stats = (
        snapshot.pending_frame(key, name)
        .agg(
            F.count(F.lit(1)).alias("scanned"),
            F.count(F.when(is_stale, True)).alias("stale"),
            F.count(F.when(is_poison, True)).alias("poison"),
        )
        .first()
    )
    assert stats is not None
    report = GroupReport(key, name, scanned=stats["scanned"], stale=stats["stale"])
    poison = int(stats["poison"])
    if poison and options.dry_run:
        report = replace(report, dead_lettered=poison)
    elif poison:
        _copy_dead_letters(store, snapshot, group, is_poison, now, run_id)
        acknowledged, withdrawn, attempts = _acknowledge_dead_letters(store, group, run_id, poison)
        report = replace(
            report,
            dead_lettered=acknowledged,
            dead_letters_withdrawn=withdrawn,
            conflicts_retried=report.conflicts_retried + attempts - 1,
        )
    if report.scanned <= poison:
        return report
    owners = _owners(snapshot, group, options, now)
    selection = StaleSelection(
        options.min_idle_ms,
        streams=(glob.escape(key),),
        groups=(glob.escape(name),),
        max_deliveries=options.max_deliveries if options.dead_letter else None,
    )
    claim = store.claim_stale(selection, owners, dry_run=options.dry_run)
    claimed, purged = claim.counts.get((key, name), (0, 0))
    return replace(
        report,
        claimed=claimed,
        purged=purged,
        owners=tuple(owners) if claimed else (),
        conflicts_retried=report.conflicts_retried + claim.attempts - 1,
    )


def _owners(snapshot: Snapshot, group: GroupMeta, options: RecoveryOptions, now: int) -> list[str]:
    """The recovery consumer, or the group's consumers active within the live window (never empty)."""
    if options.assign == "consumer":
        return [options.consumer]
    live = [
        consumer.name
        for consumer in snapshot.consumers(group.key, group.name)
        if consumer.active_time != C.NEVER_ACTIVE
        and now - consumer.active_time <= options.live_window_ms
        and consumer.name != options.consumer
    ]
    if not live:
        log.warning(
            "%s/%s: no consumer was active in the last %d ms; claiming to the recovery consumer %r",
            group.key,
            group.name,
            options.live_window_ms,
            options.consumer,
        )
        return [options.consumer]
    return live


def _copy_dead_letters(
    store: StreamStore, snapshot: Snapshot, group: GroupMeta, is_poison: Column, now: int, run_id: str
) -> None:
    """Step 1: appends the poison entries, as the snapshot shows them, to ``dead_letters`` (one commit)."""
    key = group.key
    pending = snapshot.pending_frame(key, group.name).where(is_poison)
    entries = snapshot.partition(stream_partition(key), C.KIND_ENTRY).select(C.ID_MS, C.ID_SEQ, C.FIELDS)
    rows = pending_with_fields(pending, entries, [C.ID_MS, C.ID_SEQ]).select(
        F.lit(run_id).alias("run_id"), F.timestamp_millis(F.lit(now)).alias("dead_lettered_at"), "*"
    )
    path = ensure_dead_letter_table(store.session(), store.path)
    rows.write.format("delta").mode("append").option("userMetadata", f"DEAD LETTER {run_id}").save(path)


def _acknowledge_dead_letters(store: StreamStore, group: GroupMeta, run_id: str, copied: int) -> tuple[int, int, int]:
    """Step 2: acknowledges the entries this run copied, if they are still exactly as copied.

    The entries to delete are read back from ``dead_letters``, so nothing leaves the PEL without a
    committed copy. An entry acknowledged or claimed by someone else since the copy is left alone and
    its copy withdrawn. ``copied`` is how many copies step 1 wrote. Returns (acknowledged, withdrawn, attempts).
    """
    key, name = group.key, group.name
    copies = _run_copies(store, group, run_id).select(
        F.col("id").alias(_COPY_ID), C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS
    )
    last_match: list[DataFrame | None] = [None]

    def decide(ctx: Context) -> int:
        head = ctx.snapshot.group(key, name)
        if head is None:
            last_match[0] = None
            return 0
        pending = ctx.snapshot.pending_frame(key, name).withColumn(_COPY_ID, id_text(C.ID_MS, C.ID_SEQ))
        matched = pending.join(copies, on=[_COPY_ID, C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS], how="left_semi")
        last_match[0] = matched
        count = int(matched.count())
        if count:
            ctx.plan.add_frame(source_frame_for_deletes(matched), group_partition(key, name))
            put_group(ctx, head, head)
        return count

    acknowledged = store.transact("DEAD LETTER ACK", decide)
    attempts = store.last_attempts
    withdrawn = copied - acknowledged
    if withdrawn:
        _withdraw_copies(store, group, run_id, copies, last_match[0])
    return acknowledged, withdrawn, attempts


def _run_copies(store: StreamStore, group: GroupMeta, run_id: str) -> DataFrame:
    """This run's dead letters of one group."""
    path = table_path(store.path, C.DEAD_LETTER_TABLE_DIR)
    return (
        store.session()
        .read.format("delta")
        .load(path)
        .where((F.col("run_id") == run_id) & (F.col(C.STREAM) == group.key) & (F.col(C.GROUP) == group.name))
    )


def _withdraw_copies(
    store: StreamStore, group: GroupMeta, run_id: str, copies: DataFrame, matched: DataFrame | None
) -> None:
    """Deletes this run's copies of entries it did not acknowledge (they are still, or again, in use)."""
    unacknowledged = copies if matched is None else copies.join(matched.select(_COPY_ID), _COPY_ID, "left_anti")
    ids = [row[_COPY_ID] for row in unacknowledged.select(_COPY_ID).distinct().collect()]
    log.warning(
        "%s/%s: %d dead-lettered entr(y/ies) changed before the acknowledgement; withdrawing their copies: %s",
        group.key,
        group.name,
        len(ids),
        ", ".join(ids[:10]),
    )
    path = table_path(store.path, C.DEAD_LETTER_TABLE_DIR)
    condition = (
        (F.col("run_id") == run_id)
        & (F.col(C.STREAM) == group.key)
        & (F.col(C.GROUP) == group.name)
        & F.col("id").isin(ids)
    )

    def delete(_: int) -> None:
        DeltaTable.forPath(store.session(), path).delete(condition)

    run_with_retries(delete, store.retry_policy, "DEAD LETTER WITHDRAW")


def _record(store: StreamStore, report: RecoveryReport) -> RecoveryReport:
    """Appends the run's row to ``recovery_runs`` (a blind append: it never conflicts)."""
    session = store.session()
    path = ensure_recovery_runs_table(session, store.path)
    frame = session.createDataFrame([report.run_row()], RECOVERY_RUNS_SCHEMA)
    frame.write.format("delta").mode("append").option("userMetadata", f"RECOVERY RUN {report.run_id}").save(path)
    return replace(report, recorded=True)


def _timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _iso(ms: int) -> str:
    return _timestamp(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")

"""The redrive run: put dead-lettered entries back into the groups they died in, exactly once.

A run makes the same few commits whatever the number of entries or groups (docs/RECOVERY.md, "Redrive"):

1. **Take** (one MERGE into ``dead_letters``): every free letter of the chosen entries is marked with the
   run's ID — entries of the selected groups, matching ``where``, redriven fewer than ``max_redrives``
   times, oldest first up to ``limit`` — so a racing run takes none of them.
2. **Put back** (one commit to the state table, named ``REDRIVE <run_id>``; put_back.py): each entry back
   in its group's NACK zone, or re-added to ``to_stream`` when its stream entry is gone.
3. **Mark** (one MERGE into ``dead_letters``): the letters of entries that went back get ``redriven_at``;
   the others are freed (they stay dead), and one row goes to ``redrive_runs``.

A run that stops after 1 leaves letters taken and not marked. The next run adopts them once the stopped
run is gone by the evidence (recorded as failed, or its heartbeat stopped: heartbeat.py): it takes its
letters over, fences their groups in the state table (put_back.fence: the stopped run's put-back can no
longer land), and only then reads the history: if the stopped run's put-back is there it marks the
letters by the rows that commit wrote; otherwise it puts them back itself. A run taken for gone that
was only slow finds its letters gone at its put-back (``RedriveAdoptedError``) and commits nothing. So
each entry goes back once, and each re-added entry is added once, whatever runs overlap or stop.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, replace

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.patterns import matches
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import (
    InvalidArgumentError,
    RedriveAdoptedError,
    RedriveFailedError,
    RedriveSelectionError,
)
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.recovery.run import RecoveryStore
from streamclaim_spark.fleet.redrive.heartbeat import Heartbeat
from streamclaim_spark.fleet.redrive.letters import (
    ENTRY_KEY,
    TAKEN_BY,
    adoptable,
    choose,
    free_entries,
    mark,
    newest_letters,
    take,
    taken_by,
)
from streamclaim_spark.fleet.redrive.put_back import OUTCOMES, back_entries, fence, put_back
from streamclaim_spark.fleet.redrive.report import ADOPTED, FAILED, RedriveReport
from streamclaim_spark.state.companion_schema import DEAD_LETTER_SCHEMA, REDRIVE_COLUMNS, REDRIVE_RUNS_SCHEMA
from streamclaim_spark.state.delta_io import AUTO_COMPACTION_OPERATION, is_delta_table, latest_version, quoted_path
from streamclaim_spark.state.tables import (
    ensure_redrive_columns,
    ensure_redrive_runs_table,
    table_path,
)

log = logging.getLogger("streamclaim_spark.fleet.redrive")

_MAX_ERROR_CHARS = 2_000
# The user metadata of a redrive's put-back commit: the run's ID, then the commit's own token.
_PUT_BACK = "REDRIVE"
# How the state table's history is searched for a stopped run's put-back (``_landed_put_backs``).
HISTORY_PAGE = 1_000
HISTORY_SLACK_MS = 3_600_000


def redrive(store: RecoveryStore, options: RedriveOptions, *, run_id: str | None = None) -> RedriveReport:
    """Puts the dead letters the options select back into their groups, in a constant number of commits.

    Args:
        store: The store (a ``StreamStore``, or anything with its ``path``, ``runner`` and ``safety``).
        options: What to select and how to put it back (``RedriveOptions``).
        run_id: Identifier written to ``dead_letters`` and ``redrive_runs`` (default a random UUID).

    Returns:
        The run's report; it is also in ``redrive_runs`` unless ``options.dry_run``.

    Raises:
        RedriveSelectionError: No group matches the patterns, or ``where`` does not parse (nothing written).
        RedriveFailedError: The run stopped on an error; (unless a dry run) it is recorded with its error,
            and the next run finishes what it left half-done.
    """
    runner, path = store.runner, store.path
    session = runner.session()
    run_id = run_id or uuid.uuid4().hex
    if not run_id or any(char.isspace() for char in run_id):
        raise InvalidArgumentError(f"run_id={run_id!r}: give an identifier without spaces (or none for a UUID)")
    started = runner.clock()
    report = RedriveReport(run_id, path, options, started, started)
    check_where(session, options.where)
    letters_path = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    has_letters = is_delta_table(session, letters_path)
    pairs = select_pairs(runner, options, letters_path if has_letters else None)
    action = "dry run" if options.dry_run else "run"
    log.info("redrive %s %s on %s: %d group(s) selected", action, run_id, path, len(pairs), extra=C.PROGRESS)
    heartbeat = Heartbeat(session, path, run_id)
    try:
        if has_letters:
            if not options.dry_run:
                heartbeat.start()
            report = _redrive(runner, path, options, pairs, report, heartbeat)
    except Exception as error:
        message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_CHARS]
        status = ADOPTED if isinstance(error, RedriveAdoptedError) else FAILED
        failed = replace(report, ended_at_ms=runner.clock(), status=status, error=message)
        log.error("redrive %s %s %s: %s", action, run_id, status, message)
        if not options.dry_run:
            try:
                failed = _record(session, path, failed)
            except Exception:
                log.exception("could not record failed redrive %s in redrive_runs", run_id)
        raise RedriveFailedError(f"redrive {run_id} failed: {message}", failed) from error
    finally:
        heartbeat.stop()
    report = replace(report, ended_at_ms=runner.clock())
    if not options.dry_run:
        report = _record(session, path, report)
    log.info("redrive %s %s done (%s): %s", action, run_id, report.status, report.totals, extra=C.PROGRESS)
    return report


def check_where(session: SparkSession, where: str | None) -> None:
    """Refuses a ``where`` that does not parse, or names columns the ``dead_letters`` view lacks (checked
    on an empty frame of its schema: nothing is read)."""
    if where is None:
        return
    try:
        _ = session.createDataFrame([], DEAD_LETTER_SCHEMA).where(F.expr(where)).schema
    except AnalysisException as error:
        first_line = str(error).strip().splitlines()[0]
        raise RedriveSelectionError(
            f"where={where!r} is not a predicate over the dead_letters view ({first_line}); its columns are "
            f"{', '.join(DEAD_LETTER_SCHEMA.names)}: fix --where (jobs.redrive.where)"
        ) from None


def select_pairs(runner: Runner, options: RedriveOptions, letters_path: str | None) -> list[Pair]:
    """The (stream, group) pairs the patterns select: groups of the store and groups with dead letters
    (their group may have been destroyed since). RedriveSelectionError when there are none."""
    found: set[Pair] = set()
    for meta in runner.snapshot().all_streams():
        found.update((meta.key, name) for name in meta.groups)
    if letters_path is not None:
        letters = runner.session().read.format("delta").load(letters_path)
        found.update((row[C.STREAM], row[C.GROUP]) for row in letters.select(C.STREAM, C.GROUP).distinct().collect())
    pairs = sorted(p for p in found if matches(p[0], options.streams) and matches(p[1], options.groups))
    if not pairs:
        raise RedriveSelectionError(
            f"streams={list(options.streams)} groups={list(options.groups)}: no consumer group and no dead "
            f"letter matches (the store and its dead letters name {len(found)} group(s)); fix the patterns "
            "(--streams/--groups, jobs.redrive.streams/groups)"
        )
    return pairs


def _redrive(
    runner: Runner,
    path: str,
    options: RedriveOptions,
    pairs: list[Pair],
    report: RedriveReport,
    heartbeat: Heartbeat,
) -> RedriveReport:
    """Steps 1-3 of the module docstring, after finishing what stopped runs left."""
    session, run_id, policy, now = runner.session(), report.run_id, runner.retry_policy, runner.clock()
    letters_path = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    if not options.dry_run:
        ensure_redrive_columns(session, path)
    letters = _letters(session, letters_path)
    adoption = _adopt(runner, path, letters, pairs, run_id, now, options.dry_run, heartbeat)
    stopped, unlanded = adoption.stopped, adoption.unlanded
    chosen, choice = choose(free_entries(letters, session, pairs, options.where), options.max_redrives, options.limit)
    report = replace(
        report, capped=choice.capped, remaining=choice.remaining, adopted=adoption.entries, adopted_runs=stopped
    )
    if options.dry_run:
        taken = letters.join(chosen, ENTRY_KEY, "left_semi").where(F.col(TAKEN_BY).isNull())
        taken = taken.unionByName(taken_by(letters, unlanded)) if unlanded else taken
        outcome = put_back(runner, newest_letters(taken), options, run_id, dry_run=True)
        return replace(report, groups=outcome.outcomes)
    if not choice.chosen and not unlanded:
        return report  # nothing to take: no commit anywhere
    if choice.chosen:
        take(session, letters_path, chosen, run_id, [], now, policy)  # the adopted letters are taken already
    # The letters as taken, pinned: the put-back decides on them, not on what an adopter made of them since.
    taken_version = latest_version(session, letters_path)
    mine = newest_letters(taken_by(_letters(session, letters_path, taken_version), [run_id]))

    def still_taken() -> bool:
        return taken_by(_letters(session, letters_path), [run_id]).limit(1).count() > 0

    outcome = put_back(runner, mine, options, run_id, dry_run=False, still_taken=still_taken)
    back = _empty_back(session)
    if outcome.version is not None:
        partitions = [group_partition(*pair) for pair in outcome.outcomes]
        if options.to_stream is not None:
            partitions.append(stream_partition(options.to_stream))
        back = back_entries(runner, outcome.version, outcome.txn, partitions)
    mark(session, letters_path, back, run_id, [run_id], runner.clock(), policy)
    totals: Counter[str] = sum(outcome.outcomes.values(), Counter())
    log.info("redrive %s put back (state version %s): %s", run_id, outcome.version, dict(totals), extra=C.PROGRESS)
    for (key, group), counts in sorted(outcome.outcomes.items()):
        log.info("%s/%s: %s", key, group, ", ".join(f"{counts[name]} {name}" for name in OUTCOMES if counts[name]))
    return replace(report, groups=dict(sorted(outcome.outcomes.items())))


@dataclass(frozen=True)
class _Adoption:
    """The runs that stopped half-way (``stopped``), those of them whose put-back never landed (``unlanded``:
    this run takes their letters over), and how many entries they had taken."""

    stopped: tuple[str, ...]
    unlanded: list[str]
    entries: int


# Long: the adoption's steps in the order its guarantee needs (take over, fence, then read the history,
# then mark what had landed); each is one call.
def _adopt(
    runner: Runner,
    path: str,
    letters: DataFrame,
    pairs: list[Pair],
    run_id: str,
    now: int,
    dry_run: bool,
    heartbeat: Heartbeat,
) -> _Adoption:
    """Finds the runs that are gone half-way, takes their letters over and fences their groups, then marks
    the letters of those whose put-back had landed (by the rows that commit wrote); the others' letters
    are this run's to put back (unless a dry run, which changes nothing and only reads the history)."""
    session = runner.session()
    letters_path = table_path(path, C.DEAD_LETTER_TABLE_DIR)
    taken_at = adoptable(letters, _failed_runs(session, path), pairs, session, now, heartbeat.gone)
    stopped = sorted(run for run in taken_at if run != run_id)
    if not stopped:
        return _Adoption((), [], 0)
    theirs = taken_by(letters, stopped)
    entries = theirs.select(*ENTRY_KEY).distinct().count()
    if not dry_run:
        fenced = sorted((row[C.STREAM], row[C.GROUP]) for row in theirs.select(C.STREAM, C.GROUP).distinct().collect())
        take(session, letters_path, _empty_back(session), run_id, stopped, now, runner.retry_policy)
        fence(runner, fenced, run_id)  # from here on, no put-back of theirs can land
    landed = _landed_put_backs(session, runner.state_path, stopped, min(taken_at[run] for run in stopped))
    log.warning(
        "redrive %s adopts %d entries of run(s) gone half-way: %s (put back already: %s)",
        run_id,
        entries,
        ", ".join(stopped),
        ", ".join(landed) or "none",
    )
    if not dry_run:
        for stopped_run, (version, txn) in landed.items():
            back = back_entries(runner, version, txn, None)
            # Marked in the stopped run's name: it redrove them (max_redrives counts it once).
            runs = [stopped_run, run_id]
            policy = runner.retry_policy
            mark(session, letters_path, back, stopped_run, runs, runner.clock(), policy, taken_at[stopped_run])
        for stopped_run in stopped:
            heartbeat.forget(stopped_run)
    return _Adoption(tuple(stopped), [run for run in stopped if run not in landed], entries)


def _failed_runs(session: SparkSession, path: str) -> list[str]:
    """The redrive runs recorded as failed (their taken letters are adopted at once)."""
    runs = table_path(path, C.REDRIVE_RUNS_TABLE_DIR)
    if not is_delta_table(session, runs):
        return []
    failed = session.read.format("delta").load(runs).where(F.col("status") == F.lit(FAILED))
    return [row["run_id"] for row in failed.select("run_id").collect()]


def _letters(session: SparkSession, letters_path: str, version: int | None = None) -> DataFrame:
    """The dead-letter table (as of ``version``: None, the newest at each read), with the redrive columns
    as nulls where it was made before them (a dry run on such a table adds nothing)."""
    reader = session.read.format("delta")
    letters = (reader if version is None else reader.option("versionAsOf", version)).load(letters_path)
    for name in REDRIVE_COLUMNS:
        if name not in letters.columns:
            letters = letters.withColumn(name, F.lit(None).cast(DEAD_LETTER_SCHEMA[name].dataType))
    return letters


def _landed_put_backs(
    session: SparkSession, state_path: str, runs: list[str], since_ms: int
) -> dict[str, tuple[int, str]]:
    """The stopped runs whose put-back commit is in the state table's history: run -> (version, its token).

    The history is read newest first, HISTORY_PAGE commits and then four times more each time, until it
    reaches commits older than the runs took their letters (``since_ms``, less HISTORY_SLACK_MS for clocks
    that disagree) or its start: a busy store's month of log is not read to find this hour's commit.
    """
    if not runs:
        return {}
    landed: dict[str, tuple[int, str]] = {}
    limit = HISTORY_PAGE
    while True:
        history = session.sql(f"DESCRIBE HISTORY {quoted_path(state_path)} LIMIT {limit}")
        rows = history.select("version", "timestamp", "operation", "userMetadata").collect()
        for row in rows:
            words = (row["userMetadata"] or "").split(" ")
            if (
                row["operation"] != AUTO_COMPACTION_OPERATION
                and len(words) == 3
                and words[0] == _PUT_BACK
                and words[1] in runs
            ):
                landed.setdefault(words[1], (row["version"], words[2]))
        oldest = min((row["timestamp"] for row in rows), default=None)
        if len(rows) < limit or oldest is None or oldest.timestamp() * 1000 < since_ms - HISTORY_SLACK_MS:
            return landed
        limit *= 4


def _empty_back(session: SparkSession) -> DataFrame:
    return session.createDataFrame([], f"{C.STREAM} string, {C.GROUP} string, id string")


def _record(session: SparkSession, path: str, report: RedriveReport) -> RedriveReport:
    """Appends the run's row to the store's ``redrive_runs`` (a blind append: it never conflicts)."""
    table = ensure_redrive_runs_table(session, path)
    frame = session.createDataFrame([report.run_row()], REDRIVE_RUNS_SCHEMA)
    frame.write.format("delta").mode("append").option("userMetadata", f"REDRIVE RUN {report.run_id}").save(table)
    return replace(report, recorded=True)

"""The state side of a redrive: every taken entry back into the group it died in, in one commit for all groups.

An entry whose stream entry still exists goes back as XNACK FORCE would put it: an owner-less PEL row at
the end of its group's NACK zone (model.nack_time), so that only that group sees it again, first, through
XREADGROUP ... CLAIM (or XCLAIM/XAUTOCLAIM whatever their min-idle-time); the group's cursor and its
other entries stay as they are. An entry whose stream entry is gone becomes, with ``to_stream``, a new
entry of that stream carrying its fields and where it came from. The commit is guarded on the heads of
the groups it writes, so what it decided on its snapshot (not yet pending again, the zone's end) holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RedriveOptions
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import source_of
from streamclaim_spark.engine.runner import Runner
from streamclaim_spark.errors import RedriveAdoptedError
from streamclaim_spark.fleet.bulk.append import plan_append
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.fleet.recovery.plan import entries_of, head_source, pending_of
from streamclaim_spark.fleet.redrive.letters import ENTRY_KEY, OLDEST
from streamclaim_spark.state.columns import id_text, stored_id_columns
from streamclaim_spark.state.frames import json_frame
from streamclaim_spark.state.nack_zone import first_nack_time
from streamclaim_spark.state.schema import FIELD_PAIR, in_partitions, kind_in

# What a redrive did with one entry (the OUTCOME column).
PUT_BACK = "redriven"  # back in its group's PEL, first in the NACK zone
RE_ADDED = "re_added"  # its stream entry was gone: a new entry of to_stream
ENTRY_GONE = "entry_gone"  # its stream entry was gone and no to_stream was given: stays dead
GROUP_GONE = "group_gone"  # its group was destroyed: stays dead
ALREADY_PENDING = "already_pending"  # its group holds it again (claimed with FORCE, or never acknowledged)
OUTCOMES = (PUT_BACK, RE_ADDED, ENTRY_GONE, GROUP_GONE, ALREADY_PENDING)
OUTCOME = "_outcome"
# The fields a re-added entry carries after its own, naming where it died.
FROM_STREAM, FROM_GROUP, FROM_ID = (b"redriven_from_stream", b"redriven_from_group", b"redriven_from_id")

_PARTITIONS = StructType(
    [StructField(C.STREAM, StringType()), StructField(C.GROUP, StringType()), StructField(C.PARTITION_ID, StringType())]
)
_PEL_KEY = [C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ]
_EXISTS = "_exists"
_PENDING = "_pending"
_NACK_TIME = "_nack_time"


@dataclass
class PutBack:
    """The outcome of every taken entry, per group, and the commit that applied it (None: nothing to write)."""

    outcomes: dict[Pair, Counter[str]] = field(default_factory=dict)
    version: int | None = None
    txn: str = ""

    def total(self, outcome: str) -> int:
        return sum(counts[outcome] for counts in self.outcomes.values())


def put_back(
    runner: Runner,
    taken: DataFrame,
    options: RedriveOptions,
    run_id: str,
    dry_run: bool,
    still_taken: Callable[[], bool] = lambda: True,
) -> PutBack:
    """Decides each taken entry's outcome on a fresh snapshot and (unless ``dry_run``) commits them all as
    one transaction named ``REDRIVE <run_id>``, which a later run finds in the state table's history.

    ``taken`` should be a pinned read of the letters. Each attempt asks ``still_taken``, after its
    snapshot is pinned and its entries classified, whether the run still holds its letters, and raises
    ``RedriveAdoptedError`` when not. An adopter takes the letters over, then fences the groups
    (``fence``): a put-back that passed the check before the take writes heads the fence rewrote and
    loses its race, and its re-run finds the letters gone. So a run taken for gone never lands after
    the fence.
    """
    pairs = sorted((row[C.STREAM], row[C.GROUP]) for row in taken.select(C.STREAM, C.GROUP).distinct().collect())
    if not pairs:
        return PutBack()

    def decide(ctx: Context) -> PutBack:
        classified = _classify(ctx, taken, pairs, options)
        outcome = PutBack(_tally(classified), txn=ctx.txn)
        if not dry_run and not still_taken():
            raise RedriveAdoptedError(
                f"redrive {run_id}: another run adopted its letters before its put-back committed (it was "
                "taken for gone); that run puts them back, and this one commits nothing"
            )
        if not dry_run:
            _plan(ctx, classified, outcome, options)
        return outcome

    result = runner.transact(f"REDRIVE {run_id}", decide)
    result.version = runner.last_commit_version
    return result


def _classify(ctx: Context, taken: DataFrame, pairs: list[Pair], options: RedriveOptions) -> DataFrame:
    """Every taken entry with its OUTCOME on the context's snapshot (and its stored ID and partition)."""
    snapshot = ctx.snapshot
    snapshot.all_streams()
    present = [pair for pair in pairs if snapshot.group(*pair) is not None]
    records = [{C.STREAM: key, C.GROUP: group, C.PARTITION_ID: group_partition(key, group)} for key, group in present]
    ms, seq = stored_id_columns(F.col("id"))
    rows = taken.withColumn(C.ID_MS, ms).withColumn(C.ID_SEQ, seq)
    rows = rows.join(F.broadcast(json_frame(ctx.snapshot.spark, records, _PARTITIONS)), [C.STREAM, C.GROUP], "left")
    outcome = F.when(F.col(C.PARTITION_ID).isNull(), F.lit(GROUP_GONE))
    if present:
        entries = entries_of(snapshot, present).select(C.STREAM, C.ID_MS, C.ID_SEQ, F.lit(True).alias(_EXISTS))
        pending = pending_of(snapshot, present).select(
            C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, F.lit(True).alias(_PENDING)
        )
        rows = rows.join(entries, [C.STREAM, C.ID_MS, C.ID_SEQ], "left").join(pending, _PEL_KEY, "left")
        outcome = outcome.when(F.col(_PENDING).isNotNull(), F.lit(ALREADY_PENDING)).when(
            F.col(_EXISTS).isNotNull(), F.lit(PUT_BACK)
        )
    gone = F.lit(RE_ADDED if options.to_stream is not None else ENTRY_GONE)
    return rows.withColumn(OUTCOME, outcome.otherwise(gone))


def _tally(classified: DataFrame) -> dict[Pair, Counter[str]]:
    tallies: dict[Pair, Counter[str]] = {}
    for row in classified.groupBy(C.STREAM, C.GROUP, OUTCOME).count().collect():
        tallies.setdefault((row[C.STREAM], row[C.GROUP]), Counter())[row[OUTCOME]] += row["count"]
    return tallies


def fence(runner: Runner, pairs: list[Pair], run_id: str) -> int | None:
    """Rewrites the heads of the groups ``pairs`` (versions bumped, guarded) in one commit: a put-back of
    their letters decided on an older snapshot now loses its race (``put_back``). Returns the version."""

    def decide(ctx: Context) -> None:
        ctx.snapshot.all_streams()
        partitions = [group_partition(*pair) for pair in pairs if ctx.snapshot.group(*pair) is not None]
        if partitions:
            ctx.plan.add_frame(head_source(ctx.snapshot, partitions, ctx.txn), *partitions)

    runner.transact(f"REDRIVE FENCE {run_id}", decide)
    return runner.last_commit_version


def _plan(ctx: Context, classified: DataFrame, outcome: PutBack, options: RedriveOptions) -> None:
    """Adds the PEL rows, the bumped group heads and the re-added entries to the context's commit. The
    heads of every group an entry goes back to or is re-added from are written, so that an adopter's
    fence of those groups and this commit cannot both land (``put_back``)."""
    back = sorted(pair for pair, counts in outcome.outcomes.items() if counts[PUT_BACK])
    written = sorted(pair for pair, counts in outcome.outcomes.items() if counts[PUT_BACK] or counts[RE_ADDED])
    fenced = [group_partition(*pair) for pair in written]
    if fenced and not back:
        ctx.plan.add_frame(head_source(ctx.snapshot, fenced, ctx.txn), *fenced)
    if back:
        partitions = [group_partition(*pair) for pair in back]
        rows = _with_nack_times(ctx, classified.where(F.col(OUTCOME) == PUT_BACK), partitions)
        count = F.lit(0) if options.reset_count else F.col(C.DELIVERY_COUNT)
        values = {
            C.ROW_KIND: F.lit(C.KIND_PENDING),
            C.OWNER: F.lit(None).cast(StringType()),
            C.DELIVERY_TIME_MS: F.col(_NACK_TIME),
            C.DELIVERY_COUNT: count.cast("bigint"),
            C.FIELDS: F.lit(None),
            C.TXN: F.lit(ctx.txn),
        }
        pel = source_of(
            rows.select(C.PARTITION_ID, C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, C.DELIVERY_COUNT, _NACK_TIME), values
        )
        ctx.plan.add_frame(pel.unionByName(head_source(ctx.snapshot, fenced, ctx.txn)), *fenced)
    if options.to_stream is not None and outcome.total(RE_ADDED):
        gone = classified.where(F.col(OUTCOME) == RE_ADDED).orderBy(OLDEST, *ENTRY_KEY)
        plan_append(ctx, gone.select(_re_added_fields().alias(C.FIELDS)), options.to_stream, C.FIELDS)


def _with_nack_times(ctx: Context, rows: DataFrame, partitions: list[str]) -> DataFrame:
    """Each group's entries get consecutive NACK-zone times after the zone's current end (model.nack_time),
    oldest dead letter first, as one XNACK ... FORCE per group listing them in that order would."""
    zone = (
        ctx.snapshot.frame()
        .where(kind_in(partitions, C.KIND_PENDING))
        .where(F.col(C.DELIVERY_TIME_MS) < 0)
        .groupBy(C.STREAM, C.GROUP)
        .agg(F.max(C.DELIVERY_TIME_MS).alias("_zone_end"))
    )
    first = first_nack_time(F.col("_zone_end"), ctx.now)
    in_order = Window.partitionBy(C.STREAM, C.GROUP).orderBy(OLDEST, C.ID_MS, C.ID_SEQ)
    rows = rows.join(zone, [C.STREAM, C.GROUP], "left")
    return rows.withColumn(_NACK_TIME, first + F.row_number().over(in_order) - 1)


def _re_added_fields() -> Column:
    """A gone entry's fields as a new entry carries them: its own (none if it was already gone when it was
    dead-lettered), then where it died."""

    def pair(name: bytes, value: Column) -> Column:
        return F.struct(F.lit(name).cast(BinaryType()).alias("field"), value.cast(BinaryType()).alias("value"))

    origin = F.array(pair(FROM_STREAM, F.col(C.STREAM)), pair(FROM_GROUP, F.col(C.GROUP)), pair(FROM_ID, F.col("id")))
    own = F.coalesce(F.col(C.FIELDS), F.array().cast(ArrayType(FIELD_PAIR)))
    return F.concat(own, origin)


def back_entries(runner: Runner, version: int, txn: str, partitions: list[str] | None) -> DataFrame:
    """The entries (stream, group, id) a redrive commit put back or re-added, read from the rows it wrote
    (time travel to ``version``, its rows carrying its ``txn``; only ``partitions``, None: every one): the
    truth a run marks its letters by, and a later run's, when the run stopped before marking them."""
    written = runner.table_at(version).where(F.col(C.TXN) == F.lit(txn))
    if partitions is not None:
        written = written.where(in_partitions(partitions))
    pel = written.where(F.col(C.ROW_KIND) == C.KIND_PENDING).select(
        C.STREAM, C.GROUP, id_text(C.ID_MS, C.ID_SEQ).alias("id")
    )

    def origin(name: bytes) -> Column:
        found = F.filter(F.col(C.FIELDS), lambda pair: pair["field"] == F.lit(name).cast(BinaryType()))
        return F.element_at(found, -1)["value"].cast(StringType())

    re_added = written.where(F.col(C.ROW_KIND) == C.KIND_ENTRY).select(
        origin(FROM_STREAM).alias(C.STREAM), origin(FROM_GROUP).alias(C.GROUP), origin(FROM_ID).alias("id")
    )
    return pel.unionByName(re_added.where(F.col("id").isNotNull()))

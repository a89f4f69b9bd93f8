"""What a recovery round does to each pending entry, and the MERGE source rows that apply it.

``classify`` gives every pending row of the selected groups an action — left alone, dead-lettered,
acknowledged as dead-lettered, claimed, given back or purged — and, for a claim, its new owner (the
recovery consumer or one of the group's live consumers) or, with ``assign="nack"``, its NACK-zone
delivery time. ``pending_source``, ``head_source`` and ``consumer_source`` turn the classified rows
into the one guarded MERGE of a claim round.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import (
    CLAIM_CUTOFF,
    CLAIM_FORCE,
    CLAIM_JUST_ID,
    CLAIM_LIVE,
    CLAIM_STEPS,
    OP_CLAIM,
    OP_DELETE,
    OP_EXPECT,
    OP_GUARD,
    source_of,
)
from streamclaim_spark.fleet.claims.owners import GroupTally, Pair, spread_over
from streamclaim_spark.fleet.claims.selection import with_entry_exists
from streamclaim_spark.fleet.claims.staleness import is_stale
from streamclaim_spark.fleet.recovery.rules import GroupRules
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.nack_zone import first_nack_time
from streamclaim_spark.state.schema import in_partitions, kind_in
from streamclaim_spark.state.snapshot import Snapshot

# What a run does to one pending entry (the ACTION column of a classified PEL).
FRESH = "fresh"  # idle less than min_idle: left alone
POISON = "poison"  # stale and delivered more than max_deliveries times: to dead-letter
ACK = "ack"  # copied to dead_letters by this run and still exactly as copied: acknowledged
CLAIM = "claim"  # stale, its stream entry exists: claimed (assign="nack": given back to the group)
WAITING = "waiting"  # assign="nack": already given back (XNACKed, owner-less), waiting for redelivery
PURGE = "purge"  # stale, its stream entry was deleted: leaves the PEL, as XAUTOCLAIM does
ACTION = "_action"
NEW_OWNER = "_new_owner"
_OWNERS = "_owners"
_COPIED = "_copied"
_ENTRY_EXISTS = "_entry_exists"
_NACK_TIME = "_nack_time"
# A dead-letter copy holds its entry's stream, group, ID (as COPY_ID), owner, delivery count and time.
# It matches its pending row on all six, the owner null-safely: an XNACKed entry has none, and null
# never equals null in a join. COPY_KEY is those columns with the owner replaced by OWNER_KEY
# (``with_owner_key``).
COPY_ID = "_id"
OWNER_KEY = "_owner_key"
COPY_KEY = [C.STREAM, C.GROUP, COPY_ID, OWNER_KEY, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS]


def changes(tally: GroupTally) -> int:
    """Rows a claim commit writes for a group of this tally (acknowledged, claimed, purged)."""
    return tally.outcomes[ACK] + tally.outcomes[CLAIM] + tally.outcomes[PURGE]


def with_owner_key(frame: DataFrame) -> DataFrame:
    """``frame`` with OWNER_KEY: its owner, or a value no consumer name is expected to take when it has
    none (an XNACKed entry), so that equality joins match owner-less rows too."""
    return frame.withColumn(OWNER_KEY, F.coalesce(F.col(C.OWNER), F.lit("\x00xnack\x00")))


def pending_of(snapshot: Snapshot, pairs: Sequence[Pair]) -> DataFrame:
    """The groups' pending rows."""
    partitions = [group_partition(*pair) for pair in pairs]
    return snapshot.frame().where(snapshot.rows_of_kind(partitions, C.KIND_PENDING))


def entries_of(snapshot: Snapshot, pairs: Sequence[Pair]) -> DataFrame:
    """The entries of the groups' streams."""
    partitions = [stream_partition(key) for key in sorted({key for key, _ in pairs})]
    return snapshot.frame().where(snapshot.rows_of_kind(partitions, C.KIND_ENTRY))


def live_owners(
    snapshot: Snapshot, rules: GroupRules, now: int
) -> tuple[DataFrame | None, dict[Pair, tuple[str, ...]]]:
    """Each live-assigned group's live consumers (active within the live window, the recovery consumer
    excluded).

    Returns the (stream, group_name, _owners) frame the claim joins, sorted bytewise per group, and the
    same as a dict for the report; (None, {}) when no group's rule has ``assign`` ``live``.
    """
    pairs = rules.where(lambda rule: rule.assign == "live")
    if not pairs:
        return None, {}
    options = rules.options
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


def classify(
    snapshot: Snapshot,
    pairs: Sequence[Pair],
    rules: GroupRules,
    now: int,
    owners: DataFrame | None,
    copies: DataFrame | None,
) -> DataFrame:
    """Every pending row of the groups with its ACTION and, for claims, its NEW_OWNER, each group by its
    rule (rules.py: its policy over the run's options).

    The new owner is the recovery consumer, or one of the group's live consumers picked by a hash of
    the entry's stream, group and ID (stable: the same entry goes to the same consumer on a re-run), or,
    with ``assign="nack"``, none (given back with a NACK-zone time, ``_with_nack_times``).
    """
    pending = pending_of(snapshot, pairs).drop(C.FIELDS)
    # Whether each entry still exists, not its payload: the payload column is never read here.
    rows = with_entry_exists(snapshot, pending, (key for key, _ in pairs), _ENTRY_EXISTS)
    rows = rows.withColumn(COPY_ID, id_text(C.ID_MS, C.ID_SEQ))
    copied: Column = F.lit(False)
    if copies is not None:
        matches = with_owner_key(copies).drop(C.OWNER).withColumn(_COPIED, F.lit(True))
        rows = with_owner_key(rows).join(matches, COPY_KEY, "left").drop(OWNER_KEY)
        copied = F.col(_COPIED).isNotNull()
    stale = rules.column(lambda rule: is_stale(now, rule.min_idle_ms, rule.backoff), pairs)
    poison = rules.column(
        lambda rule: (F.col(C.DELIVERY_COUNT) > F.lit(rule.max_deliveries)) if rule.dead_letter else F.lit(False), pairs
    )
    action = (
        F.when(copied, ACK)
        .when(~stale, FRESH)
        .when(poison, POISON)
        .when(nacking(rules, pairs) & F.col(C.OWNER).isNull(), WAITING)
        .when(F.col(_ENTRY_EXISTS).isNotNull(), CLAIM)
        .otherwise(PURGE)
    )
    rows = rows.withColumn(ACTION, action)
    if rules.any(lambda rule: rule.assign == "nack", pairs):
        rows = _with_nack_times(rows, now)
    if owners is not None:
        rows = rows.join(F.broadcast(owners), [C.STREAM, C.GROUP], "left")

    def new_owner(rule: RecoveryOptions) -> Column:
        if rule.assign == "nack":
            return F.lit(None).cast(StringType())
        if rule.assign == "live" and owners is not None:
            return F.coalesce(spread_over(F.col(_OWNERS)), F.lit(rule.consumer))
        return F.lit(rule.consumer)

    return rows.withColumn(NEW_OWNER, F.when(F.col(ACTION) == CLAIM, rules.column(new_owner, pairs)))


def nacking(rules: GroupRules, pairs: Sequence[Pair]) -> Column:
    """Whether a row's group gives its stale entries back (``assign="nack"``) instead of claiming them."""
    return rules.column(lambda rule: F.lit(rule.assign == "nack"), pairs)


def _with_nack_times(rows: DataFrame, now: int) -> DataFrame:
    """assign="nack": each group's entries to give back get consecutive NACK-zone delivery times after the
    zone's current end (model.nack_time), oldest delivery first, as one ``XNACK ... FAIL`` per group
    listing them in that order would give them (computed for every group; only nacking ones use it)."""
    is_claim = F.col(ACTION) == CLAIM
    per_group = Window.partitionBy(C.STREAM, C.GROUP)
    in_order = per_group.orderBy(F.when(is_claim, 0).otherwise(1), C.DELIVERY_TIME_MS, C.ID_MS, C.ID_SEQ)
    zone_end = F.max(F.when(F.col(C.DELIVERY_TIME_MS) < 0, F.col(C.DELIVERY_TIME_MS))).over(per_group)
    first = first_nack_time(zone_end, now)
    return rows.withColumn(_NACK_TIME, F.when(is_claim, first + F.row_number().over(in_order) - 1))


def pending_source(classified: DataFrame, ctx: Context, cutoff: Column, nacks: Column | None) -> DataFrame:
    """MERGE rows that acknowledge (ACK), purge (PURGE) or claim (CLAIM, under the MERGE's idle condition:
    ``cutoff``, staleness.idle_cutoff per rule).

    A claim gives the entry its new owner, delivery time now and one more delivery; where ``nacks`` (a
    row's group gives back, ``nacking``; None: no group does) it gives it back instead: no owner, its
    NACK-zone time, the count kept (XNACK FAIL). Every other state column is the row's own, the payload
    (never read here) null.
    """
    is_claim = F.col(ACTION) == CLAIM
    delivered_at = F.lit(ctx.now) if nacks is None else F.when(nacks, F.col(_NACK_TIME)).otherwise(F.lit(ctx.now))
    values = {
        C.OWNER: F.when(is_claim, F.col(NEW_OWNER)).otherwise(F.col(C.OWNER)),
        C.DELIVERY_TIME_MS: F.when(is_claim, delivered_at).otherwise(F.col(C.DELIVERY_TIME_MS)),
        C.TXN: F.lit(ctx.txn),
    }
    operations = {
        OP_DELETE: ~is_claim,
        OP_CLAIM: is_claim,
        CLAIM_LIVE: F.when(is_claim, F.lit(True)),
        CLAIM_CUTOFF: F.when(is_claim, cutoff),
        CLAIM_STEPS: F.when(is_claim, F.lit(1)),
        CLAIM_JUST_ID: F.when(is_claim, F.lit(False) if nacks is None else nacks),  # JUSTID keeps the count
        CLAIM_FORCE: F.when(is_claim, F.lit(False)),
    }
    return source_of(classified.where(F.col(ACTION).isin(ACK, CLAIM, PURGE)), values, operations)


def head_source(snapshot: Snapshot, partitions: list[str], txn: str) -> DataFrame:
    """The changed groups' head rows, version bumped and guarded on the version this round read."""
    heads = snapshot.frame().where(kind_in(partitions, C.KIND_GROUP))
    values = {C.VERSION: F.col(C.VERSION) + 1, C.TXN: F.lit(txn)}
    return source_of(heads, values, {OP_GUARD: F.lit(True), OP_EXPECT: F.col(C.VERSION)})


def consumer_source(classified: DataFrame, ctx: Context) -> DataFrame:
    """One consumer row per (group, new owner): seen and active now, whether it existed or not."""
    claims = classified.where((F.col(ACTION) == CLAIM) & F.col(NEW_OWNER).isNotNull())  # none when nacking
    owners = claims.select(C.PARTITION_ID, C.STREAM, C.GROUP, NEW_OWNER).distinct()
    values = {
        C.ROW_KIND: F.lit(C.KIND_CONSUMER),
        C.CONSUMER: F.col(NEW_OWNER),
        C.SEEN_TIME_MS: F.lit(ctx.now),
        C.ACTIVE_TIME_MS: F.lit(ctx.now),
        C.TXN: F.lit(ctx.txn),
    }
    return source_of(owners, values)

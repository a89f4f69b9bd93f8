"""Which pending entries a batched claim takes, who gets each, and how claimed entries look to users.

A ``StaleSelection`` names streams and groups by name or glob pattern and narrows their PEL rows by
idle time, owner, delivery count and any SQL predicate. ``stale_condition`` turns it into one
predicate that the decision's count and the commit's own condition share, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.backoff import Backoff
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.core.patterns import matches
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.merge_source import CLAIM_LIVE
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.fleet.claims.owners import Pair, spread_over, tally
from streamclaim_spark.fleet.claims.staleness import is_stale
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.schema import kind_in
from streamclaim_spark.state.snapshot import Snapshot

# Columns a candidate row carries besides its PEL row: the consumer that takes it, and its entry's
# fields (null: the entry was deleted from its stream, so the claim purges it from the PEL).
NEW_OWNER = "_new_owner"
ENTRY_FIELDS = "_fields"
# The new owner of a claimed (live) entry only: a purge creates or touches no consumer.
_WINNER = "_winner"
# Whether a row's stream is one whose entries are checked (with_entry_exists).
_MARKED = "_marked"


@dataclass(frozen=True)
class StaleSelection:
    """Which pending entries ``claim_stale`` considers.

    Args:
        min_idle_ms: Only entries idle at least this long (``now - delivery_time >= min_idle_ms``).
        streams: Stream names or glob patterns (``orders-*``); default every stream.
        groups: Group names or glob patterns; default every group.
        owners: Only entries currently owned by one of these consumers (default any owner).
        min_deliveries: Only entries delivered at least this often (default no bound).
        max_deliveries: Only entries delivered at most this often (default no bound).
        where: Extra Spark SQL predicate over the pending rows' columns (``owner``,
            ``delivery_count``, ``delivery_time_ms``, ``stream``, ``group_name``), default none.
        backoff: An entry delivered ``n`` times is stale only once idle for the larger of ``min_idle_ms``
            and the schedule's step for ``n`` (``core.backoff.parse_backoff("1m,5m,30m,2h")``); default none.
    """

    min_idle_ms: int
    streams: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ("*",)
    owners: tuple[str, ...] | None = None
    min_deliveries: int | None = None
    max_deliveries: int | None = None
    where: str | None = None
    backoff: Backoff | None = None

    def __post_init__(self) -> None:
        if self.min_idle_ms < 0:
            raise InvalidArgumentError(f"min_idle_ms={self.min_idle_ms}: give 0 or more milliseconds")
        for name in ("streams", "groups"):
            if isinstance(getattr(self, name), str):
                raise InvalidArgumentError(
                    f"{name}: give a tuple of names or patterns, e.g. ({getattr(self, name)!r},)"
                )
        if self.owners is not None and isinstance(self.owners, str):
            raise InvalidArgumentError(f"owners: give a tuple of consumer names, e.g. ({self.owners!r},)")
        if self.backoff is not None and not isinstance(self.backoff, Backoff):
            raise InvalidArgumentError(
                f"backoff: give a schedule, e.g. parse_backoff({self.backoff!r}) from streamclaim_spark.core.backoff"
            )
        low, high = self.min_deliveries, self.max_deliveries
        if low is not None and high is not None and low > high:
            raise InvalidArgumentError(f"min_deliveries={low} is above max_deliveries={high}: the range is empty")


@dataclass(frozen=True)
class BatchClaim:
    """The outcome of a batched claim.

    ``claimed`` is a DataFrame (stream, group_name, id, owner, delivery_count, delivery_time_ms,
    fields) of the entries the commit moved, read at the committed version; with ``dry_run`` it lists
    what would be claimed. ``counts`` maps (stream, group) to (claimed, purged) numbers.
    """

    claimed: DataFrame
    counts: dict[tuple[str, str], tuple[int, int]]
    version: int | None
    attempts: int
    replies: list[Any] = field(default_factory=list)

    @property
    def total_claimed(self) -> int:
        return sum(claimed for claimed, _ in self.counts.values())

    @property
    def total_purged(self) -> int:
        return sum(purged for _, purged in self.counts.values())


def selected_groups(ctx: Context, selection: StaleSelection) -> list[GroupMeta]:
    """The (stream, group) heads the selection names, read with every other head in one query."""
    selected: list[GroupMeta] = []
    for meta in ctx.snapshot.all_streams():
        if not matches(meta.key, selection.streams):
            continue
        names = [g for g in meta.groups if matches(g, selection.groups)]
        selected.extend(g for g in (ctx.snapshot.group(meta.key, name) for name in names) if g is not None)
    return selected


def new_owner(owners: Sequence[str]) -> Column:
    """One consumer, or a stable spread over several (claims.owners.spread_over)."""
    return F.lit(owners[0]) if len(owners) == 1 else spread_over(F.array(*map(F.lit, owners)))


def stale_condition(groups: Sequence[GroupMeta], selection: StaleSelection, now: int) -> Column:
    """The pending rows of ``groups`` the selection names that are stale at ``now`` (staleness.is_stale).

    One predicate serves the decision's count and the commit's own condition, so the two cannot drift.
    """
    condition = kind_in([group_partition(g.key, g.name) for g in groups], C.KIND_PENDING) & is_stale(
        now, selection.min_idle_ms, selection.backoff
    )
    if selection.owners is not None:
        condition = condition & F.col(C.OWNER).isin(list(selection.owners))
    if selection.min_deliveries is not None:
        condition = condition & (F.col(C.DELIVERY_COUNT) >= selection.min_deliveries)
    if selection.max_deliveries is not None:
        condition = condition & (F.col(C.DELIVERY_COUNT) <= selection.max_deliveries)
    if selection.where:
        condition = condition & F.expr(selection.where)
    return condition


def stream_entries(ctx: Context, groups: Sequence[GroupMeta]) -> DataFrame:
    """Entry rows of the streams ``groups`` belong to."""
    streams = sorted({g.key for g in groups})
    return ctx.snapshot.frame().where(kind_in([stream_partition(s) for s in streams], C.KIND_ENTRY))


def with_entry_exists(snapshot: Snapshot, rows: DataFrame, keys: Iterable[str], column: str) -> DataFrame:
    """``rows`` (pending rows of streams ``keys``) with ``column`` true where the entry a row names
    exists, null where it was deleted.

    Only streams whose head says that an entry a PEL row may name was deleted (``StreamMeta.some_deleted``)
    are joined with their entry IDs; in the others every pending entry exists, so a claim over streams
    that never deleted one reads no entry at all (docs/DESIGN.md, "Kept markers"). The heads are read
    from the snapshot, where the claim's ``all_streams`` put them.
    """
    wanted = set(keys)
    marked = sorted(key for key in wanted if (meta := snapshot.stream(key)) is None or meta.some_deleted)
    if not marked:
        return rows.withColumn(column, F.lit(True))
    partitions = [stream_partition(key) for key in marked]
    entries = snapshot.frame().where(kind_in(partitions, C.KIND_ENTRY))
    exists = entries.select(C.STREAM, C.ID_MS, C.ID_SEQ, F.lit(True).alias(column))
    joined = rows.join(exists, [C.STREAM, C.ID_MS, C.ID_SEQ], "left")
    if len(marked) == len(wanted):
        return joined
    flags = snapshot.spark.createDataFrame([(key,) for key in marked], f"{C.STREAM} string")
    joined = joined.join(F.broadcast(flags.withColumn(_MARKED, F.lit(True))), C.STREAM, "left")
    return joined.withColumn(column, F.when(F.col(_MARKED).isNull(), F.lit(True)).otherwise(F.col(column))).drop(
        _MARKED
    )


def candidates(ctx: Context, groups: list[GroupMeta], selection: StaleSelection, owners: Sequence[str]) -> DataFrame:
    """Stale pending rows of the selected groups, each with its new owner and whether its entry lives."""
    pel = ctx.snapshot.frame().where(stale_condition(groups, selection, ctx.now))
    entries = stream_entries(ctx, groups).select(C.STREAM, C.ID_MS, C.ID_SEQ, F.col(C.FIELDS).alias(ENTRY_FIELDS))
    joined = pel.drop(C.FIELDS).join(entries, on=[C.STREAM, C.ID_MS, C.ID_SEQ], how="left")
    return joined.withColumn(NEW_OWNER, new_owner(owners)).withColumn(CLAIM_LIVE, F.col(ENTRY_FIELDS).isNotNull())


def claim_counts(rows: DataFrame) -> tuple[dict[Pair, tuple[int, int]], dict[Pair, set[str]]]:
    """(claimed, purged) per group and the new owners of its claimed entries, in one aggregation.

    ``rows`` carry ``NEW_OWNER`` and ``CLAIM_LIVE`` (true: the entry lives and is claimed; false or
    null: it was deleted and is purged). A group with purges only has no new owners.
    """
    winners_only = rows.withColumn(_WINNER, F.when(F.col(CLAIM_LIVE), F.col(NEW_OWNER)))
    tallies = tally(winners_only, CLAIM_LIVE, _WINNER)
    counts = {
        pair: (group.outcomes[True], sum(group.outcomes.values()) - group.outcomes[True])
        for pair, group in tallies.items()
    }
    winners = {pair: group.owners for pair, group in tallies.items() if group.owners}
    return counts, winners


def claimed_frame(table: DataFrame, partitions: Sequence[str], txn: str) -> DataFrame:
    """The PEL rows a commit wrote (its ``txn``), with each entry's ID as text and its fields."""
    pel = table.where(kind_in(partitions, C.KIND_PENDING) & (F.col(C.TXN) == txn))
    entries = table.where(F.col(C.ROW_KIND) == C.KIND_ENTRY).select(C.STREAM, C.ID_MS, C.ID_SEQ, C.FIELDS)
    return pending_with_fields(pel, entries, [C.STREAM, C.ID_MS, C.ID_SEQ])


def pending_with_fields(
    pending: DataFrame, entries: DataFrame, on: Sequence[str], extra: Sequence[str] = ()
) -> DataFrame:
    """PEL rows as users see them: stream, group, ID text, owner, delivery count and time, entry fields,
    then the ``extra`` columns of ``pending``.

    ``entries`` holds the ``on`` columns and ``fields``; fields are null for an entry deleted from the stream.
    """
    return (
        pending.drop(C.FIELDS)
        .join(entries, on=list(on), how="left")
        .select(
            C.STREAM,
            C.GROUP,
            id_text(C.ID_MS, C.ID_SEQ).alias("id"),
            C.OWNER,
            C.DELIVERY_COUNT,
            C.DELIVERY_TIME_MS,
            C.FIELDS,
            *extra,
        )
    )

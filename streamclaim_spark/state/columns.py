"""Spark expressions over the state table's ID columns, and decoders of its rows into ``model`` values.

Stream IDs are stored shifted by 2**63 (``ids.to_stored``) in two signed columns, so these helpers are
the one place that compares, renders and decodes them: as Column conditions that keep Delta's file
skipping, as ``ms-seq`` text, and as ``StreamId``/``Entry``/``PendingEntry`` values from collected rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column, Row
from pyspark.sql import functions as F

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import STORED_OFFSET, StreamId
from streamclaim_spark.core.model import ConsumerMeta, Entry, PendingEntry

# A state-table row: as Spark collects it, or as a dict (model's row builders, a batch's rows in memory).
StateRow = Row | Mapping[str, Any]


def _id_columns(table: str) -> tuple[Column, Column]:
    prefix = f"{table}." if table else ""
    return F.col(prefix + C.ID_MS), F.col(prefix + C.ID_SEQ)


def id_at_least(bound: StreamId, table: str = "") -> Column:
    """Rows whose (id_ms, id_seq) is >= ``bound``; the id_ms conjunct lets Delta skip files.

    ``table`` qualifies the columns with an alias (``"t"`` in a MERGE condition).
    """
    ms, seq = bound.stored()
    id_ms, id_seq = _id_columns(table)
    return (id_ms >= F.lit(ms)) & ((id_ms > F.lit(ms)) | (id_seq >= F.lit(seq)))


def id_at_most(bound: StreamId, table: str = "") -> Column:
    """Rows whose (id_ms, id_seq) is <= ``bound``."""
    ms, seq = bound.stored()
    id_ms, id_seq = _id_columns(table)
    return (id_ms <= F.lit(ms)) & ((id_ms < F.lit(ms)) | (id_seq <= F.lit(seq)))


def id_between(low: StreamId, high: StreamId, table: str = "") -> Column:
    """Rows whose ID lies in [low, high]: the range Delta's min/max statistics skip files by."""
    return id_at_least(low, table) & id_at_most(high, table)


def id_in(ids: Iterable[StreamId], table: str = "") -> Column:
    """Rows whose ID is one of ``ids``.

    The [min, max] conjuncts let Delta skip files outside the IDs' range; the exact match is one SQL
    expression (an ``IN`` list that Spark turns into a hash set), not a Column per ID, which would cost a
    py4j call each for the thousand IDs an XAUTOCLAIM examines.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return F.lit(False)
    in_range = id_between(wanted[0], wanted[-1], table)
    if len(wanted) == 1:
        return in_range
    prefix = f"{table}." if table else ""
    pairs = ", ".join(f"({ms}L, {seq}L)" for ms, seq in (i.stored() for i in wanted))
    return in_range & F.expr(f"({prefix}{C.ID_MS}, {prefix}{C.ID_SEQ}) IN ({pairs})")


def id_text(ms: str, seq: str) -> Column:
    """Renders stored (shifted) ID columns as Redis' ``ms-seq`` text."""
    offset = F.expr(f"CAST({STORED_OFFSET} AS DECIMAL(20,0))")
    as_text = [(F.col(part).cast("decimal(20,0)") + offset).cast("decimal(20,0)").cast("string") for part in (ms, seq)]
    return F.concat(as_text[0], F.lit("-"), as_text[1])


def stored_id_columns(text: Column) -> tuple[Column, Column]:
    """Parses ``ms-seq`` text into stored (shifted) ID columns, the inverse of ``id_text``.

    Both are null where ``text`` is not an ID as ``id_text`` renders one (leading zeros, a sign or a
    space, a missing sequence, a part past 2**64 - 1), so a join on them matches exactly the rows a join
    on the rendered text would, without rendering every stored ID as text first.
    """
    # Split at the one dash, each part read as a number and kept only when it renders back as the same
    # text (canonical): half the time of two regular-expression extracts (1M IDs: 0.9-1.0 s -> 0.4-0.5 s,
    # CHANGELOG.md "A bulk acknowledgement without a shuffle").
    parts = F.split(text, "-")
    values, canonical = [], F.size(parts) == 2
    for index in (0, 1):
        digits = parts.getItem(index)
        # Up to 18 digits fit a long, shifted by long arithmetic; longer numbers (to 2**64 - 1) go through
        # a decimal. The decimal for every ID made parsing 1M IDs ~3 s of a bulk XACK.
        short, small, large = F.length(digits) <= 18, digits.try_cast("bigint"), digits.try_cast("decimal(20,0)")
        canonical &= F.when(short, small.cast("string") == digits).otherwise(large.cast("string") == digits)
        offset = F.expr(f"CAST({STORED_OFFSET} AS DECIMAL(20,0))")
        value = F.when(short, small + F.lit(-STORED_OFFSET)).otherwise((large - offset).try_cast("bigint"))
        values.append(value)
    an_id = F.coalesce(canonical, F.lit(False)) & values[0].isNotNull() & values[1].isNotNull()
    absent = F.lit(None).cast("bigint")
    return F.when(an_id, values[0]).otherwise(absent), F.when(an_id, values[1]).otherwise(absent)


def id_range_aggregates() -> list[Column]:
    """Aggregates of the rows' count (``n``) and smallest and largest ID (``lo``, ``hi``: ID structs that
    ``stored_id`` decodes), for one pass over a PEL or a stream's entries."""
    pair = F.struct(F.col(C.ID_MS), F.col(C.ID_SEQ))
    return [F.count(F.lit(1)).alias("n"), F.min(pair).alias("lo"), F.max(pair).alias("hi")]


def stored_id(row: StateRow, ms: str = C.ID_MS, seq: str = C.ID_SEQ) -> StreamId:
    return StreamId.from_stored(row[ms], row[seq])


def entry_from_row(row: StateRow) -> Entry:
    # bytes(): a BINARY value is bytes by default, but bytearray when a session turns off
    # spark.sql.execution.pyspark.binaryAsBytes; entries are immutable either way.
    return Entry(stored_id(row), tuple((bytes(pair["field"]), bytes(pair["value"])) for pair in row[C.FIELDS]))


def consumer_from_row(row: StateRow) -> ConsumerMeta:
    return ConsumerMeta(
        row[C.CONSUMER], row[C.SEEN_TIME_MS], row[C.ACTIVE_TIME_MS], value_or_none(row, C.PENDING_COUNT)
    )


def pending_from_row(row: StateRow) -> PendingEntry:
    return PendingEntry(stored_id(row), row[C.OWNER], row[C.DELIVERY_TIME_MS], row[C.DELIVERY_COUNT])


def by_bytes(name: str) -> bytes:
    """Redis orders consumers and groups bytewise."""
    return name.encode()


def value_or_none(row: StateRow, column: str) -> Any:
    """``row``'s value of ``column``, None where the row was read without it."""
    try:
        return row[column]
    except (KeyError, ValueError):
        return None

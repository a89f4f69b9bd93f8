"""Options of the ``streamclaim`` data source and the offsets its stream reader checkpoints (no Spark).

Spark hands a Python data source its options as a case-insensitive mapping of strings; every bad or
missing option is refused here with a message naming the option and the fix, before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamclaim_spark.core.ids import ZERO_ID, StreamId, parse_id
from streamclaim_spark.core.patterns import is_pattern
from streamclaim_spark.errors import OptionError

# Rows per input partition of a micro-batch: each partition is one Spark task reading one Arrow buffer.
DEFAULT_ROWS_PER_PARTITION = 50_000


def _text(options: Mapping[str, str], name: str, example: str, what: str) -> str:
    value = options.get(name.lower())
    if value is None or not str(value).strip():
        raise OptionError(f'option \'{name}\' is missing: give {what}, e.g. .option("{name}", "{example}")')
    return str(value)


def _positive(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise OptionError(
            f"option '{name}' is {value!r}: give a positive whole number, e.g. .option(\"{name}\", 10000)"
        )
    return number


def _streams(options: Mapping[str, str]) -> tuple[str, ...]:
    one, many = options.get("stream"), options.get("streams")
    if one is not None and many is not None:
        raise OptionError("options 'stream' and 'streams' are both given: give 'stream' for one, 'streams' for several")
    if one is not None and one != "":
        return (str(one),)
    names = tuple(name.strip() for name in str(many or "").split(",") if name.strip())
    if not names:
        raise OptionError(
            'option \'stream\' is missing: give the stream to read, e.g. .option("stream", "orders"), '
            'or several names or glob patterns, e.g. .option("streams", "orders,orders-*")'
        )
    return names


@dataclass(frozen=True)
class SourceOptions:
    """What a ``spark.readStream.format("streamclaim")`` query reads, as which consumer, how much per batch."""

    path: str
    streams: tuple[str, ...]
    group: str
    consumer: str
    max_entries_per_trigger: int | None = None
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION

    @property
    def named(self) -> tuple[str, ...]:
        """The streams named exactly (a missing one is an error); patterns match whatever exists."""
        return tuple(name for name in self.streams if not is_pattern(name))


def source_options(options: Mapping[str, str]) -> SourceOptions:
    """Parses the stream reader's options (Spark lower-cases their names)."""
    return SourceOptions(
        path=_text(options, "path", "/data/streams", "the folder of the store"),
        streams=_streams(options),
        group=_text(options, "group", "billing", "the consumer group to read as"),
        consumer=_text(options, "consumer", "spark-billing-1", "this query's consumer name (one per query)"),
        max_entries_per_trigger=_positive(options, "maxEntriesPerTrigger", None),
        rows_per_partition=_positive(options, "rowsPerPartition", DEFAULT_ROWS_PER_PARTITION)
        or DEFAULT_ROWS_PER_PARTITION,
    )


@dataclass(frozen=True)
class RangeOptions:
    """What ``spark.read.format("streamclaim")`` reads: every entry of the named streams."""

    path: str
    streams: tuple[str, ...]
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION


def range_options(options: Mapping[str, str]) -> RangeOptions:
    return RangeOptions(
        path=_text(options, "path", "/data/streams", "the folder of the store"),
        streams=_streams(options),
        rows_per_partition=_positive(options, "rowsPerPartition", DEFAULT_ROWS_PER_PARTITION)
        or DEFAULT_ROWS_PER_PARTITION,
    )


@dataclass(frozen=True)
class SinkOptions:
    """Where a ``writeStream.format("streamclaim")`` query appends, and the identity its batches are deduplicated by."""

    path: str
    stream: str | None
    stream_column: str | None
    fields: str | None
    sink_id: str


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    stream, column = options.get("stream"), options.get("streamcolumn")
    if (stream is None) == (column is None):
        raise OptionError(
            'give exactly one of option \'stream\' (every row to one stream, e.g. .option("stream", "orders")) '
            "and option 'streamColumn' (the column naming each row's stream)"
        )
    identity = options.get("sinkid") or options.get("checkpointlocation")
    if not identity:
        raise OptionError(
            "option 'checkpointLocation' is missing: the sink deduplicates replayed batches per checkpoint, "
            'e.g. .option("checkpointLocation", "/checkpoints/orders-sink") (or give option \'sinkId\')'
        )
    return SinkOptions(
        path=_text(options, "path", "/data/streams", "the folder of the store"),
        stream=str(stream) if stream is not None else None,
        stream_column=str(column) if column is not None else None,
        fields=str(options["fields"]) if options.get("fields") else None,
        sink_id=str(identity),
    )


@dataclass(frozen=True)
class BatchOffset:
    """One micro-batch of a stream reader, as its checkpointed offset says.

    The batch is every entry of each stream with ``low[s] < id <= high[s]`` that is pending to the
    query's consumer in the state table as of ``version`` (Delta time travel): a restarted query reads
    exactly the rows the crashed one did. ``version`` -1 is the start, before any batch.
    """

    version: int = -1
    low: dict[str, str] = field(default_factory=dict)
    high: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "low": dict(sorted(self.low.items())), "high": dict(sorted(self.high.items()))}

    @classmethod
    def from_json(cls, offset: Mapping[str, Any] | str) -> BatchOffset:
        data = json.loads(offset) if isinstance(offset, str) else offset
        try:
            return cls(int(data["version"]), dict(data["low"]), dict(data["high"]))
        except (KeyError, TypeError, ValueError) as error:
            raise OptionError(
                f"checkpointed offset {data!r} is not a streamclaim offset: "
                "this checkpoint belongs to another source; give the query a new checkpointLocation"
            ) from error

    def after(self, stream: str) -> StreamId:
        """The last ID of ``stream`` this query has emitted (0-0 before its first)."""
        return parse_id(self.high[stream]) if stream in self.high else ZERO_ID

    def ranges(self) -> dict[str, tuple[StreamId, StreamId]]:
        """Each stream's (exclusive low, inclusive high) ID range in this batch; empty ones left out."""
        spans = {
            s: (parse_id(self.low[s]) if s in self.low else ZERO_ID, parse_id(high)) for s, high in self.high.items()
        }
        return {s: span for s, span in spans.items() if span[0] < span[1]}

    def next(self, version: int, highs: Mapping[str, StreamId]) -> BatchOffset:
        """The batch after this one: each stream from this batch's high to its new high (or unchanged)."""
        high = {**self.high, **{s: str(i) for s, i in highs.items()}}
        return BatchOffset(version, dict(self.high), high)

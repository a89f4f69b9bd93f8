"""The streamclaim data source's options and offsets, without Spark."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.patterns import matching
from streamclaim_spark.errors import OptionError
from streamclaim_spark.streaming.options import BatchOffset, SourceOptions, range_options, sink_options, source_options

# Spark hands a data source its options with lower-cased names.
GOOD = {"path": "/data/streams", "stream": "orders", "group": "billing", "consumer": "spark-1"}


def test_source_options_parse_names_limits_and_patterns() -> None:
    parsed = source_options({**GOOD, "maxentriespertrigger": "10000"})
    assert parsed == SourceOptions("/data/streams", ("orders",), "billing", "spark-1", 10000)
    several = source_options({**{k: v for k, v in GOOD.items() if k != "stream"}, "streams": "orders, audit-* ,x"})
    assert several.streams == ("orders", "audit-*", "x")
    assert several.named == ("orders", "x")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {k: v for k, v in GOOD.items() if k != "group"},
            'option \'group\' is missing: give the consumer group to read as, e.g. .option("group", "billing")',
        ),
        (
            {k: v for k, v in GOOD.items() if k != "consumer"},
            "option 'consumer' is missing: give this query's consumer name (one per query), "
            'e.g. .option("consumer", "spark-billing-1")',
        ),
        (
            {k: v for k, v in GOOD.items() if k != "stream"},
            'option \'stream\' is missing: give the stream to read, e.g. .option("stream", "orders"), '
            'or several names or glob patterns, e.g. .option("streams", "orders,orders-*")',
        ),
        (
            {**GOOD, "streams": "a,b"},
            "options 'stream' and 'streams' are both given: give 'stream' for one, 'streams' for several",
        ),
        (
            {**GOOD, "maxentriespertrigger": "0"},
            "option 'maxEntriesPerTrigger' is '0': give a positive whole number, "
            'e.g. .option("maxEntriesPerTrigger", 10000)',
        ),
        (
            {**GOOD, "maxentriespertrigger": "lots"},
            "option 'maxEntriesPerTrigger' is 'lots': give a positive whole number, "
            'e.g. .option("maxEntriesPerTrigger", 10000)',
        ),
    ],
)
def test_a_bad_source_option_is_named_with_its_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as raised:
        source_options(options)
    assert str(raised.value) == message


def test_sink_options_need_one_destination_and_an_identity_for_deduplication() -> None:
    parsed = sink_options({"path": "/s", "stream": "orders", "checkpointlocation": "/ck"})
    assert (parsed.stream, parsed.stream_column, parsed.sink_id) == ("orders", None, "/ck")
    with pytest.raises(OptionError, match="give exactly one of option 'stream'"):
        sink_options({"path": "/s", "stream": "a", "streamcolumn": "tenant", "checkpointlocation": "/ck"})
    with pytest.raises(OptionError) as raised:
        sink_options({"path": "/s", "streamcolumn": "tenant"})
    assert str(raised.value).startswith(
        "option 'checkpointLocation' is missing: the sink deduplicates replayed batches"
    )
    assert range_options({"path": "/s", "streams": "a,b"}).streams == ("a", "b")


def test_patterns_match_existing_stream_names() -> None:
    assert matching(["orders-*", "audit"], ["orders-1", "orders-2", "audit", "billing"]) == [
        "audit",
        "orders-1",
        "orders-2",
    ]


def test_offsets_round_trip_and_give_each_batch_the_range_after_the_last() -> None:
    start = BatchOffset()
    assert BatchOffset.from_json(start.to_json()) == start and start.ranges() == {}
    first = start.next(7, {"a": StreamId(5, 0), "b": StreamId(3, 1)})
    assert first.to_json() == {"version": 7, "low": {}, "high": {"a": "5-0", "b": "3-1"}}
    assert first.ranges() == {"a": (StreamId(0, 0), StreamId(5, 0)), "b": (StreamId(0, 0), StreamId(3, 1))}
    second = first.next(9, {"a": StreamId(8, 0)})
    assert second.ranges() == {"a": (StreamId(5, 0), StreamId(8, 0))}  # b had nothing new
    assert second.after("b") == StreamId(3, 1) and second.after("c") == StreamId(0, 0)
    with pytest.raises(OptionError, match="belongs to another source; give the query a new checkpointLocation"):
        BatchOffset.from_json({"offset": 3})

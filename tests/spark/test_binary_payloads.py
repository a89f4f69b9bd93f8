"""Binary-safe payloads: field names and values are bytes, exactly as the client sent them.

One store carries every test's stream (each test its own key), so the suite pays for one store. Replies
are compared exactly; the wire-level comparison with redis-server is in tests/server/test_server.py and
the RESP-client comparison in tests/parity/test_parity.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from streamclaim_spark import PayloadNotTextError, ReplyError, StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.errors import StoreLayoutError
from streamclaim_spark.fleet.recovery import recover_stale
from streamclaim_spark.sql import register
from streamclaim_spark.state.schema import STATE_SCHEMA
from streamclaim_spark.state.tables import table_path, upgrade_layout
from tests.clock import ManualClock

pytestmark = pytest.mark.spark

EVERY_BYTE = bytes(range(256))
LARGE = random.Random(14).randbytes(1 << 20)  # 1 MiB, incompressible
# Every byte value, an empty field name and value, a repeated field, bytes that are not UTF-8, a large value.
PAYLOAD: list[bytes] = [
    b"all",
    EVERY_BYTE,
    b"",
    b"",
    b"dup",
    b"\x80\xff",
    b"dup",
    b"\xc3\x28",
    b"\xfe\xff\x00",
    b"nul\x00inside",
    b"large",
    LARGE,
]
NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture(scope="module")
def raw_store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> StreamStore:
    """A store whose ``execute`` returns bytes replies, shared by this module's tests."""
    path = str(tmp_path_factory.mktemp("binary") / "store")
    return StreamStore.open(path, spark=spark, clock=clock, decode_responses=False)


def entry(entry_id: str) -> list[object]:
    return [entry_id.encode(), PAYLOAD]


def test_every_byte_comes_back_unchanged_through_xrange_xreadgroup_xclaim_and_xautoclaim(
    raw_store: StreamStore, clock: ManualClock
) -> None:
    # With decode_responses=False every bulk and status reply is bytes, as redis-py gives them.
    run = raw_store.execute
    assert run("XADD", "bin", "1-1", *PAYLOAD) == b"1-1"
    assert run("XADD", "bin", "1-2", "text", "plain") == b"1-2"
    assert run("XGROUP", "CREATE", "bin", "g", "0") == b"OK"

    last = [b"1-2", [b"text", b"plain"]]
    assert run("XRANGE", "bin", "-", "+") == [entry("1-1"), last]
    assert run("XREVRANGE", "bin", "+", "-", "COUNT", "1") == [last]
    assert run("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "bin", ">") == [[b"bin", [entry("1-1")]]]
    assert run("XREAD", "STREAMS", "bin", "1-1") == [[b"bin", [last]]]
    clock.now += 1_000
    assert run("XCLAIM", "bin", "g", "bob", "500", "1-1") == [entry("1-1")]
    clock.now += 1_000
    assert run("XAUTOCLAIM", "bin", "g", "carol", "500", "0") == [b"0-0", [entry("1-1")], []]
    assert run("XPENDING", "bin", "g") == [1, b"1-1", b"1-1", [[b"carol", b"1"]]]
    assert run("XINFO", "STREAM", "bin")[-4:] == [b"first-entry", entry("1-1"), b"last-entry", last]
    # The store's default applies unless execute says otherwise; the UTF-8 entry decodes.
    assert run("XRANGE", "bin", "1-2", "1-2", decode_responses=True) == [["1-2", ["text", "plain"]]]


def test_a_payload_that_is_not_utf8_raises_naming_its_entry_when_replies_are_decoded(raw_store: StreamStore) -> None:
    raw_store.execute("XADD", "decode", "5-1", "f", b"ok")
    raw_store.execute("XADD", "decode", "5-2", b"\xff\xfe", b"v")
    with pytest.raises(PayloadNotTextError) as raised:
        raw_store.execute("XRANGE", "decode", "-", "+", decode_responses=True)
    assert str(raised.value) == (
        "entry 5-2 holds a field name or value that is not valid UTF-8 (b'\\xff\\xfe'); open the store with "
        "decode_responses=False, or pass it to execute, to get bytes replies"
    )


def test_a_name_that_is_not_utf8_is_refused_and_changes_nothing(raw_store: StreamStore) -> None:
    before = raw_store.snapshot().version
    for argv, position in [
        (("XADD", b"k\xff", "*", "f", "v"), 1),
        (("XADD", "k", "MAXLEN", "5", b"\xff", "f", "v"), 4),
        (("XGROUP", "CREATE", "bin", b"g\xff", "0"), 3),
        (("XREADGROUP", "GROUP", "g", b"\xc3\x28", "STREAMS", "bin", ">"), 3),
    ]:
        with pytest.raises(ReplyError) as raised:
            raw_store.execute(*argv)
        if position == 4:  # where the ID goes: Redis' own error comes first
            assert str(raised.value) == "ERR Invalid stream ID specified as stream command argument"
            continue
        assert str(raised.value) == (
            f"ERR argument {position} is not valid UTF-8: streamclaim-spark keeps keys, group and consumer names, "
            "IDs and options as UTF-8 text; only field names and values may be any bytes"
        )
    assert raw_store.snapshot().version == before


def test_append_sql_views_and_dead_letters_carry_the_bytes_unchanged(
    spark: SparkSession, raw_store: StreamStore, clock: ManualClock
) -> None:
    frame = spark.createDataFrame(
        [(EVERY_BYTE, "text", 7), (b"", "\u00e9", None), (b"\x00\xff", "", 0)], "payload binary, label string, n int"
    )
    appended = raw_store.append("appended", frame)
    assert appended.first_id is not None
    first = f"{appended.first_id.ms}-{appended.first_id.seq}"
    rows = raw_store.execute("XRANGE", "appended", "-", "+")
    assert [fields for _, fields in rows] == [
        [b"payload", EVERY_BYTE, b"label", b"text", b"n", b"7"],
        [b"payload", b"", b"label", "\u00e9".encode(), b"n", b""],
        [b"payload", b"\x00\xff", b"label", b"", b"n", b"0"],
    ]
    assert rows[0][0] == first.encode()

    # Dead letters: an entry delivered twice is poison for max_deliveries=1, copied with its bytes.
    assert raw_store.execute("XGROUP", "CREATE", "appended", "g", "0") == b"OK"
    raw_store.execute("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "appended", ">")
    raw_store.execute("XCLAIM", "appended", "g", "b", "0", first)
    clock.now += 60_000
    options = RecoveryOptions(min_idle_ms=1_000, max_deliveries=1, streams=("appended",))
    assert recover_stale(raw_store, options).groups[0].dead_lettered == 1

    database = "binary_payloads"
    register(spark, raw_store.path, database)
    entries = spark.sql(f"SELECT id, fields FROM {database}.entries WHERE stream = 'appended' ORDER BY id").collect()
    assert entries[0].id == first
    assert [(p.field, p.value) for p in entries[0].fields] == [
        (b"payload", EVERY_BYTE),
        (b"label", b"text"),
        (b"n", b"7"),
    ]
    letters = spark.sql(f"SELECT id, fields FROM {database}.dead_letters WHERE stream = 'appended'").collect()
    assert [(r.id, [(p.field, p.value) for p in r.fields]) for r in letters] == [
        (first, [(b"payload", EVERY_BYTE), (b"label", b"text"), (b"n", b"7")])
    ]
    # SQL users decode text values with a cast.
    label = spark.sql(
        f"SELECT CAST(fields[1].value AS STRING) AS label FROM {database}.entries "
        f"WHERE stream = 'appended' ORDER BY id LIMIT 2"
    ).collect()
    assert [r.label for r in label] == ["text", "\u00e9"]


def test_a_store_from_before_binary_payloads_is_refused_until_upgrade_layout_rewrites_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    store_path = str(tmp_path / "old")
    text_pairs = ArrayType(StructType([StructField("field", StringType()), StructField("value", StringType())]))
    old_schema = StructType([f if f.name != C.FIELDS else StructField(C.FIELDS, text_pairs) for f in STATE_SCHEMA])
    made = StreamStore.open(str(tmp_path / "source"), spark=spark)
    made.execute("XADD", "s", "1-1", "f", "caf\u00e9")
    rows = (
        made.snapshot()
        .frame()
        .select(*(F.col(f.name).cast(f.dataType) if f.name == C.FIELDS else F.col(f.name) for f in old_schema))
    )
    rows.write.format("delta").partitionBy(C.BUCKET).save(table_path(store_path, C.STATE_TABLE_DIR))

    with pytest.raises(StoreLayoutError) as refused:
        StreamStore.open(store_path, spark=spark)
    assert str(refused.value) == (
        f"the store at {store_path} keeps entries' field names and values as strings (before binary payloads); "
        f"stop every writer and run streamclaim_spark.state.tables.upgrade_layout(spark, {store_path!r}) once, "
        "then open it again"
    )

    assert upgrade_layout(spark, store_path) is True
    assert upgrade_layout(spark, store_path) is False
    upgraded = StreamStore.open(store_path, spark=spark)
    assert upgraded.execute("XRANGE", "s", "-", "+") == [["1-1", ["f", "caf\u00e9"]]]
    assert upgraded.execute("XADD", "s", "1-2", b"\xff", b"\x00") == "1-2"
    assert upgraded.execute("XRANGE", "s", "1-2", "+", decode_responses=False) == [[b"1-2", [b"\xff", b"\x00"]]]

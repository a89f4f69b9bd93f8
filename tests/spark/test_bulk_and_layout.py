"""Bulk acknowledgement (XACK for a DataFrame of IDs in one commit), and the file layout that keeps big PELs cheap."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import ReplyError, StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID, StreamId
from streamclaim_spark.core.model import Need, Scan
from streamclaim_spark.core.partitions import group_partition, stream_partition
from streamclaim_spark.state import file_stats, pending_stats
from streamclaim_spark.state.columns import id_in, stored_id
from tests.clock import ManualClock
from tests.fixtures import TemplateStores
from tests.spark.pel import current_version

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


@pytest.fixture
def delivered_store(templates: TemplateStores) -> StreamStore:
    """A copy of: stream s with 10 entries T0-0..T0-9, all delivered to consumer c of group g."""
    template = templates.template("bulk delivered", _build_delivered, clock=lambda: T0)
    return templates.copy(template, clock=lambda: T0)


def _build_delivered(store: StreamStore) -> None:
    store.append("s", store.spark.range(10).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "c")


def test_acknowledge_removes_exactly_the_pending_ids_named_and_ignores_the_others(
    spark: SparkSession, delivered_store: StreamStore
) -> None:
    named = [f"{T0}-{n}" for n in (0, 3, 3, 9)] + ["5-0", f"{T0}-99"]
    # Only canonical text names an entry: not a leading zero, a bare millisecond part, or past 2**64 - 1.
    not_ids = [f"0{T0}-2", f"{T0}", f"{T0}-02", "18446744073709551616-0", f"{T0}-4x", "", None]
    ids = spark.createDataFrame([(text,) for text in named + not_ids], "id string")

    result = delivered_store.acknowledge("s", "g", ids)

    assert result.count == 3
    assert result.version == current_version(delivered_store)
    assert delivered_store.execute("XPENDING", "s", "g") == [7, f"{T0}-1", f"{T0}-8", [["c", "7"]]]
    assert delivered_store.execute("XACK", "s", "g", f"{T0}-0", f"{T0}-1") == 1


def test_acknowledge_without_ids_empties_the_whole_pel(delivered_store: StreamStore) -> None:
    result = delivered_store.acknowledge("s", "g", None)

    assert result.count == 10
    assert delivered_store.execute("XPENDING", "s", "g") == [0, None, None, None]
    assert delivered_store.execute("XLEN", "s") == 10


def test_acknowledging_nothing_pending_commits_nothing(spark: SparkSession, delivered_store: StreamStore) -> None:
    before = current_version(delivered_store)

    result = delivered_store.acknowledge("s", "g", spark.createDataFrame([("1-1",)], "id string"))

    assert (result.count, result.version) == (0, None)
    assert current_version(delivered_store) == before


def test_acknowledge_on_a_missing_group_raises_nogroup_and_commits_nothing(delivered_store: StreamStore) -> None:
    before = current_version(delivered_store)

    with pytest.raises(ReplyError) as raised:
        delivered_store.acknowledge("s", "nope", None)

    assert str(raised.value) == "NOGROUP No such key 's' or consumer group 'nope'"
    assert current_version(delivered_store) == before


def test_acknowledge_names_a_missing_id_column(spark: SparkSession, delivered_store: StreamStore) -> None:
    with pytest.raises(ValueError, match="id_column='id' is not a column of ids"):
        delivered_store.acknowledge("s", "g", spark.createDataFrame([("1-1",)], "entry string"))


def test_bulk_writes_split_into_files_of_at_most_rows_per_file_each_covering_a_narrow_id_range(
    spark: SparkSession, make_store: Callable[..., StreamStore]
) -> None:
    store = make_store(clock=lambda: T0, rows_per_file=100)
    store.append("s", spark.range(250).selectExpr("id AS n"))

    partition = store.table_at(current_version(store)).where(F.col("partition_id") == stream_partition("s"))
    files = (
        partition.groupBy(F.input_file_name().alias("file"))
        .agg(
            F.count("*").alias("rows"),
            F.sum(F.when(F.col("row_kind") == "entry", 1).otherwise(0)).alias("entries"),
            F.min("id_seq").alias("low"),
            F.max("id_seq").alias("high"),
        )
        .collect()
    )

    entry_files = [row for row in files if row["entries"]]
    # Appended as files, each input partition's rows where they lie (spark.range's 2 partitions of 125):
    # 100 + 25 from each.
    assert sorted(row["rows"] for row in entry_files) == [25, 25, 100, 100]
    assert max(row["rows"] for row in entry_files) == 100
    assert sum(row["entries"] for row in entry_files) == 250
    # Each file holds a run of consecutive IDs: its ID range is exactly as wide as its entry count.
    assert all(row["high"] - row["low"] + 1 == row["entries"] for row in entry_files)
    # The stream head lies in a file of its own, in its h bucket (issue 44).
    assert [(row["rows"], row["entries"]) for row in files if not row["entries"]] == [(1, 0)]


def test_lookups_by_id_read_only_the_files_whose_id_range_holds_the_ids(
    spark: SparkSession, make_store: Callable[..., StreamStore]
) -> None:
    store = make_store(clock=lambda: T0, rows_per_file=100)
    store.append("s", spark.range(1000).selectExpr("id AS n"))
    snapshot = store.snapshot()
    entries = snapshot.partition(stream_partition("s"), "entry")

    few = entries.where(id_in([StreamId(T0, 450), StreamId(T0, 460)]))
    many = entries.where(id_in([StreamId(T0, n) for n in range(300, 400)]))
    # XCLAIM's one query (heads, consumer, PEL rows and entries by ID, ORed) skips files just as well.
    one_query = snapshot.prefetch_query(
        Need("s", ("g",), "c", entry_ids=(StreamId(T0, 450),), pending_ids=(StreamId(T0, 450),))
    )
    assert one_query is not None

    assert len(entries.inputFiles()) == 10  # 1,000 entries, 100 a file (the stream head lies apart)
    assert len(few.inputFiles()) == 1
    assert len(many.inputFiles()) == 1  # 300..399: one file, as the files hold 0..99, 100..199, ...
    assert len(one_query[0].inputFiles()) == 2  # the stream head's file and entry 450's
    assert sorted(stored_id(row).seq for row in few.collect()) == [450, 460]
    assert many.count() == 100


def test_auto_compaction_leaves_capped_bulk_files_alone(
    spark: SparkSession, make_store: Callable[..., StreamStore]
) -> None:
    # 60 files of 100 rows in the stream and in the PEL: above Delta's 50-small-files trigger. With
    # Delta's default threshold each commit there would compact (rewrite) the whole partition.
    store = make_store(clock=lambda: T0, rows_per_file=100)
    store.append("s", spark.range(6000).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "c")

    assert store.execute("XACK", "s", "g", f"{T0}-4321") == 1

    operations = [row["operation"] for row in DeltaTable.forPath(spark, store.state_path).history().collect()]
    pel_files = store.snapshot().pending_frame("s", "g").inputFiles()
    assert "OPTIMIZE" not in operations
    assert len(pel_files) >= 60


def counted_from_stats(store: StreamStore) -> dict[str | None, int]:
    """What XPENDING's summary of ``s``/``g`` counts from file statistics alone (no file opened)."""
    snapshot = store.snapshot()
    assert snapshot.version is not None
    summary = pending_stats.summary_from_stats(
        store.spark, store.state_path, snapshot.version, "s", group_partition("s", "g")
    )
    assert summary is not None
    return summary.counted


def test_xpending_summary_reads_the_files_that_may_hold_its_extremes_when_their_ids_span_milliseconds(
    spark: SparkSession, make_store: Callable[..., StreamStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_stats, "NARROW_FROM_BYTES", 0)  # the statistics' way in a test-sized table
    clock = ManualClock(T0)
    store = make_store(clock=clock, rows_per_file=100)
    # Three appends of three ms: the PEL's first and last 100-row files each hold IDs of two of them.
    for ms, size in ((T0, 50), (T0 + 1, 900), (T0 + 2, 50)):
        clock.now = ms
        store.append("s", spark.range(size).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "c")
    files = (
        store.snapshot()
        .pending_frame("s", "g")
        .groupBy(F.input_file_name().alias("file"))
        .agg(F.count("*").alias("rows"), F.min("id_ms").alias("low"), F.max("id_ms").alias("high"))
        .collect()
    )
    lowest, highest = min(files, key=lambda f: f["low"]), max(files, key=lambda f: f["high"])
    assert lowest["low"] < lowest["high"] and highest["low"] < highest["high"]

    assert store.execute("XPENDING", "s", "g") == [1000, f"{T0}-0", f"{T0 + 2}-49", [["c", "1000"]]]
    assert counted_from_stats(store) == {"c": 1000 - lowest["rows"] - highest["rows"]}


def test_ordered_reads_with_a_limit_stop_at_the_first_files_and_rewritten_files_stay_id_ordered(
    spark: SparkSession, make_store: Callable[..., StreamStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_stats, "NARROW_FROM_BYTES", 0)  # narrow in a test-sized table too
    clock = ManualClock(T0)
    store = make_store(clock=clock, rows_per_file=100)
    store.append("s", spark.range(1000).selectExpr("id AS n"))
    store.execute("XGROUP", "CREATE", "s", "g", "0")
    store.deliver("s", "g", "c")
    first_ten = Scan(ZERO_ID, MAX_ID, 10)
    needs = [Need("s", ("g",), pending_scan=first_ten)]
    bounded = file_stats.bounded_needs(spark, store.state_path, needs, (C.KIND_PENDING, "s", "g", first_ten))
    snapshot = store.snapshot()
    whole, narrow = snapshot.prefetch_query(*needs), snapshot.prefetch_query(*(bounded or []))

    assert bounded is not None and bounded[0].pending_scan is not None
    assert bounded[0].pending_scan.high < StreamId(T0, 100)  # where the first PEL file ends
    assert whole is not None and narrow is not None
    assert len(whole[0].inputFiles()) >= 11  # every PEL file (1,000 rows, 100 a file) and the heads'
    assert len(narrow[0].inputFiles()) <= 3  # the first PEL file and the heads'
    assert store.execute("XRANGE", "s", "-", "+", "COUNT", "2") == [
        [f"{T0}-0", ["n", "0"]],
        [f"{T0}-1", ["n", "1"]],
    ]
    assert store.execute("XREVRANGE", "s", "+", "-", "COUNT", "1") == [[f"{T0}-999", ["n", "999"]]]
    assert store.execute("XPENDING", "s", "g", "-", "+", "2") == [[f"{T0}-0", "c", 0, 1], [f"{T0}-1", "c", 0, 1]]
    # Large: each PEL file (one owner) is counted from Delta's statistics, none read: the IDs of the first
    # and the last file share one ms (one bulk append's), so their bounds are the smallest and largest IDs.
    assert store.execute("XPENDING", "s", "g") == [1000, f"{T0}-0", f"{T0}-999", [["c", "1000"]]]
    assert counted_from_stats(store) == {"c": 1000}

    # A claim rewrites the first PEL file; written back by one task, it stays one narrow ID range.
    clock.now = T0 + 10_000
    claimed = store.execute("XAUTOCLAIM", "s", "g", "d", "0", "0-0", "COUNT", "96", "JUSTID")
    assert claimed[:2] == [f"{T0}-96", [f"{T0}-{n}" for n in range(96)]]
    pel_files = (
        store.snapshot()
        .pending_frame("s", "g")
        .groupBy(F.input_file_name())
        .agg(F.count("*").alias("rows"), F.min("id_seq").alias("low"), F.max("id_seq").alias("high"))
        .collect()
    )
    assert sum(row["rows"] for row in pel_files) == 1000 and len(pel_files) >= 10
    assert all(row["high"] - row["low"] + 1 == row["rows"] for row in pel_files)
    # Files of two owners, and one with an XNACKed entry (no owner), are read; the others counted.
    assert store.execute("XNACK", "s", "g", "FAIL", "IDS", "1", f"{T0}-500") == 1
    assert store.execute("XPENDING", "s", "g") == [1000, f"{T0}-0", f"{T0}-999", [["c", "903"], ["d", "96"]]]
    assert store.snapshot().pending_summary("s", "g") == (1000, StreamId(T0, 0), StreamId(T0, 999), {"c": 903, "d": 96})
    # Read: the first file (two owners) and 500-599 (XNACKed); 100-199 (it may hold the smallest ID) and
    # the last file are counted, their bounds IDs of one ms.
    assert counted_from_stats(store) == {"c": 800}
    monkeypatch.setattr(file_stats, "NARROW_FROM_BYTES", 1 << 40)  # the same, aggregated from the rows
    assert store.snapshot().pending_summary("s", "g") == (1000, StreamId(T0, 0), StreamId(T0, 999), {"c": 903, "d": 96})
    monkeypatch.setattr(file_stats, "NARROW_FROM_BYTES", 0)

    # Only 96 and 97 of the first file are still idle: the bound there holds 2 of the 3 rows asked
    # for, so the unbounded read answers.
    assert store.execute("XPENDING", "s", "g", "IDLE", "5000", "-", "+", "3") == [
        [f"{T0}-{n}", "c", 10_000, 1] for n in (96, 97, 98)
    ]

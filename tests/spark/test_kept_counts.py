"""Kept pending counts (core/count_rules.py): each consumer's and each group's, compared with a recount.

The counts are trusted only while the group head's ``counted_version`` equals its version; a write
that cannot count leaves them behind, and the next counted commit on a small PEL recounts. So the test
checks both halves: wherever a group says its counts are kept they equal a full recount of the PEL,
after a random mix of commands, MULTI/EXEC blocks and bulk paths; and a delivery to every group makes
every count kept again, which XPENDING's summary and XINFO then answer from.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import MAX_ID, ZERO_ID
from streamclaim_spark.core.placement import Force, placed
from streamclaim_spark.fleet.claims.selection import StaleSelection
from tests.clock import ManualClock
from tests.conftest import StoreFactory
from tests.spark.older_stores import assert_refused_until_upgraded, drop_state_columns

STREAMS = ("a", "b")
GROUPS = ("g", "h")
GroupKey = tuple[str, str]
Counts = tuple[int, dict[str, int]]


def _random_command(rng: random.Random, next_id: dict[str, int]) -> list[str]:
    key, group = rng.choice(STREAMS), rng.choice(GROUPS)
    some_id = f"{rng.randint(1, max(1, next_id[key]))}-0"
    pick = rng.random()
    if pick < 0.28:
        next_id[key] += 1
        return ["XADD", key, f"{next_id[key]}-0", "f", "v"]
    if pick < 0.43:
        return ["XREADGROUP", "GROUP", group, rng.choice("xy"), "COUNT", "3", "STREAMS", key, ">"]
    if pick < 0.51:
        return ["XACK", key, group, some_id, f"{rng.randint(1, max(1, next_id[key]))}-0"]
    if pick < 0.59:
        return ["XCLAIM", key, group, rng.choice("yz"), "0", some_id]
    if pick < 0.64:
        return ["XAUTOCLAIM", key, group, "w", "0", "0", "COUNT", "2"]
    if pick < 0.68:
        return ["XGROUP", "CREATECONSUMER", key, group, "c"]
    if pick < 0.72:
        return ["XGROUP", "DELCONSUMER", key, group, rng.choice("xyz")]
    if pick < 0.76:
        return ["XNACK", key, group, "FAIL", "IDS", "1", some_id]
    if pick < 0.80:
        return ["XDEL", key, some_id]
    if pick < 0.83:
        return ["XTRIM", key, "MAXLEN", str(rng.randint(2, 6)), rng.choice(["KEEPREF", "DELREF", "ACKED"])]
    if pick < 0.86:
        return ["XGROUP", "SETID", key, group, "0"]
    if pick < 0.89:
        return ["XGROUP", "DESTROY", key, group]
    return ["XGROUP", "CREATE", key, group, "0", "MKSTREAM"]


def _recount(store: StreamStore) -> dict[GroupKey, Counts]:
    """Per existing group, its PEL's size and its rows per owner, counted from the rows."""
    rows = store.snapshot().frame()
    pending = rows.where(F.col(C.ROW_KIND) == C.KIND_PENDING).groupBy(C.STREAM, C.GROUP, C.OWNER).count()
    counted: dict[GroupKey, Counts] = {}
    for meta in store.snapshot().all_streams():
        for group in meta.groups:
            counted[(meta.key, group)] = (0, {})
    for row in pending.collect():
        total, owners = counted.setdefault((row[C.STREAM], row[C.GROUP]), (0, {}))
        if row[C.OWNER] is not None:
            owners[row[C.OWNER]] = row["count"]
        counted[(row[C.STREAM], row[C.GROUP])] = (total + row["count"], owners)
    return counted


def _kept(store: StreamStore) -> dict[GroupKey, Counts]:
    """Per group whose counts are kept, its head's count and its consumers' non-zero counts."""
    snapshot = store.snapshot()
    kept: dict[GroupKey, Counts] = {}
    for meta in snapshot.all_streams():
        for name in meta.groups:
            head = snapshot.group(meta.key, name)
            assert head is not None
            if head.counts_kept:
                consumers = snapshot.consumers(meta.key, name)
                assert all(consumer.pending_count is not None for consumer in consumers)
                owners = {c.name: c.pending_count for c in consumers if c.pending_count}
                kept[(meta.key, name)] = (int(head.pending_count or 0), owners)
    return kept


def _deliver_to_every_group(store: StreamStore, next_id: dict[str, int]) -> None:
    """One new entry per stream, read by consumer ``x`` of every group: a counted commit on each."""
    for meta in store.snapshot().all_streams():
        next_id[meta.key] += 1
        store.execute("XADD", meta.key, f"{next_id[meta.key]}-0", "f", "v")
        for group in meta.groups:
            store.execute("XREADGROUP", "GROUP", group, "x", "STREAMS", meta.key, ">")


def _expected_replies(counts: Counts, ids: list[str]) -> tuple[list[object], Counter[str]]:
    total, owners = counts
    if not total:
        return [0, None, None, None], Counter()
    ordered = sorted(ids, key=lambda i: tuple(int(part) for part in i.split("-")))
    by_owner = [[owner, str(n)] for owner, n in sorted(owners.items())] or None
    return [total, ordered[0], ordered[-1], by_owner], Counter(owners)


@pytest.mark.parametrize("form", ["driver", "spark"])
def test_kept_counts_equal_a_recount_after_a_random_mix_and_every_delivery_makes_them_kept_again(
    make_store: StoreFactory, spark: SparkSession, form: Force
) -> None:
    """On the Spark form (every commit a MERGE, which counts nothing) no group keeps its counts: the
    readers' answers must still equal the recount."""
    with placed(force=form):
        _random_mix_with_counts_checked(make_store, spark, kept_expected=form == "driver")


def _random_mix_with_counts_checked(make_store: StoreFactory, spark: SparkSession, *, kept_expected: bool) -> None:
    clock = ManualClock(1_000)
    store = make_store(clock=clock)
    rng = random.Random(46)
    next_id = dict.fromkeys(STREAMS, 0)
    for key in STREAMS:
        for group in GROUPS:
            store.execute("XGROUP", "CREATE", key, group, "0", "MKSTREAM")
    kept_before_refresh = 0
    for batch in range(3):
        pipe = store.pipeline(transaction=batch % 2 == 1)  # a MULTI/EXEC block every other batch
        for _ in range(18):
            pipe.execute_command(*_random_command(rng, next_id))
        pipe.execute(raise_on_error=False)
        clock.now += 1_000
        if batch == 1:  # the bulk paths: a delivery and an acknowledgement count their rows, the claim
            # too where it decides on the driver (no stream with a deleted entry among those it claims in)
            store.deliver("a", "g", "bulk")
            ids = spark.createDataFrame([(f"{n}-0",) for n in range(1, next_id["a"] + 1, 2)], "id string")
            acknowledged = store.acknowledge("a", "g", ids)
            head = store.snapshot().group("a", "g")
            assert acknowledged.count > 0 and head is not None and head.counts_kept is kept_expected
            store.claim_stale(StaleSelection(min_idle_ms=500), "claimer")
        recount = _recount(store)
        kept = _kept(store)
        kept_before_refresh += len(kept)
        assert kept == {group: recount[group] for group in kept}, f"batch {batch}"
        if batch == 1:  # the product's check agrees, over the groups that claim exact counts (once: ~3 jobs)
            report = store.verify_counts()
            assert (report.checked, report.mismatches) == (len(kept), ())

        _deliver_to_every_group(store, next_id)
        recount = _recount(store)
        expected_kept = recount if kept_expected else {}
        assert _kept(store) == expected_kept, f"batch {batch}, after a delivery to every group"
        for (key, group), counts in recount.items():
            pending_ids = [str(p.id) for p in store.snapshot().pending(key, group, ZERO_ID, MAX_ID)]
            summary, owners = _expected_replies(counts, pending_ids)
            assert store.execute("XPENDING", key, group) == summary
            consumers = store.execute("XINFO", "CONSUMERS", key, group)
            assert Counter({c[1]: c[3] for c in consumers if c[3]}) == owners
        for key in {key for key, _ in recount}:
            groups = store.execute("XINFO", "GROUPS", key)
            assert {(key, g[1]): g[5] for g in groups} == {k: v[0] for k, v in recount.items() if k[0] == key}
    assert bool(kept_before_refresh) is kept_expected, "the commands of files count, a MERGE never does"


def test_a_store_from_before_kept_counts_is_refused_then_upgraded_in_place_and_recounted_by_its_next_delivery(
    spark: SparkSession, make_store: StoreFactory
) -> None:
    clock = ManualClock(5_000)
    store = make_store(clock=clock)
    for argv in (
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "2-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "dead", "COUNT", "1", "STREAMS", "s", ">"),
    ):
        store.execute(*argv)
    # The rows as the code before kept counts wrote them: the table without the two columns.
    drop_state_columns(spark, store.path, C.PENDING_COUNT, C.COUNTED_VERSION)

    assert_refused_until_upgraded(spark, store.path, "groups without their kept pending counts (before kept counts)")
    upgraded = StreamStore.open(store.path, spark=spark, clock=clock)
    head = upgraded.snapshot().group("s", "g")
    assert head is not None and not head.counts_kept  # null: unknown
    assert upgraded.execute("XPENDING", "s", "g") == [1, "1-0", "1-0", [["dead", "1"]]]

    assert upgraded.execute("XREADGROUP", "GROUP", "g", "live", "STREAMS", "s", ">") == [["s", [["2-0", ["f", "v"]]]]]
    head = upgraded.snapshot().group("s", "g")
    assert head is not None and head.counts_kept and head.pending_count == 2
    assert _kept(upgraded) == {("s", "g"): (2, {"dead": 1, "live": 1})}
    assert upgraded.execute("XPENDING", "s", "g") == [2, "1-0", "2-0", [["dead", "1"], ["live", "1"]]]

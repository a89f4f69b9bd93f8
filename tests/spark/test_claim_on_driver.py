"""claim_stale counted and rewritten on the driver (fleet/claims/driver_claim.py): the same rows as Spark's."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark import CommitMismatchError, StaleSelection, StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.core.model import GroupMeta
from streamclaim_spark.core.partitions import bucket_of, group_partition, stream_partition
from streamclaim_spark.fleet.claims import driver_claim, in_place
from streamclaim_spark.fleet.claims.driver_claim import stale_mask
from streamclaim_spark.fleet.claims.selection import stale_condition
from streamclaim_spark.state.arrow_schema import ARROW_SCHEMA, in_schema
from streamclaim_spark.testing.spark_jobs import count_jobs
from tests.clock import ManualClock
from tests.fixtures import TemplateStores

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
MINUTE = 60_000
HOUR = 60 * MINUTE

SELECTIONS = {
    "idle": StaleSelection(min_idle_ms=10 * MINUTE),
    "owners": StaleSelection(min_idle_ms=MINUTE, owners=("a", "c")),
    "deliveries": StaleSelection(min_idle_ms=0, min_deliveries=2, max_deliveries=3),
    "backoff": StaleSelection(min_idle_ms=2 * MINUTE, backoff=parse_backoff("1m,5m,30m")),
}


def _random_rows(rng: random.Random, groups: list[GroupMeta]) -> pa.Table:
    """Rows of every kind over the groups' partitions and one stream's, nulls in the tested columns."""
    partitions = [group_partition(g.key, g.name) for g in groups] + [stream_partition("s")]
    rows = []
    for n in range(400):
        partition = rng.choice(partitions)
        kind = rng.choice([C.KIND_PENDING] * 4 + [C.KIND_CONSUMER, C.KIND_ENTRY])
        rows.append(
            {
                C.PARTITION_ID: partition,
                C.ROW_KIND: kind,
                C.BUCKET: bucket_of(partition, kind),
                C.ID_MS: n,
                C.ID_SEQ: 0,
                C.OWNER: rng.choice(["a", "b", "c", None]),
                C.DELIVERY_TIME_MS: rng.choice([None, T0 - rng.randrange(0, HOUR)]),
                C.DELIVERY_COUNT: rng.choice([None, 0, 1, 2, 3, 4, 9]),
            }
        )
    return in_schema(pa.Table.from_pylist(rows), pa.schema([ARROW_SCHEMA.field(name) for name in rows[0]]))


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_the_driver_stale_mask_selects_the_rows_the_spark_condition_selects(spark: SparkSession, name: str) -> None:
    selection = SELECTIONS[name]
    groups = [GroupMeta("s", "g1"), GroupMeta("s", "g2")]
    rows = _random_rows(random.Random(name), [*groups, GroupMeta("s", "other")])
    claimed = [group_partition(g.key, g.name) for g in groups]

    on_driver = rows.filter(stale_mask(rows, claimed, selection, T0)).column(C.ID_MS).to_pylist()
    frame = spark.createDataFrame(rows.to_pandas())
    in_spark = [row[0] for row in frame.where(stale_condition(groups, selection, T0)).select(C.ID_MS).collect()]

    assert sorted(on_driver) == sorted(in_spark)
    assert 0 < len(on_driver) < rows.num_rows // 2  # the draw meets both outcomes


def _build(store: StreamStore) -> None:
    """Streams s1 and s2, 30 entries each at T0; group g: 10 each delivered to a, b and c at T0, 1h and
    2h; group h of s1: all 30 to a at T0 (unclaimed by the selections below)."""
    frame = store.spark.range(0, 60, 1, 1).selectExpr("if(id < 30, 's1', 's2') AS key", "id % 30 AS n")
    store.append_streams(frame, stream_column="key")
    store.create_groups([("s1", "g", "0"), ("s2", "g", "0"), ("s1", "h", "0")])
    clock = store.runner.clock
    for offset, owner in enumerate(("a", "b", "c")):
        clock.now = T0 + offset * HOUR  # type: ignore[attr-defined]
        store.deliver_many([("s1", "g", owner), ("s2", "g", owner)], count=10)
    store.deliver_many([("s1", "h", "a")])


def _pel(store: StreamStore) -> DataFrame:
    rows = store.snapshot().frame().where(f"{C.ROW_KIND} = '{C.KIND_PENDING}'")
    columns = (C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ, C.OWNER, C.DELIVERY_COUNT, C.DELIVERY_TIME_MS)
    return rows.select(*columns).orderBy(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ)


def test_claim_stale_on_the_driver_writes_the_rows_spark_writes_keeps_the_counts_and_runs_no_job(
    templates: TemplateStores, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = templates.template("claims on the driver", _build, clock=ManualClock(T0))
    clocks = [ManualClock(T0 + 3 * HOUR), ManualClock(T0 + 3 * HOUR)]
    on_driver, in_spark = (templates.copy(template, clock=clock) for clock in clocks)
    claims = [
        (StaleSelection(min_idle_ms=90 * MINUTE, groups=("g",)), "r", False),  # a's and b's, not c's
        (StaleSelection(min_idle_ms=0, groups=("g",), owners=("c",)), "r", True),  # c's, JUSTID
        (StaleSelection(min_idle_ms=0, streams=("s2",), backoff=parse_backoff("1m,10m")), "z", False),
    ]
    jobs: list[int] = []
    results: dict[int, list[object]] = {}
    for store, clock in zip((on_driver, in_spark), clocks, strict=True):
        with monkeypatch.context() as patched:
            if store is in_spark:
                patched.setattr(in_place, "driver_form", lambda selection, owners: False)
            for selection, owner, just_id in claims:
                with count_jobs(spark.sparkContext) as counted:
                    result = store.claim_stale(selection, owner, just_id=just_id)
                jobs.append(counted.jobs) if store is on_driver else None
                results.setdefault(id(store), []).append(result.counts)
                clock.now += MINUTE

    assert (
        results[id(on_driver)]
        == results[id(in_spark)]
        == [
            {("s1", "g"): (20, 0), ("s2", "g"): (20, 0)},
            {("s1", "g"): (10, 0), ("s2", "g"): (10, 0)},
            {("s2", "g"): (10, 0)},  # c's, delivered once: 1m idle suffices; twice-delivered ones wait 10m
        ]
    )
    assert_df_equality(_pel(on_driver), _pel(in_spark))
    # The driver's claims kept each group's counts (Spark's leave them to a recount).
    for key, group in (("s1", "g"), ("s2", "g"), ("s1", "h")):
        head = on_driver.snapshot().group(key, group)
        assert head is not None and head.counts_kept, (key, group)
    assert on_driver.execute("XPENDING", "s1", "g")[3] == [["r", "30"]]
    assert on_driver.execute("XPENDING", "s2", "g")[3] == [["r", "20"], ["z", "10"]]
    assert [row[1::2][:2] for row in on_driver.execute("XINFO", "CONSUMERS", "s2", "g")] == [
        ["a", 0],
        ["b", 0],
        ["c", 0],
        ["r", 20],
        ["z", 10],
    ]
    # Counted, decided and rewritten on the driver: not one Spark job (Spark's path ran 7 here).
    assert jobs == [0, 0, 0], jobs


def test_a_claim_whose_rewrite_misses_a_row_it_decided_to_claim_fails_loudly_naming_both_counts(
    templates: TemplateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = templates.template("claims on the driver", _build, clock=ManualClock(T0))
    store = templates.copy(template, clock=ManualClock(T0 + 3 * HOUR))
    real = driver_claim.claimed_on_driver
    dropped: list[int] = []

    def missing_one(claimed_rows: Callable[[pa.Table], pa.Array], *args: Any) -> Callable[[pa.Table], pa.Table]:
        """The claim's rewrite, but its first claimed row left as it was: a bug the self-check must catch."""

        def fewer(rows: pa.Table) -> pa.Array:
            mask = claimed_rows(rows).to_pylist()
            if not dropped and True in mask:
                dropped.append(mask.index(True))
                mask[dropped[0]] = False
            return pa.array(mask, pa.bool_())

        return real(fewer, *args)

    monkeypatch.setattr(in_place, "claimed_on_driver", missing_one)
    with pytest.raises(CommitMismatchError, match=r"with 39 claimed PEL rows where it decided 40;"):
        store.claim_stale(StaleSelection(min_idle_ms=90 * MINUTE, groups=("g",)), "r")
    assert len(dropped) == 1

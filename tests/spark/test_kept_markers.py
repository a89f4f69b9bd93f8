"""The stream head's deleted-entry marker (``StreamMeta.some_deleted``), kept by every writer.

A batched claim and a recovery round check whether each stale entry still exists only in streams whose
marker is set; so a pending row naming a deleted entry under an unset marker would be claimed where
Redis purges it. The marker is checked against a recount of such rows after a random mix of commands.
"""

from __future__ import annotations

import random

from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.core import constants as C
from streamclaim_spark.fleet.claims.claiming import claim_stale
from streamclaim_spark.fleet.claims.selection import StaleSelection
from tests.clock import ManualClock
from tests.conftest import StoreFactory

STREAMS = ("a", "b", "c")
# Commands that may remove entries (XADD only with a trim).
DELETING = {"XDEL", "XTRIM", "XADD-TRIM"}


def _random_command(rng: random.Random, next_id: dict[str, int]) -> tuple[str, list[str]]:
    """One command of the mix, and its kind (XADD with a trim is ``XADD-TRIM``)."""
    key = rng.choice(STREAMS)
    some_id = f"{rng.randint(1, max(1, next_id[key]))}-0"
    pick = rng.random()
    if pick < 0.30:
        next_id[key] += 1
        if rng.random() < 0.2:
            return "XADD-TRIM", ["XADD", key, "MAXLEN", str(rng.randint(2, 6)), f"{next_id[key]}-0", "f", "v"]
        return "XADD", ["XADD", key, f"{next_id[key]}-0", "f", "v"]
    if pick < 0.50:
        return "XREADGROUP", ["XREADGROUP", "GROUP", "g", rng.choice("xy"), "COUNT", "3", "STREAMS", key, ">"]
    if pick < 0.60:
        return "XACK", ["XACK", key, "g", some_id]
    if pick < 0.70:
        return "XDEL", ["XDEL", key, some_id]
    if pick < 0.78:
        policy = rng.choice(["KEEPREF", "DELREF", "ACKED"])
        return "XTRIM", ["XTRIM", key, "MAXLEN", str(rng.randint(1, 5)), policy]
    if pick < 0.86:
        return "XCLAIM", ["XCLAIM", key, "g", "z", "0", some_id]
    if pick < 0.92:
        return "XGROUP", ["XGROUP", "DESTROY", key, "g"]
    return "XGROUP", ["XGROUP", "CREATE", key, "g", "0", "MKSTREAM"]


def _dangling(store: StreamStore) -> dict[tuple[str, str], int]:
    """Per group, its pending rows whose entry the stream no longer holds: the recount."""
    rows = store.snapshot().frame()
    pending = rows.where(F.col(C.ROW_KIND) == C.KIND_PENDING).select(C.STREAM, C.GROUP, C.ID_MS, C.ID_SEQ)
    entries = rows.where(F.col(C.ROW_KIND) == C.KIND_ENTRY).select(C.STREAM, C.ID_MS, C.ID_SEQ)
    found = pending.join(entries, [C.STREAM, C.ID_MS, C.ID_SEQ], "left_anti").groupBy(C.STREAM, C.GROUP).count()
    return {(row[C.STREAM], row[C.GROUP]): row["count"] for row in found.collect()}


def test_the_deleted_entry_marker_covers_every_dangling_pending_row_after_a_random_mix_and_claims_purge_them(
    make_store: StoreFactory,
) -> None:
    clock = ManualClock(1_000)
    store = make_store(clock=clock)
    rng = random.Random(45)
    next_id = dict.fromkeys(STREAMS, 0)
    seen_dangling: set[str] = set()
    deleters_ran: set[str] = set()  # streams a command that may remove entries was sent to
    for batch in range(3):
        pipe = store.pipeline(transaction=False)
        for _ in range(20):
            kind, argv = _random_command(rng, next_id)
            if kind in DELETING:
                deleters_ran.add(argv[1])
            pipe.execute_command(*argv)
        pipe.execute(raise_on_error=False)
        snapshot = store.snapshot()
        marked = {m.key for m in snapshot.all_streams() if m.some_deleted}
        dangling_rows = _dangling(store)
        dangling = {key for key, _ in dangling_rows}
        seen_dangling |= dangling
        # Never unset where a pending row names a deleted entry (a claim would keep it, not purge it)...
        assert dangling <= marked, f"batch {batch}"
        # ... and set only where a command that may delete ran.
        assert marked <= deleters_ran, f"batch {batch}"
    assert seen_dangling, "the mix never left a pending row naming a deleted entry: it tests nothing"

    # A claim of everything purges exactly the rows the recount finds dangling and claims the rest.
    clock.now += 10_000
    pending = store.snapshot().frame().where(F.col(C.ROW_KIND) == C.KIND_PENDING)
    expected: dict[tuple[str, str], tuple[int, int]] = {}
    for row in pending.groupBy(C.STREAM, C.GROUP).count().collect():
        purged = dangling_rows.get((row[C.STREAM], row[C.GROUP]), 0)
        expected[(row[C.STREAM], row[C.GROUP])] = (row["count"] - purged, purged)
    assert claim_stale(store.runner, StaleSelection(min_idle_ms=5_000), "live").counts == expected

"""A small store in the bucket layout (heads and consumers sharing files with entries and PEL rows).

``tests/data/store-bucket-layout/`` was written by this module's ``build`` with the code of the last
commit before heads were put apart (CHANGELOG.md, "Heads apart", names it), and is committed as it came
out: it is what a store of that version holds on disk, for the upgrade test (tests/spark/test_heads_apart.py).
Never rebuild it with newer code; the replies of ``SCRIPT`` at ``CLOCK_MS`` that the old code gave are
kept beside it in ``replies.json``, so the test can check that an upgraded store answers exactly the same.

Run as ``python -m tests.spark.layout_fixture`` (only on that commit) to write both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from streamclaim_spark import StreamStore
from tests.clock import ManualClock

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "data"
STORE_DIR = FIXTURE_DIR / "store-bucket-layout"
REPLIES_FILE = FIXTURE_DIR / "store-bucket-layout.replies.json"

# The clock the store was built on, and the one the script runs at (an hour later: every entry stale).
BUILD_MS = 1_700_000_000_000
CLOCK_MS = BUILD_MS + 3_600_000

# What built the store: two streams in different buckets, two groups, consumers, a PEL with entries
# delivered more than once, a deleted entry still pending, binary payloads and a trimmed stream.
BUILD: list[list[str | bytes]] = [
    ["XADD", "orders", "1-1", "item", "book", "qty", "1"],
    ["XADD", "orders", "1-2", "item", "pen"],
    ["XADD", "orders", "2-0", "item", "ink", "note", b"\xff\x00".decode("latin-1")],
    ["XADD", "orders", "3-0", "item", "cap"],
    ["XGROUP", "CREATE", "orders", "billing", "0"],
    ["XGROUP", "CREATE", "orders", "audit", "$", "ENTRIESREAD", "4"],
    ["XREADGROUP", "GROUP", "billing", "alice", "COUNT", "3", "STREAMS", "orders", ">"],
    ["XCLAIM", "orders", "billing", "bob", "0", "1-2"],
    ["XDEL", "orders", "2-0"],
    ["XADD", "events", "5-0", "k", "v1"],
    ["XADD", "events", "6-0", "k", "v2"],
    ["XADD", "events", "MAXLEN", "2", "7-0", "k", "v3"],
    ["XGROUP", "CREATE", "events", "ops", "0"],
    ["XREADGROUP", "GROUP", "ops", "carol", "STREAMS", "events", ">"],
    ["XGROUP", "CREATECONSUMER", "events", "ops", "dave"],
]

# What the test runs on the upgraded store at CLOCK_MS, replies compared with the old code's.
SCRIPT: list[list[str]] = [
    ["XINFO", "STREAM", "orders", "FULL"],
    ["XINFO", "STREAM", "events", "FULL"],
    ["XINFO", "GROUPS", "orders"],
    ["XINFO", "CONSUMERS", "orders", "billing"],
    ["XPENDING", "orders", "billing"],
    ["XPENDING", "orders", "billing", "-", "+", "10"],
    ["XRANGE", "orders", "-", "+"],
    ["XLEN", "events"],
    ["XAUTOCLAIM", "orders", "billing", "erin", "60000", "0"],
    ["XREADGROUP", "GROUP", "billing", "frank", "STREAMS", "orders", ">"],
    ["XACK", "orders", "billing", "1-1"],
    ["XGROUP", "CREATE", "orders", "late", "0"],
    ["XREADGROUP", "GROUP", "late", "gina", "COUNT", "1", "STREAMS", "orders", ">"],
    ["XADD", "orders", "4-0", "item", "new"],
    ["XTRIM", "events", "MAXLEN", "1"],
    ["XGROUP", "DELCONSUMER", "events", "ops", "carol"],
    ["XINFO", "STREAM", "orders", "FULL"],
    ["XINFO", "STREAM", "events", "FULL"],
    ["XPENDING", "orders", "billing", "-", "+", "10"],
]


def run_script(store: StreamStore) -> list[object]:
    """SCRIPT's replies on ``store`` (a Redis error as its text), as JSON can keep them."""
    replies: list[object] = []
    for argv in SCRIPT:
        try:
            replies.append(store.execute(*argv))
        except Exception as error:  # a Redis error reply is part of what is compared
            replies.append({"error": str(error)})
    kept: list[object] = json.loads(json.dumps(replies))
    return kept


def build() -> None:
    """Writes the fixture store and the replies the code of today gives on a copy of it."""
    from streamclaim_spark.state.session import build_session

    spark = build_session(master="local[2]", app_name="layout-fixture")
    shutil.rmtree(STORE_DIR, ignore_errors=True)
    clock = ManualClock(BUILD_MS)
    store = StreamStore.open(str(STORE_DIR), spark=spark, clock=clock)
    for step, argv in enumerate(BUILD):
        clock.now = BUILD_MS + step * 1000
        store.execute(*argv)
    copy = STORE_DIR.with_name("store-bucket-layout-copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(STORE_DIR, copy)
    replies = run_script(StreamStore.open(str(copy), spark=spark, clock=ManualClock(CLOCK_MS)))
    shutil.rmtree(copy)
    REPLIES_FILE.write_text(json.dumps(replies, indent=1) + "\n")


if __name__ == "__main__":
    build()

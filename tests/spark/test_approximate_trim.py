"""``~`` trimming: Redis removes whole listpack nodes, the store trims exactly.

The issue's contract for ``~``: never remove more than the exact form would, and reply with the true
number removed. These checks run the node-layout scenarios of the parity suite on the store.
"""

from __future__ import annotations

import pytest

from streamclaim_spark import StreamStore

pytestmark = pytest.mark.spark


def _fill(store: StreamStore, key: str, count: int) -> None:
    for n in range(1, count + 1):
        store.execute("XADD", key, f"{n}-0", "f", str(n))


def test_approximate_maxlen_removes_no_more_than_exact_and_reports_the_true_count(store: StreamStore) -> None:
    _fill(store, "s", 4)
    removed = store.execute("XTRIM", "s", "MAXLEN", "~", "1")
    assert removed == 3
    assert store.execute("XLEN", "s") == 1
    assert store.execute("XRANGE", "s", "-", "+") == [["4-0", ["f", "4"]]]


def test_approximate_trim_with_limit_stops_at_the_limit(store: StreamStore) -> None:
    _fill(store, "s", 4)
    assert store.execute("XTRIM", "s", "MINID", "~", "4", "LIMIT", "2") == 2
    assert store.execute("XRANGE", "s", "-", "+") == [["3-0", ["f", "3"]], ["4-0", ["f", "4"]]]


def test_approximate_trim_in_xadd_can_trim_the_new_entry_and_still_replies_its_id(store: StreamStore) -> None:
    _fill(store, "s", 3)
    assert store.execute("XADD", "s", "MAXLEN", "~", "0", "4-0", "f", "4") == "4-0"
    assert store.execute("XLEN", "s") == 0
    info = store.execute("XINFO", "STREAM", "s")
    fields = dict(zip(info[0::2], info[1::2], strict=True))
    assert fields["last-generated-id"] == "4-0"
    assert fields["entries-added"] == 4
    assert fields["recorded-first-entry-id"] == "0-0"

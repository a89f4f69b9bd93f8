"""How many entries a ``~`` trim removes: whole chunks of 100 from the oldest, within LIMIT (no Spark)."""

from __future__ import annotations

import pytest

from streamclaim_spark.commands.trimming import NODE_ENTRIES, whole_node_removals


@pytest.mark.parametrize(
    ("length", "wanted", "limit", "removed"),
    [
        (4, 3, 10_000, 0),  # MAXLEN ~ 1 on a 4-entry stream: its one node cannot go
        (4, 4, 10_000, 4),  # MAXLEN ~ 0: the whole (partial) node goes
        (250, 130, 0, 100),
        (250, 250, 0, 250),
        (250, 250, 150, 100),  # a second chunk would pass the LIMIT
        (250, 250, 99, 0),
        (1_099, 99, 10_000, 0),  # XADD ... MAXLEN ~ 1000 trims nothing until a whole chunk is over
        (1_100, 100, 10_000, 100),
    ],
)
def test_whole_chunks_go_only_when_the_exact_trim_would_remove_all_of_them(
    length: int, wanted: int, limit: int, removed: int
) -> None:
    assert NODE_ENTRIES == 100
    assert whole_node_removals(length, wanted, limit) == removed

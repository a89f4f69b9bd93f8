"""``~`` trimming: whole chunks of 100 entries, as Redis removes whole nodes.

Redis trims with ``~`` by whole listpack nodes (up to 100 entries each). Under KEEPREF the store counts
chunks of ``NODE_ENTRIES`` live entries from the oldest and removes whole chunks only, within LIMIT:
never more than the exact form would, and the reply is the true count. The parity suite compares
single-node streams with redis-server; this checks a stream of several chunks, built in one commit.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore

pytestmark = pytest.mark.spark


def test_approximate_trims_remove_whole_chunks_only_within_the_limit_and_reply_the_true_count(
    spark: SparkSession, store: StreamStore
) -> None:
    ms = store.append("s", spark.range(250).selectExpr("CAST(id AS STRING) AS n")).first_id.ms  # type: ignore[union-attr]

    assert store.execute("XTRIM", "s", "MAXLEN", "~", "120") == 100
    assert store.execute("XTRIM", "s", "MAXLEN", "~", "120") == 0  # one chunk more would leave 50
    assert store.execute("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "99") == 0
    assert store.execute("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "120") == 100
    assert [row[0] for row in store.execute("XRANGE", "s", "-", "+", "COUNT", "1")] == [f"{ms}-200"]
    # The last 50 are one (partial) chunk: MINID takes it only when every entry in it is below.
    assert store.execute("XTRIM", "s", "MINID", "~", f"{ms}-249") == 0
    assert store.execute("XADD", "s", "MINID", "~", f"{ms + 1}", f"{ms + 1}-0", "f", "v") == f"{ms + 1}-0"
    assert store.execute("XLEN", "s") == 51  # the new entry joined the chunk, which is no longer all below
    assert store.execute("XTRIM", "s", "MINID", "~", f"{ms + 2}") == 51
    info = store.execute("XINFO", "STREAM", "s")
    fields = dict(zip(info[0::2], info[1::2], strict=True))
    assert (fields["length"], fields["recorded-first-entry-id"], fields["entries-added"]) == (0, "0-0", 251)

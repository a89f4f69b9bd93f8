"""The guard of a commit of files, checked on the driver against the head rows it read (no session)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamclaim_spark.core.model import (
    ConsumerMeta,
    GroupMeta,
    StreamMeta,
    Write,
    consumer_row,
    group_head_row,
    stream_head_row,
)
from streamclaim_spark.engine.file_commit import _check_guards, _with_bucket
from streamclaim_spark.errors import StaleSnapshotError
from streamclaim_spark.state.conflicts import STALE_SNAPSHOT_MARKER, is_lost_race
from streamclaim_spark.state.head_files import ARROW_SCHEMA

# As stored: the stream head at version 3 (written by a command that read version 2), one group head at 7.
STORED = pa.Table.from_pylist(
    [
        _with_bucket(stream_head_row(StreamMeta("orders", version=2), "t")),
        _with_bucket(group_head_row(GroupMeta("orders", "billing", version=6), "t")),
    ],
    schema=ARROW_SCHEMA,
)


def check(*writes: Write) -> None:
    keys = [
        tuple(row[name] for name in ("partition_id", "row_kind", "id_ms", "id_seq", "consumer"))
        for row in STORED.to_pylist()
    ]
    _check_guards(writes, {key: position for position, key in enumerate(keys)}, STORED)


def test_guarded_heads_at_the_versions_read_and_unguarded_rows_pass() -> None:
    check(
        Write(stream_head_row(StreamMeta("orders", version=3), "u"), guard=True, expect_version=3),
        Write(group_head_row(GroupMeta("orders", "audit"), "u"), guard=True, expect_version=None),
        Write(consumer_row("orders", "billing", ConsumerMeta("alice", 5), "u")),
    )


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            Write(stream_head_row(StreamMeta("orders", version=2), "u"), guard=True, expect_version=2),
            "is at version 3, the command read 2",
        ),
        (
            Write(group_head_row(GroupMeta("orders", "billing"), "u"), guard=True, expect_version=None),
            "is at version 7, the command read None",
        ),
        (
            Write(group_head_row(GroupMeta("orders", "gone", version=4), "u"), guard=True, expect_version=4),
            "is at version None, the command read 4",
        ),
    ],
    ids=["moved-since-read", "created-meanwhile", "deleted-meanwhile"],
)
def test_a_guarded_head_that_changed_since_the_read_is_a_lost_race(write: Write, message: str) -> None:
    with pytest.raises(StaleSnapshotError, match=message) as raised:
        check(write)
    assert str(raised.value).startswith(STALE_SNAPSHOT_MARKER)
    assert is_lost_race(raised.value)

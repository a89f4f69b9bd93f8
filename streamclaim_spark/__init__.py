"""streamclaim-spark: Redis Streams consumer groups on Apache Spark and Delta Lake.

``StreamStore.open(path)`` gives a store whose ``execute(*argv)`` replies exactly as a Redis server
would, with all state (entries, groups, consumers, pending entries) in Delta tables.
"""

from __future__ import annotations

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import RefPolicy
from streamclaim_spark.core.replies import PayloadNotTextError
from streamclaim_spark.engine.retries import ConflictRetriesExhaustedError, RetryPolicy
from streamclaim_spark.errors import ReplyError, StreamclaimError
from streamclaim_spark.fleet.claims import BatchClaim, ClaimRequest, StaleSelection
from streamclaim_spark.store import StreamStore

__all__ = [
    "BatchClaim",
    "ClaimRequest",
    "ConflictRetriesExhaustedError",
    "PayloadNotTextError",
    "RefPolicy",
    "ReplyError",
    "RetryPolicy",
    "StaleSelection",
    "StreamId",
    "StreamStore",
    "StreamclaimError",
]

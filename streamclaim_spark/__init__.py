"""streamclaim-spark: Redis Streams consumer groups on Apache Spark and Delta Lake.

``StreamStore.open(path)`` gives a store whose ``execute(*argv)`` replies exactly as a Redis server
would, with all state (entries, groups, consumers, pending entries) in Delta tables. Every exception the
package raises on purpose is exported here; all are ``StreamclaimError``.

The house, one layer a folder (each imports only its own layer or lower ones): ``core/`` (pure: IDs,
parsing, replies, config), ``state/`` (Spark I/O: schema, tables, session, snapshots), ``engine/`` (a
command as one Delta transaction), ``commands/`` (Redis' commands and their table), ``fleet/`` (beyond
Redis: batched claims, bulk paths, the recovery job), then the edges: this facade, ``store``,
``pipeline``, ``sql``, ``server/``, ``streaming/``, ``importer/``, ``cli/`` and ``testing/``.
"""

from __future__ import annotations

from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import RefPolicy
from streamclaim_spark.engine.retries import RetryPolicy
from streamclaim_spark.errors import (
    ArgumentTypeError,
    BatchPlanError,
    ClassicSessionRequiredError,
    ClientQuitError,
    CommitMismatchError,
    ConfigError,
    ConflictRetriesExhaustedError,
    ImportRefusedError,
    InvalidArgumentError,
    InvalidConfigValueError,
    MaintenanceRefusedError,
    NothingCommittedError,
    OptionError,
    PayloadNotTextError,
    ProtocolViolationError,
    RecoveryFailedError,
    RecoverySelectionError,
    RedriveAdoptedError,
    RedriveFailedError,
    RedriveSelectionError,
    ReplyError,
    ServerStoppingError,
    SourceNotRegisteredError,
    StaleSnapshotError,
    StoreChangedError,
    StoreLayoutError,
    StreamclaimError,
    TransactionExpiredError,
    UnsafeObjectStoreError,
)
from streamclaim_spark.fleet.claims import BatchClaim, ClaimRequest, StaleSelection
from streamclaim_spark.state.session import build_session
from streamclaim_spark.store import StreamStore

__all__ = [
    "ArgumentTypeError",
    "BatchClaim",
    "BatchPlanError",
    "ClaimRequest",
    "ClassicSessionRequiredError",
    "ClientQuitError",
    "CommitMismatchError",
    "ConfigError",
    "ConflictRetriesExhaustedError",
    "ImportRefusedError",
    "InvalidArgumentError",
    "InvalidConfigValueError",
    "MaintenanceRefusedError",
    "NothingCommittedError",
    "OptionError",
    "PayloadNotTextError",
    "ProtocolViolationError",
    "RecoveryFailedError",
    "RecoverySelectionError",
    "RedriveAdoptedError",
    "RedriveFailedError",
    "RedriveSelectionError",
    "RefPolicy",
    "ReplyError",
    "RetryPolicy",
    "ServerStoppingError",
    "SourceNotRegisteredError",
    "StaleSelection",
    "StaleSnapshotError",
    "StoreChangedError",
    "StoreLayoutError",
    "StreamId",
    "StreamStore",
    "StreamclaimError",
    "TransactionExpiredError",
    "UnsafeObjectStoreError",
    "build_session",
]

"""StreamStore: Redis stream and consumer-group commands over a Delta table.

``StreamStore.open(path)`` creates or opens the store; ``execute(*argv)`` speaks Redis (same replies,
same error texts); the snake_case methods are the typed API that ``execute`` is a thin layer over.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark import batch_claim, bulk
from streamclaim_spark.batch_claim import BatchClaim, ClaimRequest, StaleSelection
from streamclaim_spark.bulk import BulkAck, BulkAppend, BulkDelivery
from streamclaim_spark.context import Context
from streamclaim_spark.session import active_or_new_session, require_delta
from streamclaim_spark.snapshot import Snapshot
from streamclaim_spark.tables import ensure_state_table
from streamclaim_spark.transaction import RetryPolicy, commit_plan, latest_version, run_with_retries

T = TypeVar("T")
Clock = Callable[[], int]


# 100k pending rows make a ~0.4 MB file, 100k entries of a few short fields ~1.2 MB.
DEFAULT_ROWS_PER_FILE = 100_000


def wall_clock_ms() -> int:
    """Unix time in milliseconds, as Redis' mstime()."""
    return time.time_ns() // 1_000_000


class StreamStore:
    """A Redis-compatible stream store whose state lives in Delta tables under one path.

    Safe to share between threads: each thread runs its commands through a session of its own (so
    Delta's per-session commit bookkeeping never mixes), and commands that lose a commit race re-run
    on a fresh snapshot (``retry_policy``).
    """

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        state_path: str,
        clock: Clock,
        retry_policy: RetryPolicy,
        rows_per_file: int = DEFAULT_ROWS_PER_FILE,
    ) -> None:
        self.spark = spark
        self.path = path
        self.state_path = state_path
        self.clock = clock
        self.retry_policy = retry_policy
        self.rows_per_file = rows_per_file
        self._local = threading.local()

    @classmethod
    def open(
        cls,
        path: str,
        spark: SparkSession | None = None,
        clock: Clock | None = None,
        retry_policy: RetryPolicy | None = None,
        rows_per_file: int = DEFAULT_ROWS_PER_FILE,
    ) -> StreamStore:
        """Opens the store at ``path`` (any Hadoop path), creating its Delta tables if missing.

        Args:
            path: Folder of the store: a local path, ``s3a://...``, ``abfss://...``.
            spark: A Delta-enabled session; None builds or reuses one (session.build_session).
            clock: Zero-argument callable returning Unix milliseconds (default: the wall clock).
            retry_policy: How commands re-run after losing a commit race (default RetryPolicy()).
            rows_per_file: Most rows a commit writes into one data file (0: no limit). Bulk writes
                come out in ID order, so capped files cover narrow ID ranges: a command that changes
                a few entries of a big PEL rewrites one such file, not the whole PEL (docs/BENCHMARKS.md).
        """
        if rows_per_file < 0:
            raise ValueError(f"rows_per_file={rows_per_file}: give a positive row count, or 0 for no limit")
        if not path:
            raise ValueError("path: give the folder of the store, e.g. /data/streams or s3a://bucket/streams")
        session = spark if spark is not None else active_or_new_session()
        require_delta(session)
        state_path = ensure_state_table(session, path)
        return cls(session, path, state_path, clock or wall_clock_ms, retry_policy or RetryPolicy(), rows_per_file)

    # --- plumbing ---------------------------------------------------------------------------------------

    def session(self) -> SparkSession:
        """This thread's session: a child of the store's session sharing its SparkContext."""
        session: SparkSession | None = getattr(self._local, "session", None)
        if session is None:
            session = self.spark.newSession()
            self._local.session = session
        return session

    @property
    def last_attempts(self) -> int:
        """How many attempts this thread's last command needed (1 unless it lost commit races)."""
        return int(getattr(self._local, "attempts", 0))

    @property
    def last_commit_version(self) -> int | None:
        """Delta version committed by this thread's last command (None if it changed nothing)."""
        return getattr(self._local, "version", None)

    def snapshot(self) -> Snapshot:
        """The store's current state, pinned at the newest Delta version."""
        session = self.session()
        return Snapshot(session, self.state_path, latest_version(session, self.state_path))

    def table_at(self, version: int) -> DataFrame:
        """The state table as of ``version`` (Delta time travel)."""
        return self.session().read.format("delta").option("versionAsOf", version).load(self.state_path)

    def transact(self, operation: str, decide: Callable[[Context], T]) -> T:
        """Runs ``decide`` on a fresh snapshot and commits its plan; re-runs it after a lost race."""
        session = self.session()
        self._local.version = None

        def attempt(_: int) -> T:
            snapshot = Snapshot(session, self.state_path, latest_version(session, self.state_path))
            context = Context(snapshot, now=self.clock(), txn=uuid.uuid4().hex)
            result = decide(context)
            if not context.plan.empty:
                operation_name = f"{operation} {context.txn}"
                self._local.version = commit_plan(
                    session, self.state_path, context.plan, operation_name, rows_per_file=self.rows_per_file
                )
            return result

        result, attempts = run_with_retries(attempt, self.retry_policy, operation)
        self._local.attempts = attempts
        return result

    # --- bulk -------------------------------------------------------------------------------------------

    def append(self, key: str, frame: DataFrame, fields: str | None = None) -> BulkAppend:
        """Appends every row of ``frame`` to stream ``key`` in one commit (see bulk.append)."""
        return bulk.append(self, key, frame, fields)

    def deliver(self, key: str, group: str, consumer: str, count: int | None = None) -> BulkDelivery:
        """Delivers up to ``count`` new entries to ``consumer`` in one commit (see bulk.deliver)."""
        return bulk.deliver(self, key, group, consumer, count)

    def acknowledge(self, key: str, group: str, ids: DataFrame | None, id_column: str = "id") -> BulkAck:
        """Acknowledges (XACK) every ID in ``ids`` (None: the whole PEL) in one commit (see bulk.acknowledge)."""
        return bulk.acknowledge(self, key, group, ids, id_column)

    # --- batched claims ------------------------------------------------------------------------------------

    def claim_stale(
        self,
        selection: StaleSelection,
        new_owner: str | Sequence[str],
        *,
        just_id: bool = False,
        dry_run: bool = False,
    ) -> BatchClaim:
        """Claims every stale pending entry the selection names, in one MERGE (see batch_claim)."""
        return batch_claim.claim_stale(self, selection, new_owner, just_id=just_id, dry_run=dry_run)

    def claim_batch(self, requests: DataFrame | Sequence[ClaimRequest]) -> BatchClaim:
        """Runs many XCLAIM/XAUTOCLAIM requests in one MERGE (see batch_claim.claim_batch)."""
        return batch_claim.claim_batch(self, requests)

    # --- Redis --------------------------------------------------------------------------------------------

    def execute(self, *argv: str | bytes) -> Any:
        """Runs one Redis command given as its argv and returns what a RESP2 client would.

        Status and bulk replies come back as ``str``, integers as ``int``, arrays as ``list``, nil as
        None. A Redis error raises ``ReplyError`` whose ``str()`` is the full error line.
        """
        from streamclaim_spark.commands import dispatch

        return dispatch(self, decode_argv(argv))


def decode_argv(argv: Sequence[str | bytes]) -> list[str]:
    """Decodes bytes arguments as UTF-8; the store keeps names and payloads as UTF-8 text."""
    from streamclaim_spark.errors import ReplyError

    decoded = []
    for position, value in enumerate(argv):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ReplyError(
                    f"ERR argument {position} is not valid UTF-8: streamclaim-spark stores keys, names, fields "
                    "and values as UTF-8 text; encode binary payloads first (e.g. base64)"
                ) from None
        elif not isinstance(value, str):
            raise TypeError(f"argv[{position}]: expected str or bytes, got {type(value).__name__}")
        elif not _encodable(value):
            raise ReplyError(
                f"ERR argument {position} is not valid UTF-8 text (it holds lone surrogates); "
                "pass bytes or well-formed str"
            )
        decoded.append(value)
    return decoded


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

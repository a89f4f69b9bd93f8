"""Runs a command as one transaction on the state table: snapshot, decide, commit, retry on a lost race.

The command modules (``commands/``) and the paths beyond Redis (``claims/``, ``bulk/``, ``recovery/``) need
exactly this and nothing else of the store, so they take a ``Runner``; ``StreamStore`` owns one and is the
layer above them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.retries import RetryPolicy, run_with_retries
from streamclaim_spark.engine.transaction import commit_plan
from streamclaim_spark.state.delta_io import child_session, latest_version
from streamclaim_spark.state.snapshot import Snapshot

T = TypeVar("T")
Clock = Callable[[], int]


class Runner:
    """Runs commands against the state table at ``state_path``; safe to share between threads.

    Each thread runs its commands through a session of its own (a child of ``spark`` sharing its
    SparkContext), so Delta's per-session commit bookkeeping never mixes between threads.
    """

    def __init__(
        self, spark: SparkSession, state_path: str, clock: Clock, retry_policy: RetryPolicy, rows_per_file: int
    ) -> None:
        self.spark = spark
        self.state_path = state_path
        self.clock = clock
        self.retry_policy = retry_policy
        self.rows_per_file = rows_per_file
        self._local = threading.local()
        # Partitions a batch found too big to read into memory, and when (batch/ reads them through
        # Spark for a while without probing them again).
        self.big_partitions: dict[str, float] = {}

    def session(self) -> SparkSession:
        """This thread's session: on classic a child of the store's session sharing its SparkContext, on
        Spark Connect the store's session itself (delta_io.child_session)."""
        session: SparkSession | None = getattr(self._local, "session", None)
        if session is None:
            session = child_session(self.spark)
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

    def forget_last_commit(self) -> None:
        """Clears ``last_commit_version`` and ``last_attempts`` before a command that may not transact."""
        self._local.version = None
        self._local.attempts = 0

    def snapshot(self) -> Snapshot:
        """The store's current state, pinned at the newest Delta version."""
        session = self.session()
        return Snapshot(session, self.state_path, latest_version(session, self.state_path))

    def table_at(self, version: int) -> DataFrame:
        """The state table as of ``version`` (Delta time travel)."""
        return self.session().read.format("delta").option("versionAsOf", version).load(self.state_path)

    def transact(self, operation: str, decide: Callable[[Context], T], policy: RetryPolicy | None = None) -> T:
        """Runs ``decide`` on a fresh snapshot and commits its plan; re-runs it after a lost race.

        ``policy`` overrides the store's retry policy for this command (e.g. one attempt, for a caller
        that handles a lost race itself).
        """
        session = self.session()
        self._local.version = None

        def attempt(_: int) -> T:
            context = Context(self.snapshot(), now=self.clock(), txn=uuid.uuid4().hex)
            result = decide(context)
            if not context.plan.empty:
                operation_name = f"{operation} {context.txn}"
                self._local.version = commit_plan(
                    session, self.state_path, context.plan, operation_name, rows_per_file=self.rows_per_file
                )
            return result

        result, attempts = run_with_retries(attempt, policy or self.retry_policy, operation)
        self._local.attempts = attempts
        return result

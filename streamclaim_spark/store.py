"""StreamStore: Redis stream and consumer-group commands over a Delta table.

``StreamStore.open(path)`` creates or opens the store. ``execute(*argv)`` and ``pipeline()`` speak Redis
through the command handlers (same replies, same error texts); the snake_case methods are the typed
batch API beyond Redis (bulk append, delivery and acknowledgement, ``claim_stale``, ``claim_batch``), each
one Delta commit for any number of streams, groups and entries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from streamclaim_spark.commands import dispatch
from streamclaim_spark.commands.args import decode_argv
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.ids import parse_id
from streamclaim_spark.core.model import RefPolicy
from streamclaim_spark.core.object_store import WriterSafety
from streamclaim_spark.core.placement import Placement, configure
from streamclaim_spark.core.replies import decoded, encoded
from streamclaim_spark.engine.batch.state import DEFAULT_LOAD_LIMIT
from streamclaim_spark.engine.context import Context
from streamclaim_spark.engine.retries import RetryPolicy
from streamclaim_spark.engine.runner import Clock, Runner
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.fleet import bulk, claims, maintenance
from streamclaim_spark.fleet.bulk import BulkAck, BulkAckDel, BulkAppend, BulkDelivery, NewGroup
from streamclaim_spark.fleet.claims import BatchClaim, ClaimRequest, StaleSelection
from streamclaim_spark.fleet.maintenance import CountReport, MaintenanceReport
from streamclaim_spark.fleet.redrive import RedriveOptions, RedriveReport
from streamclaim_spark.fleet.redrive import run as redriving
from streamclaim_spark.pipeline import DEFAULT_MAX_BATCH, Pipeline
from streamclaim_spark.state.companion_schema import GIVE_UP_REASONS_SCHEMA
from streamclaim_spark.state.session import active_or_new_session, require_delta, writer_safety
from streamclaim_spark.state.snapshot import Snapshot
from streamclaim_spark.state.tables import ensure_give_up_reasons_table, ensure_state_table

T = TypeVar("T")
log = logging.getLogger(__name__)


# The default file cap, kept importable from here (bench.side_by_side uses it).
DEFAULT_ROWS_PER_FILE = C.DEFAULT_ROWS_PER_FILE


def wall_clock_ms() -> int:
    """Unix time in milliseconds, as Redis' mstime()."""
    return time.time_ns() // 1_000_000


class StreamStore:
    """A Redis-compatible stream store whose state lives in Delta tables under one path.

    Safe to share between threads: each thread runs its commands through a session of its own (so
    Delta's per-session commit bookkeeping never mixes), and commands that lose a commit race re-run
    on a fresh snapshot (``retry_policy``). The command machinery is ``runner`` (runner.Runner).
    """

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        state_path: str,
        clock: Clock,
        retry_policy: RetryPolicy,
        rows_per_file: int = DEFAULT_ROWS_PER_FILE,
        *,
        safety: WriterSafety,
        decode_responses: bool = True,
    ) -> None:
        self.path = path
        # As redis-py's switch: str replies (payloads decoded as UTF-8), or bytes payloads as stored.
        self.decode_responses = decode_responses
        self.runner = Runner(spark, state_path, clock, retry_policy, rows_per_file)
        # How many drivers may write here (object_store.py); open() decides it from the path and settings.
        self.safety = safety

    @classmethod
    def open(
        cls,
        path: str,
        spark: SparkSession | None = None,
        clock: Clock | None = None,
        retry_policy: RetryPolicy | None = None,
        rows_per_file: int = DEFAULT_ROWS_PER_FILE,
        *,
        single_writer: bool = False,
        decode_responses: bool = True,
        placement: Placement | None = None,
    ) -> StreamStore:
        """Opens the store at ``path`` (any Hadoop path), creating its Delta tables if missing.

        Before touching the path it checks that Delta's log store for it keeps one winner per commit with
        several writing drivers (object_store.py): on S3 that needs the DynamoDB log store, and without it
        the store refuses to open (UnsafeObjectStoreError says what to set) unless ``single_writer``.

        Args:
            path: Folder of the store: a local path, ``s3a://...``, ``abfss://...``.
            spark: A Delta-enabled session; None builds or reuses one (session.build_session).
            clock: Zero-argument callable returning Unix milliseconds (default: the wall clock).
            retry_policy: How commands re-run after losing a commit race (default RetryPolicy()).
            rows_per_file: Most rows a commit writes into one data file (0: no limit). Bulk writes
                come out in ID order, so capped files cover narrow ID ranges: a command that changes
                a few entries of a big PEL rewrites one such file, not the whole PEL (docs/BENCHMARKS.md, "Levers").
            single_writer: Promise that one driver at a time writes this store; lets it open on a log
                store that serialises commits inside one driver only (S3's default), with a warning.
            decode_responses: What ``execute`` returns for entries' field names and values, as in
                redis-py: ``str`` (the default; a payload that is not UTF-8 raises PayloadNotTextError
                naming the entry), or False for ``bytes`` exactly as stored.
            placement: Where work runs, the driver or Spark, and the thresholds between them
                (``[store.placement]``, core/placement.py); the process's, so it applies to every store
                of this Spark application. None keeps the current one (the defaults until set).

        Example::

            >>> store = StreamStore.open(path, spark=spark)
            >>> store.execute("XADD", "orders", "1-1", "item", "book")
            '1-1'
        """
        if rows_per_file < 0:
            raise InvalidArgumentError(f"rows_per_file={rows_per_file}: give a positive row count, or 0 for no limit")
        if not path:
            raise InvalidArgumentError("path: give the folder of the store, e.g. /data/streams or s3a://bucket/streams")
        if placement is not None:
            configure(placement)
        session = spark if spark is not None else active_or_new_session()
        require_delta(session)
        safety = writer_safety(session, path, single_writer=single_writer)
        for warning in safety.warnings:
            log.warning(warning)
        state_path = ensure_state_table(session, path)
        return cls(
            session,
            path,
            state_path,
            clock or wall_clock_ms,
            retry_policy or RetryPolicy(),
            rows_per_file,
            safety=safety,
            decode_responses=decode_responses,
        )

    # --- plumbing (runner.Runner) -------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        return self.runner.spark

    @property
    def state_path(self) -> str:
        return self.runner.state_path

    @property
    def clock(self) -> Clock:
        return self.runner.clock

    @property
    def retry_policy(self) -> RetryPolicy:
        return self.runner.retry_policy

    @property
    def rows_per_file(self) -> int:
        return self.runner.rows_per_file

    def session(self) -> SparkSession:
        """This thread's session: on classic a child of the store's session sharing its SparkContext, on
        Spark Connect the store's session itself (delta_io.child_session)."""
        return self.runner.session()

    @property
    def last_attempts(self) -> int:
        """How many attempts this thread's last command needed (1 unless it lost commit races)."""
        return self.runner.last_attempts

    @property
    def last_commit_version(self) -> int | None:
        """Delta version committed by this thread's last command (None if it changed nothing)."""
        return self.runner.last_commit_version

    def snapshot(self) -> Snapshot:
        """The store's current state, pinned at the newest Delta version."""
        return self.runner.snapshot()

    def table_at(self, version: int) -> DataFrame:
        """The state table as of ``version`` (Delta time travel)."""
        return self.runner.table_at(version)

    def transact(self, operation: str, decide: Callable[[Context], T]) -> T:
        """Runs ``decide`` on a fresh snapshot and commits its plan; re-runs it after a lost race."""
        return self.runner.transact(operation, decide)

    # --- bulk -------------------------------------------------------------------------------------------

    def append(self, key: str, frame: DataFrame, fields: str | None = None) -> BulkAppend:
        """Appends every row of ``frame`` to stream ``key`` in one commit (see bulk.append)."""
        return bulk.append(self.runner, key, frame, fields)

    def append_streams(self, frame: DataFrame, stream_column: str, fields: str | None = None) -> BulkAppend:
        """Appends every row of ``frame`` to the stream its ``stream_column`` names, all in one commit."""
        return bulk.append(self.runner, None, frame, fields, stream_column=stream_column)

    def create_groups(self, groups: DataFrame | Sequence[NewGroup | tuple[Any, ...]]) -> int:
        """XGROUP CREATE for many (stream, group, id, mkstream) in one commit (see bulk.create_groups)."""
        return bulk.create_groups(self.runner, groups)

    def deliver(self, key: str, group: str, consumer: str, count: int | None = None) -> BulkDelivery:
        """Delivers up to ``count`` new entries to ``consumer`` in one commit (see bulk.deliver)."""
        return bulk.deliver(self.runner, key, group, consumer, count)

    def deliver_many(self, targets: Sequence[tuple[str, str, str]], count: int | None = None) -> list[BulkDelivery]:
        """``deliver`` for many (stream, group, consumer) targets in one commit (see bulk.deliver_many)."""
        return bulk.deliver_many(self.runner, targets, count)

    def acknowledge(self, key: str, group: str, ids: DataFrame | None, id_column: str = "id") -> BulkAck:
        """Acknowledges (XACK) every ID in ``ids`` (None: the whole PEL) in one commit (see bulk.acknowledge)."""
        return bulk.acknowledge(self.runner, key, group, ids, id_column)

    def acknowledge_and_delete(
        self,
        key: str,
        group: str,
        ids: DataFrame | None,
        policy: RefPolicy = RefPolicy.KEEPREF,
        id_column: str = "id",
    ) -> BulkAckDel:
        """XACKDEL for every ID in ``ids`` (None: the whole PEL) in one commit (see bulk.acknowledge_and_delete)."""
        return bulk.acknowledge_and_delete(self.runner, key, group, ids, policy, id_column)

    # --- batched claims ------------------------------------------------------------------------------------

    def claim_stale(
        self,
        selection: StaleSelection,
        new_owner: str | Sequence[str],
        *,
        just_id: bool = False,
        dry_run: bool = False,
    ) -> BatchClaim:
        """Claims every stale pending entry the selection names, in one commit (see fleet.claims.claim_stale).

        Example::

            >>> result = store.claim_stale(StaleSelection(streams=("orders",), min_idle_ms=0), "bob")
            >>> result.counts
            {('orders', 'billing'): (1, 0)}
        """
        return claims.claim_stale(self.runner, selection, new_owner, just_id=just_id, dry_run=dry_run)

    def claim_batch(self, requests: DataFrame | Sequence[ClaimRequest]) -> BatchClaim:
        """Runs many XCLAIM/XAUTOCLAIM requests in one commit (see claims.claim_batch); its ``replies``
        hold payloads as ``execute`` would (decode_responses)."""
        result = claims.claim_batch(self.runner, requests)
        return replace(result, replies=decoded(result.replies)) if self.decode_responses else result

    # --- dead letters ------------------------------------------------------------------------------------

    def give_up(self, key: str, group: str, ids: Sequence[str], reason: str) -> int:
        """``XNACK key group FATAL IDS ...`` with a reason: the entries go back to the group marked as given
        up on (delivery count 2^63-1), and the dead letter the recovery job makes of each says
        ``XNACK FATAL: <reason>``. Returns XNACK's reply, the number of IDs given back.

        The reason is written after the XNACK commits (one blind append): a crash in between loses the
        reason, never the entry, whose dead letter then says ``XNACK FATAL``.
        """
        if not reason.strip():
            raise InvalidArgumentError("reason: say why the consumer gave up, e.g. 'card expired'")
        given_back = self.execute("XNACK", key, group, "FATAL", "IDS", str(len(ids)), *ids)
        if given_back:  # XNACK took the IDs, so they parse; the rows hold them as Redis writes them
            at = datetime.fromtimestamp(self.clock() / 1000, tz=UTC)
            entry_ids = dict.fromkeys(str(parse_id(entry_id)) for entry_id in ids)
            rows = [(key, group, entry_id, reason, at) for entry_id in entry_ids]
            table = ensure_give_up_reasons_table(self.spark, self.path)
            frame = self.spark.createDataFrame(rows, GIVE_UP_REASONS_SCHEMA)
            frame.write.format("delta").mode("append").option("userMetadata", f"GIVE UP {key}").save(table)
        return int(given_back)

    def redrive(self, options: RedriveOptions | None = None, *, run_id: str | None = None) -> RedriveReport:
        """Puts dead-lettered entries back into the groups they died in, exactly once (see fleet.redrive):
        each first in its group's NACK zone, for XREADGROUP ... CLAIM; ``options`` select and shape it
        (default: every dead letter of every group, delivery counts kept)."""
        return redriving.redrive(self, options or RedriveOptions(), run_id=run_id)

    # --- upkeep -------------------------------------------------------------------------------------------

    def maintain(self, retain_ms: int | None = None, *, ignore_readers: bool = False) -> MaintenanceReport:
        """Compacts small files, vacuums files older than the history retention and trims the Delta log
        of every table of the store (see fleet.maintenance.maintain); safe while others write.

        ``retain_ms`` sets the history retention from now on (at least a minute; None keeps the tables'
        own, Delta's 7 days unless set before). A retention that would leave a streaming query unable to
        restart raises ``MaintenanceRefusedError`` before anything changes, unless ``ignore_readers``.
        """
        return maintenance.maintain(
            self.session(),
            self.path,
            retain_ms=retain_ms,
            ignore_readers=ignore_readers,
            rows_per_file=self.rows_per_file,
        )

    def verify_counts(self, repair: bool = False) -> CountReport:
        """Recounts every group's and consumer's pending entries (one Spark job) and reports each kept count
        that differs where its group claims exact counts (see fleet.maintenance.verify_counts); with
        ``repair``, rewrites the wrong ones in one commit guarded on the groups' heads, as any writer's."""
        return maintenance.verify_counts(self.runner, self.path, repair=repair)

    # --- Redis --------------------------------------------------------------------------------------------

    def execute(
        self,
        *argv: str | bytes,
        cancelled: Callable[[], bool] | None = None,
        decode_responses: bool | None = None,
    ) -> Any:
        """Runs one Redis command given as its argv and returns what a RESP2 client would.

        Arguments are ``str`` or ``bytes``; field names and values may be any bytes, every other argument
        must be UTF-8. Bulk replies come back as ``str``, status replies as ``replies.Status`` (a ``str``),
        integers as ``int``, arrays as ``list``, nil as None; entries' field names and values as ``str``.
        When ``decode_responses`` (default: the store's) is False, every bulk and status reply is ``bytes``
        instead (IDs, names, field names and values, ``OK``), as redis-py gives them. A Redis error raises
        ``ReplyError`` whose ``str()`` is the full error line. ``cancelled``, polled while a BLOCK read
        waits, ends the wait with a nil reply.

        Example::

            >>> store.execute("XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM")  # a str subclass
            Status('OK')
            >>> store.execute("XADD", "orders", "1-1", "item", "book")
            '1-1'
            >>> store.execute("XREADGROUP", "GROUP", "billing", "alice", "STREAMS", "orders", ">")
            [['orders', [['1-1', ['item', 'book']]]]]
            >>> store.execute("XPENDING", "orders", "billing")
            [1, '1-1', '1-1', [['alice', '1']]]
        """
        reply = self.resp_reply(*argv, cancelled=cancelled)
        decode = self.decode_responses if decode_responses is None else decode_responses
        return decoded(reply) if decode else encoded(reply)

    def pipeline(
        self,
        transaction: bool = True,
        *,
        decode_responses: bool | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        load_limit: int = DEFAULT_LOAD_LIMIT,
    ) -> Pipeline:
        """Commands queued and then run in order as one Delta commit, as redis-py's ``pipeline``.

        ``pipe.execute_command(*argv)`` queues (chainable); ``pipe.execute()`` returns the replies in
        order. ``transaction=True`` runs them as MULTI/EXEC does: all in one commit, an unknown command
        or wrong arity aborts the whole queue (EXECABORT). ``transaction=False`` may commit every
        ``max_batch`` commands (see pipeline.Pipeline). A stream or group of at most ``load_limit`` rows
        is read into memory once per batch; bigger ones are read through Spark by each command.

        Example::

            >>> pipe = store.pipeline()
            >>> pipe.execute_command("XACK", "orders", "billing", "1-1").execute_command("XLEN", "orders").execute()
            [1, 1]
        """
        decode = self.decode_responses if decode_responses is None else decode_responses
        return Pipeline(self.runner, transaction, decode_responses=decode, max_batch=max_batch, load_limit=load_limit)

    def resp_reply(self, *argv: str | bytes, cancelled: Callable[[], bool] | None = None) -> Any:
        """Runs one Redis command like ``execute`` and returns its reply typed as RESP frames it: bulk
        replies ``str``, status replies ``replies.Status``, payloads ``bytes`` exactly as stored. The server
        writes this to the wire; ``execute`` turns it into what redis-py returns."""
        return dispatch(self.runner, decode_argv(argv), cancelled)

"""Holding transactions at their commit: the seam race and maintenance tests use.

A race test that merely starts two writers in threads passes when they run one after the other; one that
makes each writer wait at its commit until the other has reached its own proves both were inside their
transactions at once (``CommitGate(parties=2)``): both decided on the same snapshot, so one must lose.
A maintenance test holds one command's commit while maintenance runs beside it (``CommitGate(parties=1)``,
then ``release``). The gate stands where ``commit_gate`` puts it: before a decided plan commits, MERGE
or files (``engine.transaction.commit_plan``), or with ``after_files_written`` inside a transaction of
files (``state.delta_txn.DeltaTransaction``) whose data files are on disk and not yet committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamclaim_spark.engine.transaction import before_plan_commit
from streamclaim_spark.state.delta_txn import before_commit

# How long a held commit waits for the others, or for ``release``, before the gate fails the test.
WAIT_SECONDS = 120.0


class CommitGate:
    """Stops the first ``parties`` commits that ``holds`` accepts until all of them have arrived and, unless
    ``release_when_all_arrive``, until ``release`` is called; later commits pass freely.

    A commit that waits longer than ``timeout`` raises ``TimeoutError`` in its thread (its command fails):
    the writers never met at their commits, so the race the test wanted did not happen.
    """

    def __init__(
        self,
        parties: int,
        *,
        holds: Callable[[Any], bool] = lambda commit: True,
        release_when_all_arrive: bool = True,
        timeout: float = WAIT_SECONDS,
    ) -> None:
        self.parties = parties
        self.held: list[Any] = []  # engine.transaction.PendingCommit or state.delta_txn.DeltaTransaction
        self._holds = holds
        self._timeout = timeout
        self._lock = threading.Lock()
        self._all_arrived = threading.Event()
        self._released = threading.Event()
        if release_when_all_arrive:
            self._released.set()

    def __call__(self, commit: Any) -> None:
        with self._lock:
            if len(self.held) >= self.parties or not self._holds(commit):
                return
            self.held.append(commit)
            if len(self.held) == self.parties:
                self._all_arrived.set()
        if not self._all_arrived.wait(self._timeout):
            raise TimeoutError(f"a commit waited {self._timeout} s at the gate for {self.parties} to arrive")
        if not self._released.wait(self._timeout):
            raise TimeoutError(f"a commit waited {self._timeout} s at the gate for its release")

    def wait_held(self, timeout: float = WAIT_SECONDS) -> list[Any]:
        """Blocks until every party is held at its commit; returns their transactions."""
        if not self._all_arrived.wait(timeout):
            raise TimeoutError(f"{len(self.held)} of {self.parties} commits reached the gate in {timeout} s")
        return list(self.held)

    def release(self) -> None:
        """Lets the held commits go on."""
        self._released.set()


@contextmanager
def commit_gate(gate: CommitGate, *, after_files_written: bool = False) -> Iterator[CommitGate]:
    """Installs ``gate`` before every plan's commit of the process for the block (with
    ``after_files_written``: before every transaction of files commits, its files written); releases it
    on exit (so no thread stays held when a test fails)."""
    seam = before_commit if after_files_written else before_plan_commit
    with seam(gate):
        try:
            yield gate
        finally:
            gate.release()

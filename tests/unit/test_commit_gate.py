"""The gate race tests stand their writers at: it fails a test whose writers never met at their commits."""

from __future__ import annotations

import re
import threading

import pytest

from streamclaim_spark.engine.transaction import PendingCommit
from streamclaim_spark.testing.commit_gate import CommitGate

COMMIT = PendingCommit("/store/state", "XACK 1")


def arrive(gate: CommitGate, errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            gate(COMMIT)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_two_writers_at_their_commits_at_once_both_pass_the_gate() -> None:
    gate, errors = CommitGate(2, timeout=5), list[BaseException]()
    threads = [arrive(gate, errors) for _ in range(2)]
    for thread in threads:
        thread.join()
    assert (errors, gate.held) == ([], [COMMIT, COMMIT])


def test_a_writer_alone_at_the_gate_fails_when_the_other_never_comes() -> None:
    gate = CommitGate(2, timeout=0.2)
    with pytest.raises(TimeoutError, match=re.escape("a commit waited 0.2 s at the gate for 2 to arrive")):
        gate(COMMIT)


def test_a_held_commit_goes_on_only_once_released_and_later_commits_pass_freely() -> None:
    gate, errors = CommitGate(1, release_when_all_arrive=False, timeout=5), list[BaseException]()
    thread = arrive(gate, errors)
    assert gate.wait_held(5) == [COMMIT]
    thread.join(0.2)
    assert thread.is_alive()
    gate.release()
    thread.join()
    gate(COMMIT)  # past the parties: not held
    assert (errors, len(gate.held)) == ([], 1)

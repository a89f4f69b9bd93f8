"""Child process for the multi-driver tests: its own Spark driver runs one XAUTOCLAIM on a shared store.

Run as ``python -m tests.spark.claim_worker --path P --clock MS --consumer C --count N`` (or as a script).
It talks to the parent through stdout, one line per event, flushed at once:

* ``ready``: the session is built and the store opened; with ``--wait-go`` it then waits for a line on
  stdin before claiming, so several workers can be released at the same moment;
* ``committing``: the command's commit has been handed to the JVM, a Delta MERGE or the first write of
  a commit of files (printed on every attempt);
* ``held``: with ``--hold-commit``, the command's transaction of files has written its data files and
  waits at its commit (testing/commit_gate.py) for ever: the parent kills it there;
* ``result <json>``: ``{"reply": ..., "attempts": n, "version": v}`` once the command returned.

Spark's own logging goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _announce_commits() -> None:
    """Prints ``committing`` whenever a commit starts executing in the JVM: a Delta MERGE (Spark's
    ``DataFrame.mergeInto``, delta_io.merge_into) or a write of a commit of files (``DeltaTransaction.write``
    or ``write_arrow``, engine/file_commit.py), whichever the command's plan commits by."""
    from pyspark.sql.merge import MergeIntoWriter

    from streamclaim_spark.state.delta_txn import DeltaTransaction

    original_merge = MergeIntoWriter.merge
    original_write = DeltaTransaction.write
    original_write_arrow = DeltaTransaction.write_arrow

    def merge(self: Any) -> Any:
        _say("committing")
        return original_merge(self)

    def write(self: Any, rows: Any) -> Any:
        _say("committing")
        return original_write(self, rows)

    def write_arrow(self: Any, rows: Any, rows_per_file: int) -> Any:
        _say("committing")
        return original_write_arrow(self, rows, rows_per_file)

    MergeIntoWriter.merge = merge  # type: ignore[method-assign]
    DeltaTransaction.write = write  # type: ignore[method-assign]
    DeltaTransaction.write_arrow = write_arrow  # type: ignore[method-assign]


def _hold_commits() -> None:
    """Holds the first transaction of files at its commit, its files written, and says ``held`` then."""
    import threading

    from streamclaim_spark.testing.commit_gate import CommitGate, commit_gate

    gate = CommitGate(1, release_when_all_arrive=False, timeout=3_600)
    # Kept, and never left: the parent kills this process (a collected context would close and unhook).
    _HELD.append(commit_gate(gate, after_files_written=True))
    _HELD[-1].__enter__()

    def say_when_held() -> None:
        gate.wait_held(3_600)
        _say("held")

    threading.Thread(target=say_when_held, daemon=True).start()


_HELD: list[Any] = []


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--path", required=True, help="folder of the store")
    parser.add_argument("--clock", type=int, required=True, help="the store's clock: fixed Unix ms")
    parser.add_argument("--consumer", required=True)
    parser.add_argument("--count", type=int, required=True, help="XAUTOCLAIM COUNT")
    parser.add_argument("--key", default="s")
    parser.add_argument("--group", default="g")
    parser.add_argument("--min-idle", type=int, default=60_000)
    parser.add_argument("--justid", action="store_true", help="add JUSTID")
    parser.add_argument("--wait-go", action="store_true", help="wait for a line on stdin after 'ready'")
    parser.add_argument(
        "--hold-commit",
        action="store_true",
        help="stop the command's transaction of files after its files are written, before its commit",
    )
    parser.add_argument(
        "--in-batch",
        action="store_true",
        help="run the claim inside a pipeline (one commit): XADD side, the XAUTOCLAIM, XGROUP CREATE side g 0",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from streamclaim_spark import StreamStore
    from streamclaim_spark.state.session import build_session
    from tests.fixtures import TEST_SPARK_CONF

    spark = build_session(master="local[1]", app_name=f"claim-worker-{args.consumer}", conf=TEST_SPARK_CONF)
    store = StreamStore.open(args.path, spark=spark, clock=lambda: args.clock)
    _announce_commits()
    if args.hold_commit:
        _hold_commits()
    _say("ready")
    if args.wait_go:
        sys.stdin.readline()
    command = ["XAUTOCLAIM", args.key, args.group, args.consumer, str(args.min_idle), "0", "COUNT", str(args.count)]
    if args.justid:
        command.append("JUSTID")
    if args.in_batch:
        pipe = store.pipeline().execute_command("XADD", "side", "*", "f", "v").execute_command(*command)
        reply = pipe.execute_command("XGROUP", "CREATE", "side", "g", "0").execute()[1]
    else:
        reply = store.execute(*command)
    _say(
        "result " + json.dumps({"reply": reply, "attempts": store.last_attempts, "version": store.last_commit_version})
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        # Run as a script: make the repository root importable, as ``python -m`` from it would.
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())

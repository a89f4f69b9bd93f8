"""What a command sees while it runs: one snapshot, one clock reading, one transaction token."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamclaim_spark.core.plan import Plan
from streamclaim_spark.state.snapshot import Snapshot


@dataclass
class Context:
    """One attempt of one command.

    ``now`` is read once per attempt, as Redis reads its clock once per command; every time the
    command writes or compares uses it. ``txn`` tags every row the command writes.
    """

    snapshot: Snapshot
    now: int
    txn: str
    plan: Plan = field(default_factory=Plan)

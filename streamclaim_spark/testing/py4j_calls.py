"""Counting the py4j round trips a piece of work makes: the driver's other deterministic cost.

Every call from Python into the JVM (a method, a constructor, a class looked up) is one round trip over
py4j's socket, ~0.2 ms on the project's machine whatever it does: a command of the live path made ~1,000
of them. ``count_py4j_calls`` counts those of the calling thread inside a ``with`` block; tests hold
commands to budgets with it (tests/spark/test_job_budgets.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from py4j import clientserver


@dataclass
class CallCount:
    """The round trips a ``count_py4j_calls`` block made."""

    calls: int = 0


_LOCK = threading.Lock()


@contextmanager
def count_py4j_calls() -> Iterator[CallCount]:
    """Counts the py4j commands the calling thread sends inside the block (classic sessions, whose
    gateway is py4j's pinned-thread client server, as PySpark starts it)."""
    result = CallCount()
    counted = threading.get_ident()
    with _LOCK:
        sending = clientserver.ClientServerConnection.send_command

        def send_command(connection: Any, command: str) -> Any:
            if threading.get_ident() == counted:
                result.calls += 1
            return sending(connection, command)

        clientserver.ClientServerConnection.send_command = send_command
        try:
            yield result
        finally:
            clientserver.ClientServerConnection.send_command = sending

"""Work in a thread of the test's own, and files made to look old: what tests of overlapping writers share."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def in_thread(work: Callable[[], object], name: str | None = None) -> tuple[threading.Thread, list[object]]:
    """Starts ``work`` in a thread (named ``name``); what it returned or raised lands in the list once it
    ends."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except Exception as error:  # the test asserts on it
            out.append(error)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, out


def age(paths: Iterable[Path], by_ms: int) -> None:
    """Sets the files' modification time ``by_ms`` into the past (what VACUUM and heartbeats judge by)."""
    then = time.time() - by_ms / 1000
    for path in paths:
        os.utime(path, (then, then))


class Pause:
    """``real`` as called from the thread named ``thread_name``, stopped at its first call there until
    ``resume`` (unless not ``stops``: then it only counts); other threads, and later calls, pass.
    ``calls`` counts that thread's calls."""

    def __init__(self, real: Callable[..., Any], thread_name: str, *, stops: bool = True) -> None:
        self.real = real
        self.thread_name = thread_name
        self.stops = stops
        self.calls = 0
        self.paused = threading.Event()
        self._resumed = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == self.thread_name:
            self.calls += 1
            if self.calls == 1 and self.stops:
                self.paused.set()
                if not self._resumed.wait(300):
                    raise TimeoutError(f"{self.thread_name} stayed paused for 300 s")
        return self.real(*args, **kwargs)

    def resume(self) -> None:
        self._resumed.set()

"""Run one scenario on a real redis-server and on the store, and demand the same outcome at every step.

A scenario is a list of steps; a step is a tuple of argv strings such as ``("XADD", "s", "1-1", "f", "v")``,
or a ``Pause`` that lets time pass on each target (so XCLAIM/XAUTOCLAIM min-idle-time can be exercised): it
sleeps on a target timed on the wall clock, and moves a hand-moved clock (``tests.clock.ManualClock``) forward
by the pause instead. A target is anything with ``execute(*argv)``: the raw ``RespClient`` or the store. Each
step yields an ``Outcome``: the reply, or the ``ReplyError`` line. Any other exception is a bug in the target
and fails the test at once.

Outcomes must be equal, types included (``1`` is not ``True``, a tuple is not a list), except for values that
depend on the clock, which may differ by at most the tolerance (``DEFAULT_TOLERANCE_MS``, 1,500 ms, unless a
caller passes a smaller one):

* XPENDING extended form: the idle time, element [2] of each item;
* XINFO CONSUMERS: ``idle`` and ``inactive`` (``inactive`` -1, "never", must match exactly);
* XINFO STREAM ... FULL: the absolute times ``seen-time``, ``active-time`` (-1 exact), the delivery time of
  each group ``pending`` item ([2]) and consumer ``pending`` item ([1]). The two runs happen at different
  moments, so these are compared as ages: how long before the step ran each time lies.

The tolerance absorbs how long redis-server takes between two steps (well under a millisecond each, plus the
round trip), not how long the store takes: a store command costs one to two seconds of Spark work, so on the
wall clock its idle times would grow by that much per step where Redis' stay at ~0. Every parity-style test
therefore runs the store on a clock that moves only when the scenario says time passes: a ``ManualClock``
that stands still (a ``Pause`` moves it), or one set to the moment redis-server ran the same step. Then the
store's clock values are its logic's alone, and an idle time that is off by more than 1.5 s (an XCLAIM that
did not reset it, an IDLE applied wrongly) fails the comparison.
"""

from __future__ import annotations

import pprint
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from streamclaim_spark.errors import ReplyError
from tests.clock import ManualClock

DEFAULT_TOLERANCE_MS = 1500
"""How far apart two clock-dependent values (ms) may be and still count as the same (module docstring: the
store runs on a hand-moved clock, so this covers redis-server's own steps and round trips only)."""


class Target(Protocol):
    """Anything a scenario can run on: the raw RESP client or the store.

    A target that has a ``clock`` (the store's: Unix ms) is timed on it, so the absolute times in its
    replies are compared as ages on the clock that made them (and a ``Pause`` moves it when it is a
    ``ManualClock``); others are timed on the wall clock.
    """

    def execute(self, *argv: str | bytes) -> object: ...


@dataclass(frozen=True)
class Pause:
    """A step that lets ``ms`` milliseconds pass on each target, e.g. before XCLAIM with a min-idle-time: a
    target timed on a ``ManualClock`` has it moved forward by ``ms``, any other sleeps ``ms``."""

    ms: int


Step: TypeAlias = "tuple[str | bytes, ...] | Pause"


@dataclass(frozen=True)
class Outcome:
    """What one step produced: its reply, or the full ``ReplyError`` line in ``error``.

    ``started_ms``/``finished_ms`` (wall clock) bracket the call; they never take part in ``==`` but let
    absolute times in replies be compared as ages across runs made at different moments.
    """

    reply: object = None
    error: str | None = None
    started_ms: float = field(default=0.0, compare=False)
    finished_ms: float = field(default=0.0, compare=False)

    def pretty(self, width: int = 60) -> str:
        """The outcome as shown in failure messages: ``(error) ...`` or the pretty-printed reply."""
        if self.error is not None:
            return f"(error) {self.error}"
        return pprint.pformat(self.reply, width=width, sort_dicts=False)


class StepRaisedError(AssertionError):
    """A target raised something other than ``ReplyError``: a crash, never a Redis-style reply."""


def format_step(step: Step) -> str:
    """A step as a shell-like command line (``XREADGROUP GROUP g c STREAMS s '>'``) or ``PAUSE 100ms``."""
    if isinstance(step, Pause):
        return f"PAUSE {step.ms}ms"
    return " ".join(shlex.quote(arg) if isinstance(arg, str) else repr(arg) for arg in step)


def _now_ms() -> float:
    return time.time_ns() / 1_000_000


def pause(clock: Callable[[], float], step: Pause) -> None:
    """Lets ``step.ms`` pass on ``clock``: moves a ``ManualClock`` forward, sleeps on any other clock."""
    if isinstance(clock, ManualClock):
        clock.now += step.ms
    else:
        time.sleep(step.ms / 1000)


def at_the_moment_redis_ran(clock: ManualClock, on_redis: Sequence[Outcome]) -> None:
    """Sets the store's hand-moved clock to when redis-server started the same steps (they take it
    milliseconds), so time passes alike on both sides however long the store takes."""
    clock.now = int(on_redis[0].started_ms)


def run_on(target: Target, steps: Sequence[Step]) -> list[Outcome]:
    """Execute every step on ``target`` in order and record one ``Outcome`` per step.

    A ``ReplyError`` becomes an error outcome and the scenario goes on, as a Redis client would. Any other
    exception stops the run with ``StepRaisedError`` naming the step, so it cannot pass silently.
    """
    now: Callable[[], float] = getattr(target, "clock", _now_ms)
    outcomes: list[Outcome] = []
    for index, step in enumerate(steps):
        started = now()
        if isinstance(step, Pause):
            pause(now, step)
            outcomes.append(Outcome(None, None, started, now()))
            continue
        if not isinstance(step, tuple) or not step or not all(isinstance(arg, str | bytes) for arg in step):
            raise TypeError(f"step {index} must be a non-empty tuple of str or bytes, or a Pause, got {step!r}")
        try:
            reply = target.execute(*step)
        except ReplyError as exc:
            outcomes.append(Outcome(None, str(exc), started, now()))
            continue
        except Exception as exc:
            raise StepRaisedError(
                f"step {index}: {format_step(step)}\non {target!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        outcomes.append(Outcome(reply, None, started, now()))
    return outcomes


# -- comparison ----------------------------------------------------------------------------------------------

_Check: TypeAlias = "Callable[[object, object, str], str | None]"
"""Compares expected with actual at a path; returns a description of the first difference, or None."""


def _named(path: str, name: str) -> str:
    """``path`` with the field's name appended unless the path already ends with it."""
    return path if path.endswith(f"[{name}]") else f"{path} ({name})"


class _Comparer:
    """Builds the per-command comparison rules; each rule returns the first difference found, or None."""

    def __init__(self, expected: Outcome, actual: Outcome, tolerance_ms: float) -> None:
        self.expected = expected
        self.actual = actual
        self.tolerance_ms = tolerance_ms

    def exact(self, e: object, a: object, path: str) -> str | None:
        if type(e) is not type(a):
            return f"{path}: {e!r} ({type(e).__name__}) != {a!r} ({type(a).__name__})"
        if isinstance(e, list) and isinstance(a, list):
            if len(e) != len(a):
                return f"{path}: {len(e)} elements != {len(a)} elements"
            for i, (x, y) in enumerate(zip(e, a, strict=True)):
                found = self.exact(x, y, f"{path}[{i}]")
                if found is not None:
                    return found
            return None
        return None if e == a else f"{path}: {e!r} != {a!r}"

    def duration(self, name: str, *, never: int | None = None) -> _Check:
        """A relative time in ms (idle); ``never`` is a sentinel value that must match exactly."""

        def check(e: object, a: object, path: str) -> str | None:
            if type(e) is not int or type(a) is not int or never in (e, a):
                return self.exact(e, a, path)
            gap = abs(e - a)
            if gap > self.tolerance_ms:
                return f"{_named(path, name)}: {e} != {a}, {gap} ms apart > tolerance {self.tolerance_ms:g} ms"
            return None

        return check

    def timestamp(self, name: str, *, never: int | None = None) -> _Check:
        """An absolute unix time in ms, compared as its age relative to when each run executed the step."""

        def check(e: object, a: object, path: str) -> str | None:
            if type(e) is not int or type(a) is not int or never in (e, a):
                return self.exact(e, a, path)
            e_lo, e_hi = self.expected.started_ms - e, self.expected.finished_ms - e
            a_lo, a_hi = self.actual.started_ms - a, self.actual.finished_ms - a
            gap = max(0.0, a_lo - e_hi, e_lo - a_hi)
            if gap > self.tolerance_ms:
                return (
                    f"{_named(path, name)}: {e} != {a}; ages at the step {e_lo:.0f}..{e_hi:.0f} ms vs "
                    f"{a_lo:.0f}..{a_hi:.0f} ms, {gap:.0f} ms apart > tolerance {self.tolerance_ms:g} ms"
                )
            return None

        return check

    def items(self, item: _Check) -> _Check:
        """A list whose every element is checked by ``item``."""

        def check(e: object, a: object, path: str) -> str | None:
            if not (isinstance(e, list) and isinstance(a, list) and len(e) == len(a)):
                return self.exact(e, a, path)
            for i, (x, y) in enumerate(zip(e, a, strict=True)):
                found = item(x, y, f"{path}[{i}]")
                if found is not None:
                    return found
            return None

        return check

    def positions(self, special: dict[int, _Check]) -> _Check:
        """A fixed-shape list (an XPENDING item); positions in ``special`` get their own check."""

        def check(e: object, a: object, path: str) -> str | None:
            if not (isinstance(e, list) and isinstance(a, list) and len(e) == len(a)):
                return self.exact(e, a, path)
            for i, (x, y) in enumerate(zip(e, a, strict=True)):
                found = special.get(i, self.exact)(x, y, f"{path}[{i}]")
                if found is not None:
                    return found
            return None

        return check

    def flat_map(self, special: dict[str, _Check]) -> _Check:
        """A RESP2 flat map ``[k1, v1, k2, v2, ...]``; keys must match exactly, values in ``special`` get
        their own check."""

        def check(e: object, a: object, path: str) -> str | None:
            if not (isinstance(e, list) and isinstance(a, list) and len(e) == len(a) and len(e) % 2 == 0):
                return self.exact(e, a, path)
            for i in range(0, len(e), 2):
                key, other_key = e[i], a[i]
                found = self.exact(key, other_key, f"{path}[{i}]")
                if found is not None:
                    return found
                if isinstance(key, str):
                    found = special.get(key, self.exact)(e[i + 1], a[i + 1], f"{path}[{key}]")
                else:
                    found = self.exact(e[i + 1], a[i + 1], f"{path}[{i + 1}]")
                if found is not None:
                    return found
            return None

        return check

    def rule_for(self, step: Step) -> _Check:
        """The comparison for the reply of ``step``, chosen by its command and subcommand."""
        if isinstance(step, Pause) or not step:
            return self.exact
        command = step[0].upper()
        sub = step[1].upper() if len(step) > 1 else ""
        if command == "XPENDING" and len(step) > 3:
            return self.items(self.positions({2: self.duration("idle")}))
        if command == "XINFO" and sub == "CONSUMERS":
            consumer = self.flat_map({"idle": self.duration("idle"), "inactive": self.duration("inactive", never=-1)})
            return self.items(consumer)
        if command == "XINFO" and sub == "STREAM" and any(arg.upper() == "FULL" for arg in step[3:4]):
            consumer = self.flat_map(
                {
                    "seen-time": self.timestamp("seen-time"),
                    "active-time": self.timestamp("active-time", never=-1),
                    "pending": self.items(self.positions({1: self.timestamp("delivery time")})),
                }
            )
            group = self.flat_map(
                {
                    "pending": self.items(self.positions({2: self.timestamp("delivery time")})),
                    "consumers": self.items(consumer),
                }
            )
            return self.flat_map({"groups": self.items(group)})
        return self.exact


def diff_outcome(
    step: Step, expected: Outcome, actual: Outcome, *, tolerance_ms: float = DEFAULT_TOLERANCE_MS
) -> str | None:
    """The first difference between two outcomes of ``step`` (None when they agree), clock fields tolerated."""
    if expected.error is not None or actual.error is not None:
        if expected.error == actual.error:
            return None
        return f"error: {expected.error!r} != {actual.error!r}"
    comparer = _Comparer(expected, actual, tolerance_ms)
    return comparer.rule_for(step)(expected.reply, actual.reply, "reply")


def _side_by_side(left: str, right: str, labels: tuple[str, str]) -> str:
    left_lines = [labels[0], "-" * len(labels[0]), *left.splitlines()]
    right_lines = [labels[1], "-" * len(labels[1]), *right.splitlines()]
    width = max(len(line) for line in left_lines)
    rows = max(len(left_lines), len(right_lines))
    left_lines += [""] * (rows - len(left_lines))
    right_lines += [""] * (rows - len(right_lines))
    return "\n".join(f"  {lhs.ljust(width)} | {rhs}".rstrip() for lhs, rhs in zip(left_lines, right_lines, strict=True))


def _scenario_listing(steps: Sequence[Step], marked: int, context: int = 25) -> str:
    first = max(0, marked - context)
    lines = ["  ..."] if first else []
    for index in range(first, min(len(steps), marked + 4)):
        arrow = ">>" if index == marked else "  "
        lines.append(f"  {arrow} {index:3d}  {format_step(steps[index])}")
    if marked + 4 < len(steps):
        lines.append("  ...")
    return "\n".join(lines)


def assert_same_outcomes(
    steps: Sequence[Step],
    expected: Sequence[Outcome],
    actual: Sequence[Outcome],
    *,
    tolerance_ms: float = DEFAULT_TOLERANCE_MS,
    labels: tuple[str, str] = ("redis-server", "store"),
) -> None:
    """Fail unless every step has the same outcome on both sides (clock-dependent fields within tolerance).

    The message names the first differing step (index and argv), what differs, both outcomes side by side,
    the indexes of any later differing steps and the scenario around the failing step.
    """
    __tracebackhide__ = True
    if len(expected) != len(steps) or len(actual) != len(steps):
        raise AssertionError(
            f"{len(steps)} steps but {len(expected)} {labels[0]} and {len(actual)} {labels[1]} outcomes"
        )
    diffs = [
        (index, found)
        for index, (step, e, a) in enumerate(zip(steps, expected, actual, strict=True))
        if (found := diff_outcome(step, e, a, tolerance_ms=tolerance_ms)) is not None
    ]
    if not diffs:
        return
    index, found = diffs[0]
    message = [
        f"outcomes differ at step {index}: {format_step(steps[index])}",
        f"  {found}",
        _side_by_side(expected[index].pretty(), actual[index].pretty(), labels),
    ]
    if len(diffs) > 1:
        message.append(f"later steps that differ too: {', '.join(str(i) for i, _ in diffs[1:])}")
    message += ["scenario:", _scenario_listing(steps, index)]
    raise AssertionError("\n".join(message))


def compare_scenario(
    store: Target, redis: Target, steps: Sequence[Step], *, tolerance_ms: float = DEFAULT_TOLERANCE_MS
) -> list[Outcome]:
    """Run ``steps`` on the real server, then on the store, assert the outcomes agree, and return the
    server's outcomes (so a test can also check the reference reply itself)."""
    __tracebackhide__ = True
    expected = run_on(redis, steps)
    actual = run_on(store, steps)
    assert_same_outcomes(steps, expected, actual, tolerance_ms=tolerance_ms)
    return expected

"""Template stores: build a store's state once, then give each test its own copy of the folder.

A store is a folder of Delta tables, so copying it is a few milliseconds where building it again costs a
Delta commit per step (1–2 s each on the project's machine). ``TemplateStores`` builds each template the
first time a test asks for it (lazily, so a ``-k`` run builds only what it needs), keeps it for the whole
run, and opens copies of it.

Copies of a template built on the wall clock get a **continuing clock**: it starts where the template's
clock stood when the template was finished and then runs with the wall clock. To the copy, no time passed
since the template's last command, so idle times and ages read exactly as if the steps had just run —
which is what a parity scenario replaying the same steps on redis-server sees.

Scripted tests (the parity scenarios, the Redis 8 examples) find the prefixes their scripts share with
``shared_prefixes`` and start each script from the template of its ``deepest_prefix``.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.engine.runner import Clock
from streamclaim_spark.store import wall_clock_ms

# The test sessions' settings, in this process and in the Spark drivers tests start as children.
TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    # Test tables hold a few rows and each query runs once with its own literals, so generating and
    # compiling code costs more than it saves: interpreted, a command script runs ~12% faster
    # (docs/TESTING.md). The product keeps code generation: on a 200k-entry PEL it is twice as fast.
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # tests/connect serves Spark Connect from this JVM; each worker's on a free port.
    "spark.connect.grpc.binding.port": "0",
}


@contextlib.contextmanager
def generated_code(spark: SparkSession) -> Iterator[None]:
    """Runs the block with Spark's default code generation in a session built from ``TEST_SPARK_CONF``.

    Interpreted, Spark 4.2 cannot decode its own catalog rows: ``spark.catalog.listTables`` fails with
    ``EXPRESSION_DECODING_FAILED ... newInstance(class org.apache.spark.sql.catalog.Table)``.
    """
    # Spark's own defaults, set explicitly: unset would fall back to the values the session was built with.
    # Spark reads them from the thread's active session, which may be a store's child session.
    defaults = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    sessions = {id(s): s for s in (spark, SparkSession.getActiveSession()) if s is not None}.values()
    for session in sessions:
        for name, value in defaults.items():
            session.conf.set(name, value)
    try:
        yield
    finally:
        for session in sessions:
            for name in defaults:
                session.conf.set(name, TEST_SPARK_CONF[name])


class ContinuingClock:
    """A wall clock that reads ``start_ms`` at the moment it is made and runs on from there."""

    def __init__(self, start_ms: int) -> None:
        self.offset = start_ms - wall_clock_ms()

    def __call__(self) -> int:
        return wall_clock_ms() + self.offset


@dataclass(frozen=True)
class Template:
    """A built template: its folder and, for wall-clock templates, its clock's reading when it was done."""

    path: Path
    clock_ms: int | None = None


class TemplateStores:
    """Templates of one test run under ``root``, by name; built once on first use, copied per test."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark = spark
        self.root = root
        self._built: dict[str, Template] = {}
        self._lock = threading.Lock()
        self._copies = 0

    def template(
        self,
        name: str,
        build: Callable[[StreamStore], object] | None = None,
        *,
        base: str | None = None,
        clock: Clock | None = None,
    ) -> Template:
        """The template ``name``, building it on first use: a copy of the built template ``base`` (or a new,
        empty store) on which ``build`` runs. With ``clock`` the template is built on that clock (a hand-moved
        one) and its copies get none unless the test gives one; without, ``build`` runs on the wall clock
        (or one continuing from ``base``'s) and its copies continue from where it ended."""
        with self._lock:
            if name in self._built:
                return self._built[name]
            path = self.root / f"template-{len(self._built)}"
            if base is None:
                store = StreamStore.open(str(path), spark=self.spark, clock=clock)
            elif base in self._built:
                store = self._open_copy(self._built[base], path, clock)
            else:
                raise LookupError(f"template {name!r} is built on {base!r}, which is not built yet")
            if build is not None:
                build(store)
            # A template whose state holds wall-clock times (its own steps', or its base's) hands its copies
            # a continuing clock; an empty one, or one built on a given clock, leaves the clock to them.
            inherited = base is not None and self._built[base].clock_ms is not None
            on_wall_clock = clock is None and (build is not None or inherited)
            built = Template(path, store.clock() if on_wall_clock else None)
            self._built[name] = built
            return built

    def copy(self, template: Template | str, destination: Path | None = None, **open_kwargs: object) -> StreamStore:
        """Opens a private copy of ``template`` at ``destination`` (default: a fresh folder under the root);
        ``open_kwargs`` go to ``StreamStore.open`` (a ``clock`` there overrides the continuing one)."""
        if isinstance(template, str):
            if template != EMPTY and template not in self._built:
                raise LookupError(f"template {template!r} is not built yet")
            template = self.template(template)
        if destination is None:
            with self._lock:
                self._copies += 1
                destination = self.root / f"copy-{self._copies}"
        clock = open_kwargs.pop("clock", None)
        return self._open_copy(template, destination, clock, **open_kwargs)  # type: ignore[arg-type]

    def _open_copy(self, template: Template, path: Path, clock: Clock | None, **open_kwargs: object) -> StreamStore:
        shutil.copytree(template.path, path)
        if clock is None and template.clock_ms is not None:
            clock = ContinuingClock(template.clock_ms)
        return StreamStore.open(str(path), spark=self.spark, clock=clock, **open_kwargs)  # type: ignore[arg-type]


EMPTY = "empty"
"""The template of a new, empty store: every fresh store of the suite is a copy of it."""


StepT = TypeVar("StepT", bound=Hashable)


def shared_prefixes(
    scripts: Mapping[str, Sequence[StepT]], templatable: Callable[[StepT], bool] = lambda step: True
) -> dict[tuple[StepT, ...], tuple[StepT, ...]]:
    """The prefixes of ``scripts`` worth building once as template stores, each mapped to the template it
    is built on.

    A prefix qualifies when at least two scripts start with it and it is where they part (or where one
    ends): a run of steps that every script sharing it continues alike is folded into the deeper prefix.
    Each template is built on the longest qualifying prefix of itself (``()``: an empty store), so every
    shared step runs once. A prefix ends before the first step that is not ``templatable`` (a parity
    scenario's pause, which times the run itself).
    """
    counts: Counter[tuple[StepT, ...]] = Counter()
    for steps in scripts.values():
        for end in range(1, len(steps) + 1):
            if not templatable(steps[end - 1]):
                break
            counts[tuple(steps[:end])] += 1
    children: dict[tuple[StepT, ...], list[tuple[StepT, ...]]] = {}
    for prefix in counts:
        children.setdefault(prefix[:-1], []).append(prefix)

    def folded(prefix: tuple[StepT, ...]) -> bool:
        """Every script through ``prefix`` takes the same next step: the deeper prefix serves them all."""
        below = children.get(prefix, [])
        return len(below) == 1 and counts[below[0]] == counts[prefix]

    bases: dict[tuple[StepT, ...], tuple[StepT, ...]] = {}
    for prefix in sorted((p for p, count in counts.items() if count >= 2 and not folded(p)), key=len):
        bases[prefix] = max((p for p in bases if prefix[: len(p)] == p), key=len, default=())
    return bases


def deepest_prefix(steps: Sequence[StepT], prefixes: Mapping[tuple[StepT, ...], object]) -> tuple[StepT, ...]:
    """The longest of ``prefixes`` that ``steps`` starts with (``()`` when none does)."""
    return max((p for p in prefixes if tuple(steps[: len(p)]) == p), key=len, default=())


ResultT = TypeVar("ResultT")
RunSteps = Callable[[StreamStore, "Clock | None", Sequence[StepT]], list[ResultT]]


class PrefixTemplates(Generic[StepT, ResultT]):
    """Template stores of scripts' shared prefixes (``shared_prefixes``), each with its steps' results.

    ``run(steps)`` gives one result per step: the recorded results of the deepest shared prefix, then
    the rest of the steps run on a private copy of that prefix's template.

    Args:
        templates: The run's ``TemplateStores``.
        prefixes: ``shared_prefixes`` of the scripts: each prefix mapped to the one it is built on.
        label: Names the templates (``"<label> <prefix>"``).
        run_steps: Runs steps on a store whose clock is the given one (None: the store's own) and returns
            one result per step.
        clock_after: The hand-moved clock on which the state after a prefix stands, for scripts that move
            a clock themselves; None builds templates on the wall clock and copies continue from it.
    """

    def __init__(
        self,
        templates: TemplateStores,
        prefixes: Mapping[tuple[StepT, ...], tuple[StepT, ...]],
        label: str,
        run_steps: RunSteps[StepT, ResultT],
        clock_after: Callable[[tuple[StepT, ...]], Clock] | None = None,
    ) -> None:
        self.templates = templates
        self.prefixes = prefixes
        self.label = label
        self.run_steps = run_steps
        self.clock_after = clock_after
        self.results: dict[tuple[StepT, ...], list[ResultT]] = {(): []}

    def template(self, prefix: tuple[StepT, ...]) -> Template:
        """The template of ``prefix``, built on first use (its base first)."""
        if prefix not in self.results:
            base = self.prefixes[prefix]
            self.template(base)
            clock = self.clock_after(base) if self.clock_after else None

            def build(store: StreamStore) -> None:
                self.results[prefix] = self.results[base] + self.run_steps(store, clock, prefix[len(base) :])

            self.templates.template(self._name(prefix), build, base=self._name(base), clock=clock)
        return self.templates.template(self._name(prefix))

    def run(self, steps: Sequence[StepT]) -> list[ResultT]:
        """The results of ``steps``: the deepest shared prefix's, then the rest run on a copy of its template."""
        prefix = deepest_prefix(steps, self.prefixes)
        clock = self.clock_after(prefix) if self.clock_after else None
        store = self.templates.copy(self.template(prefix), clock=clock)
        return self.results[prefix] + self.run_steps(store, clock, steps[len(prefix) :])

    def _name(self, prefix: tuple[StepT, ...]) -> str:
        return f"{self.label} {prefix!r}" if prefix else EMPTY

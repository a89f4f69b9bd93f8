"""Where each piece of work runs: on the driver (pyarrow, a Delta transaction of files) or in Spark.

Most work the store does has two forms side by side. The driver form reads data files with pyarrow,
decides in Arrow and commits a Delta transaction of files: no Spark job, the fastest for a command's
few rows. The Spark form is a query, a Spark write or a MERGE: its executors share big work, and it is
the only form on Spark Connect (no JVM on the client) or for a file with a deletion vector. Every
choice between them is made here, by a named ``Work``, against the thresholds of one ``Placement``
(the ``[store.placement]`` settings, docs/DESIGN.md, "One engine"). Callers say what they hold (rows,
stored bytes, whether the session is classic) and get a ``Form``; a threshold is never a constant of
its caller.

The placement is the process's (``configure``): the settings of the store's Spark application, set when
a job, server or notebook opens its store. ``force`` makes one form run wherever it can (the tests run
their suites with each).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from streamclaim_spark.core.conf_keys import Key, conf_key, parse_positive_int, value_parser

Force = Literal["auto", "driver", "spark"]
FORCES: tuple[Force, ...] = ("auto", "driver", "spark")

_MIB = 1024 * 1024
# No bound: the largest a Java int holds less one, since callers pass a bound plus one to Spark's limit.
_UNBOUNDED = 2**31 - 2


class Form(enum.Enum):
    """The two forms of a piece of work."""

    DRIVER = "driver"  # pyarrow on the driver, committed as a Delta transaction of files
    SPARK = "spark"  # a Spark query, write or MERGE


class Work(enum.Enum):
    """Each piece of work that has a driver form and a Spark form."""

    COMMIT = "commit"  # a command's commit: a transaction of files, or a MERGE
    READ_FILES = "read files"  # data files read by pyarrow (heads, a command's rows, counts)
    WRITE_FILES = "write files"  # new rows written as Parquet files by pyarrow, or by a Spark write
    APPLY = "apply"  # a command's writes applied to the stored rows of the files they reach
    RECOUNT = "recount"  # PEL rows read to recount groups whose kept counts were left behind
    PREFETCH = "prefetch"  # the rows a command reads, from the files that may hold them
    DECIDE = "decide"  # key columns read for a decision (a delivery's entries, an import's keys)
    REMOVE = "remove"  # files rewritten without the rows a removal names
    REWRITE = "rewrite"  # files rewritten by a claim (each file's rows transformed)
    COUNT = "count"  # PEL rows counted by owner for a batched claim
    IMPORT = "import"  # rows of a Redis import planned and written on the driver
    ACK_IDS = "ack ids"  # IDs of a bulk acknowledgement held on the driver


# The ``Placement`` field bounding the rows each piece of work's driver form may hold; absent: bounded by
# stored bytes alone (a commit, reading or writing files: their callers' own rows are bounded above).
_ROWS_BOUND = {
    Work.APPLY: "apply_rows",
    Work.RECOUNT: "recount_rows",
    Work.PREFETCH: "prefetch_rows",
    Work.DECIDE: "decide_rows",
    Work.REMOVE: "remove_rows",
    Work.REWRITE: "rewrite_rows",
    Work.COUNT: "count_rows",
    Work.IMPORT: "import_rows",
    Work.ACK_IDS: "ack_ids",
}


def _force_of(value: object) -> Force:
    return value  # type: ignore[return-value]


parse_force = value_parser(
    lambda v: v in FORCES,
    'must be "auto" (each piece of work where it runs best), "driver" or "spark" (that form wherever it can run)',
    _force_of,
)


@dataclass(frozen=True)
class Placement:
    """The thresholds between the driver and Spark (``[store.placement]``).

    The defaults are for one machine, where the driver has the cores Spark's tasks would use: the driver
    form wins up to millions of rows. On a cluster, lower the row bounds (executors should take big work
    sooner) and size ``driver_bytes`` to the driver's memory (docs/DEPLOY.md, "What a driver needs").

    Attributes:
        force: ``"auto"``: each piece of work by the thresholds; ``"driver"``: the driver form wherever it
            can run (thresholds ignored, but never past ``driver_bytes``); ``"spark"``: the Spark form always.
        driver_bytes: Most stored (compressed Parquet) bytes of the data files one piece of driver work
            reads or rewrites, payloads included; past it, Spark. The driver holds a few times this in memory.
        apply_rows: Most stored rows a command's writes are applied to on the driver (past it, a MERGE).
        recount_rows: Most PEL rows one commit reads to recount left-behind kept counts.
        prefetch_rows: Most rows a command's reads take from files on the driver.
        decide_rows: Most rows a decision reads on the driver.
        remove_rows: Most rows of the files a removal rewrites on the driver.
        rewrite_rows: Most rows of the files a claim rewrites on the driver.
        count_rows: Most PEL rows a batched claim counts on the driver.
        import_rows: Most rows a Redis import plans on the driver.
        ack_ids: Most IDs a bulk acknowledgement holds on the driver.
    """

    TABLE: ClassVar[Key] = ("store", "placement")

    force: Force = field(default="auto", metadata=conf_key(parse_force))
    driver_bytes: int = field(default=512 * _MIB, metadata=conf_key(parse_positive_int))
    apply_rows: int = field(default=250_000, metadata=conf_key(parse_positive_int))
    recount_rows: int = field(default=250_000, metadata=conf_key(parse_positive_int))
    prefetch_rows: int = field(default=200_000, metadata=conf_key(parse_positive_int))
    decide_rows: int = field(default=1_000_000, metadata=conf_key(parse_positive_int))
    remove_rows: int = field(default=1_000_000, metadata=conf_key(parse_positive_int))
    rewrite_rows: int = field(default=20_000_000, metadata=conf_key(parse_positive_int))
    count_rows: int = field(default=20_000_000, metadata=conf_key(parse_positive_int))
    import_rows: int = field(default=2_000_000, metadata=conf_key(parse_positive_int))
    ack_ids: int = field(default=2_000_000, metadata=conf_key(parse_positive_int))

    def rows_max(self, work: Work) -> int:
        """The most rows ``work``'s driver form may hold (-1 under ``force="spark"``: none, so a caller
        that checks rows against it always takes the Spark form)."""
        if self.force == "spark":
            return -1
        if work not in _ROWS_BOUND or self.force == "driver":
            return _UNBOUNDED
        bound: int = getattr(self, _ROWS_BOUND[work])
        return bound

    def choose(self, work: Work, *, classic: bool, rows: int = 0, stored_bytes: int = 0) -> Form:
        """The form ``work`` takes holding ``rows`` rows in data files of ``stored_bytes`` bytes, on a
        classic session (``classic``) or Spark Connect (where only the Spark form runs)."""
        if not classic or self.force == "spark" or stored_bytes > self.driver_bytes:
            return Form.SPARK
        return Form.DRIVER if rows <= self.rows_max(work) else Form.SPARK

    def on_driver(self, work: Work, *, classic: bool, rows: int = 0, stored_bytes: int = 0) -> bool:
        """True when ``choose`` gives the driver form."""
        return self.choose(work, classic=classic, rows=rows, stored_bytes=stored_bytes) is Form.DRIVER


_CURRENT = [Placement()]


def placement() -> Placement:
    """The process's placement (``configure``; the defaults until then)."""
    return _CURRENT[-1]


def configure(settings: Placement) -> None:
    """Makes ``settings`` the process's placement (a store's job, server or notebook sets it at open)."""
    _CURRENT[0] = settings
    del _CURRENT[1:]


@contextlib.contextmanager
def placed(settings: Placement | None = None, **changes: object) -> Iterator[Placement]:
    """Runs the block under ``settings`` (default: the current placement) with ``changes``, then puts
    back the placement before: for tests and benches that move one threshold."""
    chosen = dataclasses.replace(settings or placement(), **changes)  # type: ignore[arg-type]
    _CURRENT.append(chosen)
    try:
        yield chosen
    finally:
        _CURRENT.remove(chosen)

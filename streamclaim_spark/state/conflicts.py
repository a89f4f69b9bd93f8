"""Which failures of a Delta commit mean "another writer got there first": the command should re-run.

Delta's Python conflict classes do not share a base class (reference/delta-concurrency.md §1.9), and a
command's own guard aborts its MERGE with a marked error; both are lost races, whatever writes them.
"""

from __future__ import annotations

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column
from pyspark.sql import functions as F

from streamclaim_spark.errors import StaleSnapshotError

# Text of the error the guard raises inside the MERGE; the retry loop recognises it by this marker.
STALE_SNAPSHOT_MARKER = "STREAMCLAIM_STALE_SNAPSHOT"

CONFLICT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    MetadataChangedException,
    ProtocolChangedException,
    DeltaConcurrentModificationException,
)


def stale_snapshot_error() -> Column:
    """The guard's abort as a Column (in a MERGE clause, an UPDATE, a commit's rewritten rows): a lost
    race that ``is_lost_race`` recognises."""
    return F.raise_error(F.lit(STALE_SNAPSHOT_MARKER))


def is_lost_race(error: BaseException) -> bool:
    """True for a Delta conflict or a stale-snapshot guard abort: the command should re-run."""
    if isinstance(error, (*CONFLICT_EXCEPTIONS, StaleSnapshotError)):
        return True
    # A guard's abort inside a write of files that pyspark does not convert (a py4j call's job failure).
    return isinstance(error, PySparkException | Py4JJavaError) and STALE_SNAPSHOT_MARKER in str(error)

"""Which data files a commit of files must look at: rows of some kinds in some partitions, with IDs in
a range. Plain values: the state layer turns a query into the filter Delta records as the commit's
read (``state.schema.file_condition``) and tests each file the log lists against it by its statistics
(``may_hold``), so that a commit lists its files on the driver instead of by a Spark job.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.partitions import buckets_of


@dataclass(frozen=True)
class FileQuery:
    """Rows of ``kinds`` in ``partitions``, with IDs in [``low``, ``high``] when both are given.

    ``every_partition_named``: the filter names each partition however many there are (a removal's
    exact rows); otherwise past ``schema.NAMED_PARTITIONS_MAX`` partitions it names their buckets only.
    """

    partitions: tuple[str, ...]
    kinds: tuple[str, ...]
    low: StreamId | None = None
    high: StreamId | None = None
    every_partition_named: bool = False

    def may_hold(self, bucket: str, bounds: FileBounds | None) -> bool:
        """False only when a file of ``bucket`` with these statistics (None: none written) can hold no
        row the query names: it is in no bucket of the query, or its partition IDs or its IDs lie
        outside the query's. Never False for a file that holds such a row."""
        if bucket not in self.buckets:
            return False
        if bounds is None:
            return True
        if not bounds.may_hold_one_of(C.PARTITION_ID, self._sorted_partitions):
            return False
        return self.low is None or self.high is None or bounds.may_hold_ids(self.low, self.high)

    @cached_property
    def buckets(self) -> frozenset[str]:
        """The buckets that can hold the query's rows."""
        return frozenset(buckets_of(self.partitions, self.kinds))

    @cached_property
    def _sorted_partitions(self) -> list[str]:
        return sorted(set(self.partitions))

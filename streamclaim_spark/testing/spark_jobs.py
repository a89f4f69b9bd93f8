"""Counting the Spark jobs a piece of work runs: the deterministic cost measure of a command.

Wall-clock times vary with the machine's load; the number of Spark jobs a command launches does not.
``count_jobs`` runs the caller's work under a job group of its own and asks Spark's status tracker
which jobs ran in it. Tests hold commands to job budgets with it (tests/spark/test_job_budgets.py) and
``bench.jobs`` prints the counts docs/BENCHMARKS.md ("Spark jobs per command") gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import SparkContext


@dataclass
class JobCount:
    """The jobs a ``count_jobs`` block ran: their number and, for profiling, their descriptions."""

    jobs: int = 0
    descriptions: list[str] = field(default_factory=list)


@contextmanager
def count_jobs(context: SparkContext) -> Iterator[JobCount]:
    """Counts the Spark jobs the calling thread starts inside the ``with`` block.

    The job group is thread-local, so jobs of other threads are not counted; the caller's previous
    job group is not restored (Spark offers no way to read it back), only cleared.
    """
    group = f"streamclaim-count-{uuid.uuid4().hex}"
    result = JobCount()
    context.setJobGroup(group, "counted", interruptOnCancel=False)
    try:
        yield result
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        tracker = context.statusTracker()
        ids = sorted(tracker.getJobIdsForGroup(group))
        result.jobs = len(ids)
        jvm_tracker = context._jsc.sc().statusTracker()
        for job_id in ids:
            info = jvm_tracker.getJobInfo(job_id)
            stages = list(info.get().stageIds()) if info.isDefined() else []
            names = []
            for stage_id in stages:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    names.append(stage.name)
            result.descriptions.append("; ".join(names))

"""The session settings each commit sets: its user metadata, and how a small plan avoids Spark jobs.

One function says what every setting is for a commit (``commit_settings``), so the list of settings a
commit changes (``COMMIT_SETTINGS``, which a Spark Connect commit puts back afterwards) can never drift
from what the commit sets.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# Whether Delta's auto compaction runs after a commit; set by a commit of files (engine/file_commit),
# which knows whether it is worth checking, and unset (the table's property decides) by every other.
AUTO_COMPACT = "spark.databricks.delta.autoCompact.enabled"
# Delta's own threshold, counted in its per-process memory of the files this process added: a commit of
# files that found a bucket worth compacting (by the count of the whole bucket) sets it to 1 so that
# Delta's memory, which may know fewer of the bucket's files, does not overrule that count.
AUTO_COMPACT_MIN_NUM_FILES = "spark.databricks.delta.autoCompact.minNumFiles"


def commit_settings(operation: str, *, small: bool, rows_per_file: int, pinned: bool = False) -> dict[str, str | None]:
    """Every setting a commit changes, with its value for this commit (None: unset, Spark's default).

    Args:
        operation: The commit's user metadata (the command, e.g. ``XAUTOCLAIM``), shown by DESCRIBE HISTORY.
        small: The plan is a command's few rows (a local source), not a bulk write.
        rows_per_file: The store's cap on rows per data file (0: no cap).
        pinned: The source frames are checkpointed (``Plan.frames_pinned``), so Delta need not copy them.
    """
    small_below = str(small_file_bytes(rows_per_file)) if rows_per_file else None
    return {
        USER_METADATA: operation,
        # A command's few row writes touch a few small files: rewriting them costs fewer Spark jobs than
        # deletion vectors, and a local source needs no materializing, nor does a checkpointed one (it
        # reads the same rows in both of the MERGE's passes). Other bulk plans keep both (docs/DESIGN.md).
        "spark.databricks.delta.merge.deletionVectors.persistent": "false" if small else "true",
        "spark.databricks.delta.merge.materializeSource": "none" if small or pinned else "auto",
        # Adaptive execution splits a MERGE into one Spark job per query stage; tiny MERGEs gain nothing.
        "spark.sql.adaptive.enabled": "false" if small else "true",
        # Broadcasting a tiny MERGE's matched target rows is a Spark job of its own; a shuffle join of a
        # few rows is a stage inside the join's job (5 → 4 jobs per command, docs/DESIGN.md).
        "spark.sql.autoBroadcastJoinThreshold": "-1" if small else None,
        "spark.sql.files.maxRecordsPerFile": str(rows_per_file),
        "spark.databricks.delta.autoCompact.minFileSize": small_below,
        AUTO_COMPACT: None,
        AUTO_COMPACT_MIN_NUM_FILES: None,
    }


COMMIT_SETTINGS = tuple(commit_settings("", small=True, rows_per_file=0))
"""The session settings a commit changes: on Spark Connect, put back afterwards (delta_io.committing)."""


def apply_settings(spark: SparkSession, settings: dict[str, str | None]) -> None:
    """Sets each setting in ``spark`` (None: unsets it)."""
    for key, value in settings.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def small_file_bytes(rows_per_file: int) -> int:
    """The size below which auto compaction counts a data file as small, for a store capped at ``rows_per_file``.

    Delta's default (64 MB) counts every capped file as small, so once a partition holds 50 of them
    each commit there rewrote them all after committing (measured: an XAUTOCLAIM of 1,000 entries
    from a 1M PEL in 10k-row files 5 s → 11 s; every command on a 10M PEL rewrote 10M rows). A
    pending row takes about 4 bytes compressed, so this is about half a full file: the few-row files
    commands leave behind (~7 KB), and files rewritten below half their cap, still compact.
    """
    return max(4096, 2 * rows_per_file)

"""What a commit sets in its session, and the list a Spark Connect commit puts back, are one list."""

from __future__ import annotations

import itertools

from streamclaim_spark.state.commit_settings import COMMIT_SETTINGS, commit_settings


def test_every_kind_of_commit_sets_exactly_the_settings_a_connect_commit_puts_back() -> None:
    for small, pinned, rows_per_file in itertools.product((True, False), (True, False), (0, 100_000)):
        settings = commit_settings("XADD", small=small, rows_per_file=rows_per_file, pinned=pinned)
        assert tuple(settings) == COMMIT_SETTINGS


def test_a_small_commit_turns_off_what_costs_it_spark_jobs_and_a_bulk_one_keeps_spark_defaults() -> None:
    small = commit_settings("XACK", small=True, rows_per_file=100_000)
    bulk = commit_settings("BULK ACK", small=False, rows_per_file=0, pinned=True)
    assert small == {
        "spark.databricks.delta.commitInfo.userMetadata": "XACK",
        "spark.databricks.delta.merge.deletionVectors.persistent": "false",
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.files.maxRecordsPerFile": "100000",
        "spark.databricks.delta.autoCompact.minFileSize": "200000",
        "spark.databricks.delta.autoCompact.enabled": None,
        "spark.databricks.delta.autoCompact.minNumFiles": None,
    }
    assert bulk == {
        "spark.databricks.delta.commitInfo.userMetadata": "BULK ACK",
        "spark.databricks.delta.merge.deletionVectors.persistent": "true",
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.autoBroadcastJoinThreshold": None,
        "spark.sql.files.maxRecordsPerFile": "0",
        "spark.databricks.delta.autoCompact.minFileSize": None,
        "spark.databricks.delta.autoCompact.enabled": None,
        "spark.databricks.delta.autoCompact.minNumFiles": None,
    }

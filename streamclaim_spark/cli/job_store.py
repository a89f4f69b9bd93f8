"""What every job on a store starts with: its session, and the checks that the store can be used.

The recovery, maintenance and redrive jobs take the caller's session (tests, notebooks) or the active one
(spark-submit), else build one from ``[spark]`` and stop it when they end; then they refuse a path where
two drivers could both commit one version (writer safety) and a path that holds no store, each with its
exit code, before anything is read or written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

from pyspark.sql import SparkSession

from streamclaim_spark.cli.flags import EXIT_CONFIG
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import AppConfig
from streamclaim_spark.errors import UnsafeObjectStoreError
from streamclaim_spark.state.delta_io import is_delta_table
from streamclaim_spark.state.session import session_from_config, writer_safety
from streamclaim_spark.state.tables import table_path

# What a store job exits with when its path holds no store.
EXIT_NO_STORE = 3


@contextlib.contextmanager
def job_session(config: AppConfig, spark: SparkSession | None, app_name: str | None = None) -> Iterator[SparkSession]:
    """The job's session: ``spark`` when given, else the active one or one built from ``config.spark``
    (named ``app_name`` when given); stopped at the end only when the job built it."""
    owned = spark is None and SparkSession.getActiveSession() is None
    settings = config.spark if app_name is None else replace(config.spark, app_name=app_name)
    session = spark if spark is not None else session_from_config(settings)
    try:
        yield session
    finally:
        if owned:
            session.stop()


def store_refusal(session: SparkSession, config: AppConfig) -> tuple[int, str] | None:
    """Why the job cannot work on the configured store, as (exit code, message); None when it can."""
    path = config.store.path
    try:
        writer_safety(session, path, single_writer=config.store.single_writer)
    except UnsafeObjectStoreError as error:
        return EXIT_CONFIG, str(error)
    if not store_exists(session, path):
        state = table_path(path, C.STATE_TABLE_DIR)
        return EXIT_NO_STORE, (
            f"no store at {path} (no Delta table at {state}); set store.path in conf/local.toml "
            "or pass --store with the folder of an existing store"
        )
    return None


def store_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a store (its state table), without creating anything."""
    return is_delta_table(spark, table_path(path, C.STATE_TABLE_DIR))

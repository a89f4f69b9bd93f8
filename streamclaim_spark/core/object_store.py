"""Whether Delta's log store makes commits to a path safe with more than one writing driver.

The store's promise (one winner per claim, nothing lost) rests on Delta committing version N of a table
at most once. Delta writes ``_delta_log/N.json`` through a LogStore chosen by the path's scheme; on S3 the
default (``S3SingleDriverLogStore``) only serialises commits inside one JVM, so two drivers can both
"win" version N and one's changes are lost. This module decides, from the path and the Spark settings
alone (no I/O, no Spark), which log store Delta will use and whether the store may open there.

Delta reads the log-store settings from the SparkContext's configuration when it first needs a LogStore
(``spark.delta.logStore.<scheme>.impl`` or ``spark.delta.logStore.class``, each also without the
``spark.`` prefix): they must be set when the session starts, not with ``spark.conf.set`` afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from streamclaim_spark.errors import UnsafeObjectStoreError

WriterMode = Literal["multi-writer", "single-writer"]
MULTI_WRITER: WriterMode = "multi-writer"
SINGLE_WRITER: WriterMode = "single-writer"

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
AZURE_SCHEMES = frozenset({"abfs", "abfss", "adl", "wasb", "wasbs"})
GCS_SCHEMES = frozenset({"gs"})
# File systems whose rename refuses to overwrite atomically: Delta's HDFSLogStore is safe on them.
ATOMIC_RENAME_SCHEMES = frozenset({"file", "hdfs", "viewfs"})
_KNOWN_SCHEMES = S3_SCHEMES | AZURE_SCHEMES | GCS_SCHEMES | ATOMIC_RENAME_SCHEMES

S3_DYNAMODB_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"
_S3_SINGLE_DRIVER = "io.delta.storage.S3SingleDriverLogStore"
_AZURE = "io.delta.storage.AzureLogStore"
_GCS = "io.delta.storage.GCSLogStore"
_HDFS = "io.delta.storage.HDFSLogStore"
_DELEGATING = "org.apache.spark.sql.delta.storage.DelegatingLogStore"
# The store's own log store for file:// (state/local_commits.py): a commit put in place by a hard link.
LOCAL_LINK_LOG_STORE = "io.streamclaim.spark.LocalLinkLogStore"

# Log stores that make a commit's put-if-absent atomic across drivers (DynamoDB's conditional put, the
# store's own atomic rename or hard link, or GCS/Azure preconditions), keyed by the schemes they are safe on.
_SAFE_LOG_STORES: Mapping[str, frozenset[str]] = {
    S3_DYNAMODB_LOG_STORE: S3_SCHEMES,
    "io.delta.storage.S3ScyllaDBLogStore": S3_SCHEMES,
    _AZURE: AZURE_SCHEMES,
    "org.apache.spark.sql.delta.storage.AzureLogStore": AZURE_SCHEMES,
    _GCS: GCS_SCHEMES,
    _HDFS: ATOMIC_RENAME_SCHEMES,
    LOCAL_LINK_LOG_STORE: frozenset({"file"}),
    "org.apache.spark.sql.delta.storage.HDFSLogStore": ATOMIC_RENAME_SCHEMES,
}
# Log stores that serialise commits inside one JVM only.
_SINGLE_DRIVER_LOG_STORES = frozenset(
    {
        _S3_SINGLE_DRIVER,
        "org.apache.spark.sql.delta.storage.S3SingleDriverLogStore",
        "io.delta.storage.LocalLogStore",
        "org.apache.spark.sql.delta.storage.LocalLogStore",
    }
)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# A Windows drive letter ("C:\\data") is a local path, not a scheme.
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")

# delta-spark 4.4.1 on PyPI is a Python-only patch release: Maven Central carries the JVM artifact for
# Spark 4.2 only up to 4.4.0, which the 4.4.1 Python API drives unchanged (docs/DESIGN.md, "Stack").
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
DYNAMODB_PACKAGES = "io.delta:delta-storage-s3-dynamodb:4.4.0,com.amazonaws:aws-java-sdk-dynamodb:1.12.262"
S3A_PACKAGE = "org.apache.hadoop:hadoop-aws:3.5.0"


@dataclass(frozen=True)
class WriterSafety:
    """What opening the store at a path means for concurrent writers.

    Attributes:
        scheme: The path's scheme (the default file system's when the path has none).
        log_store: The LogStore class Delta uses for that scheme under these settings.
        mode: ``"multi-writer"`` (any number of drivers may write) or ``"single-writer"`` (the user
            promised one writing driver: the log store only serialises commits inside one JVM).
        warnings: What was assumed and should be told to the user (logged at open).
    """

    scheme: str
    log_store: str
    mode: WriterMode
    warnings: tuple[str, ...] = ()


def path_scheme(path: str, default_fs: str = "file:///") -> str:
    """The lower-cased scheme of ``path``; a path without one lives on the default file system."""
    if _DRIVE.match(path):
        return "file"
    match = _SCHEME.match(path) or _SCHEME.match(default_fs)
    return match.group(1).lower() if match else "file"


def log_store_class(scheme: str, spark_conf: Mapping[str, str]) -> str:
    """The LogStore class Delta picks for ``scheme``, as Delta's LogStoreProvider/DelegatingLogStore do.

    ``spark.delta.logStore.class`` replaces the per-scheme choice; otherwise
    ``spark.delta.logStore.<scheme>.impl``, otherwise Delta's default for the scheme. Either key may also
    be given without the ``spark.`` prefix.
    """
    chosen = _setting(spark_conf, "spark.delta.logStore.class")
    if chosen is not None and chosen != _DELEGATING:
        return chosen
    chosen = _setting(spark_conf, f"spark.delta.logStore.{scheme}.impl")
    if chosen is not None:
        return chosen
    if scheme in S3_SCHEMES:
        return _S3_SINGLE_DRIVER
    if scheme in AZURE_SCHEMES:
        return _AZURE
    if scheme in GCS_SCHEMES:
        return _GCS
    return _HDFS


def check_writer_safety(
    path: str,
    spark_conf: Mapping[str, str],
    *,
    single_writer: bool = False,
    default_fs: str = "file:///",
) -> WriterSafety:
    """Decides whether the store may open at ``path``; raises UnsafeObjectStoreError when it may not.

    Args:
        path: The store's folder.
        spark_conf: The SparkContext's settings (Delta reads its log-store keys there).
        single_writer: The user's promise that one driver at a time writes the store: allows a log store
            that serialises commits in one JVM only (threads of this driver still race safely).
        default_fs: Hadoop's ``fs.defaultFS``, the file system of a path without a scheme.
    """
    scheme = path_scheme(path, default_fs)
    log_store = log_store_class(scheme, spark_conf)
    safe_on = _SAFE_LOG_STORES.get(log_store)
    if safe_on is not None and scheme in safe_on:
        return WriterSafety(scheme, log_store, MULTI_WRITER)
    if log_store in _SINGLE_DRIVER_LOG_STORES:
        if not single_writer:
            raise UnsafeObjectStoreError(_refusal(path, scheme, log_store))
        warning = (
            f"path={path}: single-writer mode: {log_store} serialises commits inside this driver only; "
            "a second driver writing this store at the same time (another recovery run, a notebook, a server) "
            "can commit the same Delta version and lose claims or entries."
        )
        return WriterSafety(scheme, log_store, SINGLE_WRITER, (warning,))
    if safe_on is not None and scheme in _KNOWN_SCHEMES:
        # A known store set for a known scheme it is not made for (HDFSLogStore's rename on S3 is a copy):
        # not even one driver's threads are safe, so no promise opens it.
        raise UnsafeObjectStoreError(
            f"path={path}: the Spark settings make Delta commit to {scheme}:// through {log_store}, which is made "
            f"for {'/'.join(sorted(safe_on))} and does not keep one winner per commit on {scheme}://. Remove the "
            f"setting that chose it (spark.delta.logStore.{scheme}.impl or spark.delta.logStore.class) so Delta "
            f"uses its default for {scheme}:// (docs/DEPLOY.md)."
        )
    # A log store or a scheme this module does not know: say what is assumed, then trust it.
    if log_store == _HDFS:
        assumption = (
            f"path={path}: the {scheme}:// file system is not one streamclaim-spark knows; Delta uses {_HDFS} "
            "for it, which is safe with several writing drivers only if the file system's rename is atomic and "
            "never overwrites (as on HDFS). If it is an object store without that, set a log store with "
            "put-if-absent (docs/DEPLOY.md) or open the store with single_writer=True and run one writer."
        )
    else:
        assumption = (
            f"path={path}: log store {log_store} (from the Spark settings) is not one streamclaim-spark knows; "
            "it is assumed to make each commit a put-if-absent that is atomic across drivers."
        )
    mode = SINGLE_WRITER if single_writer else MULTI_WRITER
    return WriterSafety(scheme, log_store, mode, (assumption,))


def _refusal(path: str, scheme: str, log_store: str) -> str:
    problem = (
        f"path={path}: Delta commits to {scheme}:// through {log_store}, which is safe for one writing driver only: "
        "two drivers (a recovery run and a notebook, two job runs) can both commit the same table version, so a "
        "claim can be lost or an entry owned twice."
    )
    if scheme in S3_SCHEMES:
        fix = (
            f" Use the DynamoDB log store: start Spark with --packages {DYNAMODB_PACKAGES},{S3A_PACKAGE} and "
            f"--conf spark.delta.logStore.{scheme}.impl={S3_DYNAMODB_LOG_STORE} (plus "
            "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName and .ddb.region; docs/DEPLOY.md)."
        )
    else:
        fix = (
            f" Remove the log-store setting that chose {log_store} for {scheme}:// so Delta uses its safe default "
            "(docs/DEPLOY.md)."
        )
    opt_in = (
        " If only one driver ever writes this store, open it with StreamStore.open(..., single_writer=True) "
        "(store.single_writer = true in conf/, --single-writer for the jobs)."
    )
    return problem + fix + opt_in


def _setting(conf: Mapping[str, str], key: str) -> str | None:
    value = conf.get(key)
    if value is None:
        value = conf.get(key.removeprefix("spark."))
    return value.strip() if value is not None and value.strip() else None

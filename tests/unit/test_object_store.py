"""Which Delta log store a path gets, and whether the store may open there (object_store.py, no Spark)."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.object_store import (
    MULTI_WRITER,
    SINGLE_WRITER,
    check_writer_safety,
    log_store_class,
    path_scheme,
)
from streamclaim_spark.errors import UnsafeObjectStoreError

DYNAMODB = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}


@pytest.mark.parametrize(
    ("path", "default_fs", "scheme"),
    [
        ("/data/streams", "file:///", "file"),
        ("data/streams", "hdfs://namenode:8020", "hdfs"),
        ("file:/data/streams", "hdfs://namenode:8020", "file"),
        ("S3A://Bucket/streams", "file:///", "s3a"),
        ("abfss://c@account.dfs.core.windows.net/s", "file:///", "abfss"),
        ("C:\\data\\streams", "file:///", "file"),
        ("relative", "s3a://bucket", "s3a"),
    ],
)
def test_a_path_without_a_scheme_lives_on_the_default_file_system(path: str, default_fs: str, scheme: str) -> None:
    assert path_scheme(path, default_fs) == scheme


@pytest.mark.parametrize(
    ("scheme", "conf", "expected"),
    [
        ("s3a", {}, "io.delta.storage.S3SingleDriverLogStore"),
        ("s3", {}, "io.delta.storage.S3SingleDriverLogStore"),
        ("abfss", {}, "io.delta.storage.AzureLogStore"),
        ("wasbs", {}, "io.delta.storage.AzureLogStore"),
        ("gs", {}, "io.delta.storage.GCSLogStore"),
        ("file", {}, "io.delta.storage.HDFSLogStore"),
        ("oss", {}, "io.delta.storage.HDFSLogStore"),
        ("s3a", DYNAMODB, "io.delta.storage.S3DynamoDBLogStore"),
        # Delta accepts the keys without the "spark." prefix too.
        (
            "s3a",
            {"delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"},
            "io.delta.storage.S3DynamoDBLogStore",
        ),
        # The scheme key of another scheme does not apply.
        ("s3", DYNAMODB, "io.delta.storage.S3SingleDriverLogStore"),
        # The class key replaces every per-scheme choice.
        (
            "gs",
            {"spark.delta.logStore.class": "io.delta.storage.S3SingleDriverLogStore"},
            "io.delta.storage.S3SingleDriverLogStore",
        ),
    ],
)
def test_the_log_store_is_chosen_as_delta_chooses_it(scheme: str, conf: dict[str, str], expected: str) -> None:
    assert log_store_class(scheme, conf) == expected


@pytest.mark.parametrize("path", ["s3a://bucket/streams", "s3://bucket/streams", "s3n://bucket/streams"])
def test_s3_without_a_multi_writer_log_store_is_refused_with_the_settings_to_add(path: str) -> None:
    scheme = path.split(":")[0]
    with pytest.raises(UnsafeObjectStoreError) as refused:
        check_writer_safety(path, {})
    assert str(refused.value) == (
        f"path={path}: Delta commits to {scheme}:// through io.delta.storage.S3SingleDriverLogStore, which is safe "
        "for one writing driver only: two drivers (a recovery run and a notebook, two job runs) can both commit the "
        "same table version, so a claim can be lost or an entry owned twice. Use the DynamoDB log store: start Spark "
        "with --packages io.delta:delta-storage-s3-dynamodb:4.4.0,com.amazonaws:aws-java-sdk-dynamodb:1.12.262,"
        f"org.apache.hadoop:hadoop-aws:3.5.0 and --conf spark.delta.logStore.{scheme}.impl="
        "io.delta.storage.S3DynamoDBLogStore (plus spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName and "
        ".ddb.region; docs/DEPLOY.md). If only one driver ever writes this store, open it with "
        "StreamStore.open(..., single_writer=True) (store.single_writer = true in conf/, --single-writer for the jobs)."
    )


def test_a_relative_path_on_an_s3_default_file_system_is_refused_too() -> None:
    with pytest.raises(UnsafeObjectStoreError, match=r"^path=streams: Delta commits to s3a://"):
        check_writer_safety("streams", {}, default_fs="s3a://bucket")


def test_single_writer_mode_opens_s3_with_a_warning_naming_the_risk() -> None:
    safety = check_writer_safety("s3a://bucket/streams", {}, single_writer=True)
    assert (safety.scheme, safety.log_store, safety.mode) == (
        "s3a",
        "io.delta.storage.S3SingleDriverLogStore",
        SINGLE_WRITER,
    )
    assert safety.warnings == (
        "path=s3a://bucket/streams: single-writer mode: io.delta.storage.S3SingleDriverLogStore serialises commits "
        "inside this driver only; a second driver writing this store at the same time (another recovery run, a "
        "notebook, a server) can commit the same Delta version and lose claims or entries.",
    )


@pytest.mark.parametrize(
    ("path", "conf", "log_store"),
    [
        ("s3a://bucket/streams", DYNAMODB, "io.delta.storage.S3DynamoDBLogStore"),
        (
            "s3://bucket/s",
            {"spark.delta.logStore.s3.impl": "io.delta.storage.S3ScyllaDBLogStore"},
            "io.delta.storage.S3ScyllaDBLogStore",
        ),
        ("abfss://c@account.dfs.core.windows.net/s", {}, "io.delta.storage.AzureLogStore"),
        ("gs://bucket/streams", {}, "io.delta.storage.GCSLogStore"),
        ("hdfs://namenode/streams", {}, "io.delta.storage.HDFSLogStore"),
        ("/tmp/streams", {}, "io.delta.storage.HDFSLogStore"),
    ],
)
def test_log_stores_with_an_atomic_put_if_absent_open_in_multi_writer_mode_silently(
    path: str, conf: dict[str, str], log_store: str
) -> None:
    safety = check_writer_safety(path, conf)
    assert (safety.log_store, safety.mode, safety.warnings) == (log_store, MULTI_WRITER, ())
    # A single-writer promise on a safe store changes nothing: the store is safe anyway.
    assert check_writer_safety(path, conf, single_writer=True).mode == MULTI_WRITER


def test_a_single_driver_log_store_chosen_for_a_safe_scheme_is_refused_and_the_setting_named() -> None:
    conf = {"spark.delta.logStore.gs.impl": "io.delta.storage.S3SingleDriverLogStore"}
    with pytest.raises(UnsafeObjectStoreError) as refused:
        check_writer_safety("gs://bucket/streams", conf)
    assert "Remove the log-store setting that chose io.delta.storage.S3SingleDriverLogStore for gs://" in str(
        refused.value
    )


def test_an_unknown_scheme_opens_with_a_warning_that_names_what_is_assumed() -> None:
    safety = check_writer_safety("oss://bucket/streams", {})
    assert (safety.scheme, safety.mode) == ("oss", MULTI_WRITER)
    assert safety.warnings == (
        "path=oss://bucket/streams: the oss:// file system is not one streamclaim-spark knows; Delta uses "
        "io.delta.storage.HDFSLogStore for it, which is safe with several writing drivers only if the file system's "
        "rename is atomic and never overwrites (as on HDFS). If it is an object store without that, set a log store "
        "with put-if-absent (docs/DEPLOY.md) or open the store with single_writer=True and run one writer.",
    )


def test_a_log_store_class_of_the_users_own_is_trusted_with_a_warning() -> None:
    conf = {"spark.delta.logStore.s3a.impl": "com.example.ConditionalPutLogStore"}
    safety = check_writer_safety("s3a://bucket/streams", conf)
    assert (safety.log_store, safety.mode) == ("com.example.ConditionalPutLogStore", MULTI_WRITER)
    assert safety.warnings == (
        "path=s3a://bucket/streams: log store com.example.ConditionalPutLogStore (from the Spark settings) is not one "
        "streamclaim-spark knows; it is assumed to make each commit a put-if-absent that is atomic across drivers.",
    )


def test_hdfs_log_store_set_for_s3_is_refused_even_for_a_single_writer_since_s3_renames_by_copying() -> None:
    conf = {"spark.delta.logStore.class": "io.delta.storage.HDFSLogStore"}
    for single_writer in (False, True):
        with pytest.raises(UnsafeObjectStoreError) as refused:
            check_writer_safety("s3a://b/s", conf, single_writer=single_writer)
        assert str(refused.value) == (
            "path=s3a://b/s: the Spark settings make Delta commit to s3a:// through io.delta.storage.HDFSLogStore, "
            "which is made for file/hdfs/viewfs and does not keep one winner per commit on s3a://. Remove the setting "
            "that chose it (spark.delta.logStore.s3a.impl or spark.delta.logStore.class) so Delta uses its default "
            "for s3a:// (docs/DEPLOY.md)."
        )

"""The store's own local-disk commit classes (state/local_commits.py): what they write, that a version has
one winner, and that a commit starts no process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore
from streamclaim_spark.core.constants import STATE_TABLE_DIR
from streamclaim_spark.state.delta_io import latest_version
from streamclaim_spark.state.local_commits import (
    CHECKPOINT_FILE_MANAGER,
    CHECKPOINT_FILE_MANAGER_KEY,
    LOG_STORE,
    LOG_STORE_KEY,
    jar_path,
)
from streamclaim_spark.state.tables import table_path
from tests.setup_built import setup_built

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def jvm(spark: SparkSession) -> Any:
    """The session's JVM, which setup's jar of the classes is loaded into."""
    setup_built(jar_path(), "jar of the local commit classes")
    assert spark.sparkContext._jvm is not None
    return spark.sparkContext._jvm


def _hadoop_conf(spark: SparkSession) -> Any:
    return spark._jsparkSession.sessionState().newHadoopConf()


def _lines(jvm: Any, *lines: str) -> Any:
    listed = jvm.java.util.ArrayList()
    for line in lines:
        listed.add(line)
    return listed.iterator()


def _hadoop_read(jvm: Any, spark: SparkSession, path: Path) -> str:
    """The file's text as Hadoop's local file system reads it (checking a checksum file beside it)."""
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    stream = hadoop_path.getFileSystem(_hadoop_conf(spark)).open(hadoop_path)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def test_a_session_commits_to_a_local_folder_through_the_classes_and_leaves_no_hadoop_checksum_files(
    spark: SparkSession, jvm: Any, store: StreamStore
) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get(LOG_STORE_KEY) == LOG_STORE
    assert conf.get(CHECKPOINT_FILE_MANAGER_KEY) == CHECKPOINT_FILE_MANAGER
    store.execute("XADD", "s", "1-1", "f", "v")
    log = Path(table_path(store.path, STATE_TABLE_DIR)) / "_delta_log"
    version = f"{latest_version(spark, table_path(store.path, STATE_TABLE_DIR)):020d}"
    written = sorted(path.name for path in log.iterdir() if version in path.name)
    assert written == [f"{version}.crc", f"{version}.json"]  # no .N.json.crc, .N.crc.crc or temporary file
    assert '"operation":"WRITE"' in (log / f"{version}.json").read_text(encoding="utf-8")


def test_the_log_store_refuses_a_version_already_taken_and_leaves_the_winner_s_file(
    spark: SparkSession, jvm: Any, tmp_path: Path
) -> None:
    store = jvm.io.streamclaim.spark.LocalLinkLogStore(_hadoop_conf(spark))
    conf = _hadoop_conf(spark)
    version = jvm.org.apache.hadoop.fs.Path((tmp_path / "00000000000000000000.json").as_uri())
    store.write(version, _lines(jvm, '{"a":1}', '{"b":2}'), False, conf)
    with pytest.raises(Py4JJavaError) as refused:
        store.write(version, _lines(jvm, '{"c":3}'), False, conf)
    assert refused.value.java_exception.getClass().getName() == "java.nio.file.FileAlreadyExistsException"
    assert (tmp_path / "00000000000000000000.json").read_text(encoding="utf-8") == '{"a":1}\n{"b":2}\n'
    assert sorted(path.name for path in tmp_path.iterdir()) == ["00000000000000000000.json"]
    with pytest.raises(Py4JJavaError) as missing:
        store.write(jvm.org.apache.hadoop.fs.Path((tmp_path / "gone" / "0.json").as_uri()), _lines(jvm), False, conf)
    assert missing.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"


def test_an_overwrite_replaces_the_file_and_the_checksum_hadoop_kept_beside_it(
    spark: SparkSession, jvm: Any, tmp_path: Path
) -> None:
    last = tmp_path / "_last_checkpoint"
    hadoop_path = jvm.org.apache.hadoop.fs.Path(last.as_uri())
    written = hadoop_path.getFileSystem(_hadoop_conf(spark)).create(hadoop_path, True)
    written.write(b'{"version":10}\n')
    written.close()
    assert (tmp_path / "._last_checkpoint.crc").is_file()  # Hadoop's checksum of the old bytes

    store = jvm.io.streamclaim.spark.LocalLinkLogStore(_hadoop_conf(spark))
    store.write(hadoop_path, _lines(jvm, '{"version":20}'), True, _hadoop_conf(spark))
    assert not (tmp_path / "._last_checkpoint.crc").exists()
    assert _hadoop_read(jvm, spark, last) == '{"version":20}\n'  # no checksum error on the new bytes


def test_two_threads_committing_the_same_versions_get_one_winner_each(
    spark: SparkSession, jvm: Any, tmp_path: Path
) -> None:
    versions = 12
    won: dict[str, list[int]] = {"a": [], "b": []}
    lost: dict[str, list[int]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def commit(writer: str) -> None:
        store = jvm.io.streamclaim.spark.LocalLinkLogStore(_hadoop_conf(spark))
        conf = _hadoop_conf(spark)
        start.wait()
        for version in range(versions):
            path = jvm.org.apache.hadoop.fs.Path((tmp_path / f"{version:020d}.json").as_uri())
            try:
                store.write(path, _lines(jvm, f'{{"writer":"{writer}"}}'), False, conf)
                won[writer].append(version)
            except Py4JJavaError as error:
                assert error.java_exception.getClass().getName() == "java.nio.file.FileAlreadyExistsException"
                lost[writer].append(version)

    threads = [threading.Thread(target=commit, args=(writer,)) for writer in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won["a"] + won["b"]) == list(range(versions))
    assert sorted(lost["a"] + lost["b"]) == list(range(versions))
    for version in range(versions):
        winner = "a" if version in won["a"] else "b"
        text = (tmp_path / f"{version:020d}.json").read_text(encoding="utf-8")
        assert text == f'{{"writer":"{winner}"}}\n'
    assert len(list(tmp_path.iterdir())) == versions  # no temporary file left by a loser


def test_the_checkpoint_file_manager_writes_atomically_and_refuses_an_existing_name_without_overwrite(
    spark: SparkSession, jvm: Any, tmp_path: Path
) -> None:
    manager_class = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager = manager_class.create(jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()), _hadoop_conf(spark))
    assert manager.getClass().getName() == CHECKPOINT_FILE_MANAGER
    target = jvm.org.apache.hadoop.fs.Path((tmp_path / "7.crc").as_uri())

    def write(text: bytes, overwrite: bool) -> None:
        stream = manager.createAtomic(target, overwrite)
        stream.write(text)
        stream.close()

    write(b"first", False)
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        write(b"second", False)
    assert (tmp_path / "7.crc").read_bytes() == b"first"
    write(b"third", True)
    assert (tmp_path / "7.crc").read_bytes() == b"third"
    cancelled = manager.createAtomic(jvm.org.apache.hadoop.fs.Path((tmp_path / "8.crc").as_uri()), False)
    cancelled.write(b"never")
    cancelled.cancel()
    # The refused write's temporary file stays, as Spark's FileSystemBasedCheckpointFileManager leaves it.
    assert not [path.name for path in tmp_path.iterdir() if "8.crc" in path.name]


def test_a_local_commit_starts_no_process(spark: SparkSession, jvm: Any, store: StreamStore, tmp_path: Path) -> None:
    store.execute("XADD", "s", "1-1", "f", "v")  # the store's tables exist and are read once
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        store.execute("XADD", "s", "2-1", "f", "v")
        store.execute("XGROUP", "CREATE", "s", "g", "0")
        store.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
        store.execute("XACK", "s", "g", "1-1")
    finally:
        recording.stop()
    dump = tmp_path / "commits.jfr"
    recording.dump(jvm.java.io.File(str(dump)).toPath())
    recording.close()
    events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(jvm.java.io.File(str(dump)).toPath())
    started = [str(event.getString("command")) for event in events]
    assert started == []


def _listed(files: Any) -> list[tuple[str, int, bool, int]]:
    listed = []
    while files.hasNext():
        status = files.next()
        listed.append((str(status.getPath()), status.getLen(), status.isDirectory(), status.getModificationTime()))
    return listed


def test_the_log_store_lists_from_a_name_what_hadoop_s_listing_answers(
    spark: SparkSession, jvm: Any, store: StreamStore
) -> None:
    for sequence in range(3):
        store.execute("XADD", "s", f"9-{sequence + 1}", "f", "v")
    log = Path(table_path(store.path, STATE_TABLE_DIR)) / "_delta_log"
    version = latest_version(spark, table_path(store.path, STATE_TABLE_DIR))
    (log / f".{version:020d}.json.crc").write_bytes(b"hadoop's checksum")  # Hadoop leaves those out
    (log / "_sidecars").mkdir(exist_ok=True)
    conf = _hadoop_conf(spark)
    ours = jvm.io.streamclaim.spark.LocalLinkLogStore(conf)
    hadoops = jvm.io.delta.storage.HDFSLogStore(conf)
    for start in (f"{version - 2:020d}", f"{version:020d}", "0", f"{version + 1:020d}"):
        prefix = jvm.org.apache.hadoop.fs.Path((log / start).as_uri())
        expected = _listed(hadoops.listFrom(prefix, conf))
        assert _listed(ours.listFrom(prefix, conf)) == expected
    after_the_last = [name.rsplit("/", 1)[1] for name, *_ in expected]
    assert "_sidecars" in after_the_last and all(name.startswith("_") for name in after_the_last)  # folders only
    missing = jvm.org.apache.hadoop.fs.Path((log.parent / "gone" / "0").as_uri())
    with pytest.raises(Py4JJavaError) as refused:
        ours.listFrom(missing, conf)
    assert refused.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"

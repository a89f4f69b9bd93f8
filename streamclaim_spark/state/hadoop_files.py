"""Data files moved between the driver's disk and the table's own file system, through Hadoop.

The driver reads and writes data files with pyarrow on its local disk. A table on another file system
(``s3a://``, ``abfss://``, ``gs://``, ``hdfs://``) gets them through the Hadoop ``FileSystem`` its path
names, with the session's Hadoop configuration: the credentials and settings Spark's own reads and
writes of that table use, so a user keeps one set. Bytes stream inside the JVM (``FileUtil.copy``);
only paths cross py4j. A local table needs none of this: its files are read and written in place.
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any

from pyspark.sql import SparkSession

from streamclaim_spark.state import file_cache

# Each session's Hadoop configuration and the driver's raw local file system (no checksum files beside
# the copies): built once, since each costs a py4j round trip and settings are fixed when Spark starts.
_HADOOP: weakref.WeakKeyDictionary[SparkSession, tuple[Any, Any]] = weakref.WeakKeyDictionary()


def is_local(jvm: Any, path: str) -> bool:
    """True when ``path`` (a qualified data file or folder location) lies on the driver's own disk."""
    return _parsed(jvm, path)[0] in (None, "file")


def scheme_of(jvm: Any, path: str) -> str | None:
    """The file system scheme of ``path`` (``s3a``, ``file``), None for a path without one."""
    return _parsed(jvm, path)[0]


def local_path(jvm: Any, path: str) -> str:
    """The driver's own path of a local ``path`` (``file:/x`` or ``/x``)."""
    return _parsed(jvm, path)[1]


# Locations as Hadoop parses them (scheme, path), by the text given: Hadoop's Path is the authority on
# what a location names, and asking it costs four py4j calls, for the same few table roots and data
# files command after command. Bounded: the least recently asked go first.
@functools.lru_cache(maxsize=4096)
def _parsed(jvm: Any, path: str) -> tuple[str | None, str]:
    uri = jvm.org.apache.hadoop.fs.Path(path).toUri()
    scheme = uri.getScheme()
    return (None if scheme is None else str(scheme), str(uri.getPath()))


def download(spark: SparkSession, path: str, local: str, size: int | None = None) -> None:
    """Copies the file at ``path`` (any Hadoop file system) to the driver's file ``local``. ``size``, the
    file's length as the log records it, spares an object store the request that would look it up. A
    small file this process wrote or read before is copied from the driver's own copy (state/file_cache.py)."""
    if file_cache.take(path, local):
        return
    jvm, conf, local_fs = _hadoop(spark)
    source = jvm.org.apache.hadoop.fs.Path(path)
    opening = source.getFileSystem(conf).openFile(source).opt(_READ_POLICY, "whole-file")
    if size is not None:
        opening = opening.opt(_LENGTH, str(size))
    reading = opening.build().get()
    writing = local_fs.create(jvm.org.apache.hadoop.fs.Path(f"file://{local}"), True)
    jvm.org.apache.hadoop.io.IOUtils.copyBytes(reading, writing, conf, True)  # closes both
    file_cache.keep(path, local)


def upload(spark: SparkSession, local: str, path: str) -> None:
    """Moves the driver's file ``local`` to ``path`` (any Hadoop file system), a path no file has yet;
    ``local`` is deleted once copied. The file is whole at ``path`` when this returns (an object store
    publishes it when the stream closes)."""
    jvm, conf, local_fs = _hadoop(spark)
    source = jvm.org.apache.hadoop.fs.Path(f"file://{local}")
    target = jvm.org.apache.hadoop.fs.Path(path)
    # Written through the target's own output stream, as Spark's writers write: S3A's copyFromLocalFile
    # takes a transfer-manager path instead (which moto answers with status 100). Its path is new (a
    # fresh UUID), so an object store need not probe for a file or folder there first.
    creating = target.getFileSystem(conf).createFile(target).overwrite(True).recursive()
    writing = creating.opt(_CREATE_PERFORMANCE, "true").build()
    jvm.org.apache.hadoop.io.IOUtils.copyBytes(local_fs.open(source), writing, conf, True)  # closes both
    file_cache.keep(path, local)
    os.remove(local)


# Hadoop's standard open options (FileSystem.openFile): the length known, and the whole file read once.
_LENGTH = "fs.option.openfile.length"
_READ_POLICY = "fs.option.openfile.read.policy"
# S3A skips the requests that check for a file or folder at a path it creates; other file systems
# ignore an option they do not know (``opt``, unlike ``must``).
_CREATE_PERFORMANCE = "fs.s3a.create.performance"


def _hadoop(spark: SparkSession) -> tuple[Any, Any, Any]:
    jvm = spark._jvm
    assert jvm is not None, "files move through Hadoop on a classic session only"
    if spark not in _HADOOP:
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        _HADOOP[spark] = (conf, jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getRawFileSystem())
    conf, local_fs = _HADOOP[spark]
    return jvm, conf, local_fs

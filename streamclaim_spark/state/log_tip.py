"""Whether a table's Delta log moved past the snapshot this process holds, told without listing the log.

Delta finds new commits by listing the log (``DeltaLog.update``). On a local disk or HDFS that lists and
sorts the whole ``_delta_log`` folder (``HDFSLogStore.listFrom``), and a store keeps every commit until
maintenance trims the log past its history retention (days), so a live store's every command listed
more files than the one before: a server's soak writes ~1,500 log files a minute. A commit is the
put-if-absent of the next version's file, so while that file is absent no later version exists: one
status of it answers what the listing did. The version's own file must still be the one first seen for
the snapshot (its length and modification time), so a table deleted and written anew at the same path
is not taken for it. On object stores a status is one to two requests and a LIST page holds 1,000 names,
so Delta's listing stays there (docs/DEPLOY.md, "Requests per commit").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError

from streamclaim_spark.state.hadoop_files import scheme_of
from streamclaim_spark.state.jvm_classes import java_class

# File systems whose status is one call to a local disk or a name node, and whose listing is of everything.
PROBED_SCHEMES = (None, "file", "hdfs", "viewfs")
# Versions probed between two listings: the snapshot a commit leaves holds its segment's commits plus its
# own, and only a listing moves it onto the newest checkpoint, which Delta's reads of the table's state
# start from (the table's checkpoint interval, as Delta's new stores here have it).
LIST_EVERY_VERSIONS = 100


@dataclass(frozen=True)
class _Tip:
    """A snapshot of the log this process loaded, and its version's commit file as first seen."""

    snapshot: Any
    version: int
    commit: tuple[int, int]  # length, modification time


def still_newest(spark: Any, table_path: str, log: Any) -> Any | None:
    """``log``'s loaded snapshot when no commit followed it and its commit file is unchanged; None where
    the log must be listed (a next commit's file exists, an object store, a table not yet committed)."""
    jvm = spark._jvm
    if scheme_of(jvm, table_path) not in PROBED_SCHEMES:
        return None
    snapshot = log.unsafeVolatileSnapshot()
    key = (id(jvm._gateway_client), table_path)  # a new gateway (a session after a stop) starts over
    tip = _TIPS.get(key)
    fs = _file_system(spark, key, log)
    log_dir = f"{table_path.rstrip('/')}/_delta_log"
    if tip is None or not tip.snapshot.equals(snapshot):
        version = int(snapshot.version())
        commit = _commit_of(jvm, fs, log_dir, version) if version >= 0 else None
        if commit is None:
            return None
        with _LOCK:
            tip = _TIPS[key] = _Tip(snapshot, version, commit)
            if len(_TIPS) > TIPS_TABLES:
                _TIPS.pop(next(iter(_TIPS)), None)
    elif _commit_of(jvm, fs, log_dir, tip.version) != tip.commit:
        return None
    if tip.version - _LISTED.get(key, tip.version) >= LIST_EVERY_VERSIONS:
        return None
    if fs.exists(java_class(jvm, "org.apache.hadoop.fs.Path")(f"{log_dir}/{tip.version + 1:020d}.json")):
        return None
    return snapshot


def listed(spark: Any, table_path: str, version: int) -> None:
    """Records that Delta listed the table's log at ``version`` (``still_newest`` lists again
    ``LIST_EVERY_VERSIONS`` later)."""
    with _LOCK:
        _LISTED[(id(spark._jvm._gateway_client), table_path)] = version
        if len(_LISTED) > TIPS_TABLES:
            _LISTED.pop(next(iter(_LISTED)), None)


def _commit_of(jvm: Any, fs: Any, log_dir: str, version: int) -> tuple[int, int] | None:
    """The length and modification time of the commit file of ``version``; None when it is absent."""
    try:
        status = fs.getFileStatus(java_class(jvm, "org.apache.hadoop.fs.Path")(f"{log_dir}/{version:020d}.json"))
    except Py4JJavaError:
        return None  # FileNotFoundException: a checkpoint's version cleaned up, a table gone
    return int(status.getLen()), int(status.getModificationTime())


def _file_system(spark: Any, key: tuple[int, str], log: Any) -> Any:
    """The log's Hadoop file system, made once per table (Delta's Hadoop conf is a copy of the session's)."""
    with _LOCK:
        fs = _FILE_SYSTEMS.get(key)
    if fs is None:
        log_path = java_class(spark._jvm, "org.apache.hadoop.fs.Path")(f"{key[1].rstrip('/')}/_delta_log")
        fs = log_path.getFileSystem(log.newDeltaHadoopConf())
        with _LOCK:
            _FILE_SYSTEMS[key] = fs
            if len(_FILE_SYSTEMS) > TIPS_TABLES:
                _FILE_SYSTEMS.pop(next(iter(_FILE_SYSTEMS)), None)
    return fs


# By (gateway client, table path), the least recently added dropped first.
_TIPS: dict[tuple[int, str], _Tip] = {}
_FILE_SYSTEMS: dict[tuple[int, str], Any] = {}
_LISTED: dict[tuple[int, str], int] = {}
_LOCK = threading.Lock()
TIPS_TABLES = 64

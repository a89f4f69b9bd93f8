"""The table's data files at a version, kept on the driver and brought forward from the log's commits.

Delta lists a snapshot's files by a Spark query over its log state, which it rebuilds for each new
version: the first listing after any commit took 0.5-1.1 s (the log's JSON commits read, shuffled and
cached), the next ones ~0.2 s each (CHANGELOG.md, "Files listed on the driver"). A commit of
files lists files twice (its heads' bucket, then the rows it rewrites) and a bulk XACK reads its heads'
files first. Here each table's files are kept per version on the driver: read once from the log's
commits (a young log, before its first checkpoint) or from Delta's state, then brought to a newer
version by reading only the commits since (a few ms each), and tested against a ``FileQuery`` by
their statistics in Python, without a Spark job.

A kept version is used only while the log still shows the commit file it was read at (its name, length
and modification time, as Delta's own snapshot cache compares log segments): a table written anew at
the same path starts over. Where that cannot be checked (the version lies before the newest
checkpoint), or a commit cannot be read (log cleanup), the files come from Delta's state again. Classic
sessions only; memory: one small record per data file (its log entry, statistics included), for the
last ``KEPT_VERSIONS`` versions of the ``KEPT_TABLES`` tables this process used last.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from streamclaim_spark.core import constants as C
from streamclaim_spark.core.file_bounds import FileBounds
from streamclaim_spark.state.delta_io import is_connect

# Versions kept per table: a transaction that started before another thread's commit still finds its own.
KEPT_VERSIONS = 4
# Tables kept, the least recently used dropped first (a process touching more lists them from Delta again).
KEPT_TABLES = 64
# Commits read to bring kept files forward; further behind, Delta's state is read instead.
FORWARD_COMMITS_MAX = 200


@dataclass
class LoggedFile:
    """One data file as its log entry adds it: ``action`` is the entry's JSON (``{"add": {...}}``)."""

    path: str
    bucket: str
    size: int
    bounds: FileBounds | None
    action: str
    deletion_vector: bool = False  # rows of it are hidden: only Delta's read shows the rest
    _add_file: Any = field(default=None, repr=False, compare=False)

    def add_file(self, jvm: Any) -> Any:
        """Delta's ``AddFile`` for this file (made once, from its log entry)."""
        if self._add_file is None:
            self._add_file = jvm.org.apache.spark.sql.delta.actions.Action.fromJson(self.action)
        return self._add_file

    @classmethod
    def from_add(cls, add: dict[str, Any], action: str) -> LoggedFile:
        path = str(add["path"])
        return cls(
            path=path,
            bucket=str((add.get("partitionValues") or {}).get(C.BUCKET)),
            size=int(add.get("size") or 0),
            bounds=FileBounds.from_stats(path, add.get("stats")),
            action=action,
            deletion_vector=bool(add.get("deletionVector")),
        )


@dataclass(frozen=True)
class _Version:
    """A table's files at ``version``, read at the commit file ``commit`` (name, length, modification
    time; None when it was not in the log segment, so that it cannot be checked later). ``own``: this
    process made that commit (``keep_committed``), so any commit file of that version is its own."""

    version: int
    commit: tuple[str, int, int] | None
    files: dict[str, LoggedFile]
    own: bool = False

    def shown_in(self, segment: _Segment) -> bool:
        """True when ``segment`` holds the commit these files were read at."""
        if self.own:
            return segment.status(self.version) is not None
        return segment.shows(self.version, self.commit)


# The files before a table's first commit: none. Brought forward through every commit of a log that has
# no checkpoint yet, without Delta's state: a process's first listing took 0.39-0.45 s from the state
# (a job over it, after its reconstruction), a few ms from a young log's commits.
_BEFORE_CREATION = _Version(-1, None, {})

_KEPT: dict[tuple[str, str], list[_Version]] = {}
_LOCK = threading.Lock()


def files_at(spark: SparkSession, table_path: str, snapshot: Any) -> list[LoggedFile] | None:
    """Every data file of the table at ``table_path`` in ``snapshot`` (Delta's JVM ``Snapshot``): the
    kept files of its version, or of an older one brought forward, or Delta's state read once. None on
    Spark Connect or before the table's first commit."""
    if is_connect(spark):
        return None
    version = int(snapshot.version())
    if version < 0:
        return None
    key = (table_path, str(snapshot.metadata().id()))
    segment = _Segment(snapshot)
    with _LOCK:
        candidates = [kept for kept in _KEPT.get(key, []) if kept.version <= version]
    base = next((kept for kept in reversed(candidates) if kept.shown_in(segment)), None)
    if base is not None and base.version == version:
        with _LOCK:
            if key in _KEPT:
                _KEPT[key] = _KEPT.pop(key)  # used last: dropped last
        return list(base.files.values())
    current = _forward(base, segment, version) if base is not None else None
    if current is None and segment.starts_at_creation():  # no checkpoint yet: every commit is in the log
        current = _forward(_BEFORE_CREATION, segment, version)
    if current is None:
        current = _from_state(spark._jvm, snapshot, segment.commit(version))
    _keep(key, current)
    return list(current.files.values())


def keep_committed(
    table_path: str, snapshot: Any, version: int, added: Sequence[LoggedFile], removed: Sequence[LoggedFile]
) -> bool:
    """Keeps the files at ``version``, the commit this process just made on top of ``snapshot`` (its
    transaction's), from the files kept at the snapshot's version and what the commit ``added`` (as
    written) and ``removed``: the next listing reads no commit back from the log (on S3 a HEAD and a
    GET, ~40 ms on moto). False, keeping nothing, where the log entry may differ from what was written:
    tables whose protocol has Delta fill in fields of an ``AddFile`` at commit (row tracking, clustering),
    or no kept files at the snapshot's version."""
    features = str(snapshot.protocol().writerFeatureNames())
    if any(feature in features for feature in _FILLED_AT_COMMIT):
        return False
    key = (table_path, str(snapshot.metadata().id()))
    with _LOCK:
        base = next((kept for kept in _KEPT.get(key, []) if kept.version == int(snapshot.version())), None)
    if base is None or version != base.version + 1:
        return False
    files = dict(base.files)
    for file in removed:
        files.pop(_file_key(json.loads(file.action)["add"]), None)
    for file in added:
        files[_file_key(json.loads(file.action)["add"])] = file
    _keep(key, _Version(version, None, files, own=True))
    return True


# Writer features under which Delta's commit adds to the AddFiles it is given (row IDs, clustering).
_FILLED_AT_COMMIT = ("rowTracking", "clustering")


def _keep(key: tuple[str, str], current: _Version) -> None:
    with _LOCK:
        versions = {kept.version: kept for kept in _KEPT.pop(key, [])}
        versions[current.version] = current
        _KEPT[key] = [versions[number] for number in sorted(versions)][-KEPT_VERSIONS:]
        while len(_KEPT) > KEPT_TABLES:
            del _KEPT[next(iter(_KEPT))]


class _Segment:
    """The commit files of a snapshot's log segment (those after its checkpoint), by version."""

    def __init__(self, snapshot: Any) -> None:
        segment = snapshot.logSegment()
        self._version = int(segment.version())
        self._deltas = segment.deltas()
        self._count = int(self._deltas.size())
        self._log = snapshot.deltaLog()

    def status(self, version: int) -> Any | None:
        """The commit file of ``version`` (a Hadoop ``FileStatus``), or None when the segment has none."""
        index = self._count - 1 - (self._version - version)
        if not 0 <= index < self._count:
            return None
        status = self._deltas.apply(index)
        return status if status.getPath().getName() == f"{version:020d}.json" else None

    def commit(self, version: int) -> tuple[str, int, int] | None:
        status = self.status(version)
        if status is None:
            return None
        return str(status.getPath().getName()), int(status.getLen()), int(status.getModificationTime())

    def starts_at_creation(self) -> bool:
        """True when the segment holds every commit since the table's creation (no checkpoint)."""
        return self.status(0) is not None

    def shows(self, version: int, commit: tuple[str, int, int] | None) -> bool:
        """True when ``commit`` is this segment's commit file of ``version``."""
        return commit is not None and self.commit(version) == commit

    def actions(self, version: int) -> list[str] | None:
        """The JSON lines of the commit of ``version``; None when it cannot be read."""
        status = self.status(version)
        if status is None:
            return None
        try:
            text = self._log.store().read(status.getPath(), self._log.newDeltaHadoopConf()).mkString("\n")
        except Py4JError:
            return None
        return [line for line in str(text).split("\n") if line.strip()]


def _forward(base: _Version, segment: _Segment, version: int) -> _Version | None:
    """``base`` brought to ``version`` by the commits between, read from the log; None when one is
    missing or there are too many."""
    if version - base.version > FORWARD_COMMITS_MAX:
        return None
    files = dict(base.files)
    for number in range(base.version + 1, version + 1):
        lines = segment.actions(number)
        if lines is None:
            return None
        for line in lines:
            action = json.loads(line)
            if "add" in action:
                added = LoggedFile.from_add(action["add"], line)
                files[_file_key(action["add"])] = added
            elif "remove" in action:
                files.pop(_file_key(action["remove"]), None)
    return _Version(version, segment.commit(version), files)


def _from_state(jvm: Any, snapshot: Any, commit: tuple[str, int, int] | None) -> _Version:
    """Every file of ``snapshot`` from Delta's state: one Spark query, its rows fetched as one string."""
    rows = snapshot.allFiles().toJSON().collectAsList()
    text = str(jvm.java.lang.String.join("\n", rows))
    files: dict[str, LoggedFile] = {}
    for line in text.split("\n") if text else []:
        add = json.loads(line)
        files[_file_key(add)] = LoggedFile.from_add(add, '{"add":' + line + "}")
    return _Version(int(snapshot.version()), commit, files)


def _file_key(action: dict[str, Any]) -> str:
    """An add or remove action's file, as Delta's log replay keys it: its path and deletion vector."""
    vector = action.get("deletionVector")
    if not vector:
        return str(action["path"])
    offset = vector.get("offset")
    suffix = "" if offset is None else f"@{offset}"
    return f"{action['path']}#{vector.get('storageType')}{vector.get('pathOrInlineDv')}{suffix}"

"""The store's own classes for committing to a local disk: built once per installation, used when present.

Hadoop's local file system, without the native library pyspark does not ship, starts a process for every
permission it sets (``chmod``) and every link it looks up (``readlink``). A Delta commit to ``file://``
started 24 of them (JFR's ProcessStart events: 16 ``readlink`` and 4 ``chmod`` for ``N.json`` through
Delta's ``HDFSLogStore``, 4 ``chmod`` for the ``N.crc`` checksum file), most of its time. Two classes in
``state/java/`` write the same files with Java's own file calls, starting none:

- ``LocalLinkLogStore``, Delta's log store for ``file://``: ``N.json`` put in place by a hard link, which
  refuses a version already taken, also between processes (HDFSLogStore checks, then renames);
- ``LocalCheckpointFileManager``, Spark's checkpoint file manager (Delta's checksum files, Structured
  Streaming's offsets and commits): ``FileSystemBasedCheckpointFileManager`` with local files created and
  put in place the same way.

``streamclaim-local-commits-jar`` (scripts/setup.sh runs it) compiles them into the installation's jar; a
session ``build_session`` starts then loads it (``spark.jars``) and names both classes, unless its settings
already choose a log store for ``file://`` or a checkpoint file manager of their own. Without the jar
(no JDK at setup, a session started elsewhere) Delta's defaults commit as before.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pyspark

from streamclaim_spark.core.object_store import DELTA_PACKAGE, LOCAL_LINK_LOG_STORE
from streamclaim_spark.state.java_build import source_key

JAR_ENV = "STREAMCLAIM_LOCAL_COMMITS_JAR"
# Beside the installation whose Spark and Delta it was compiled against, as the JVM class archive is.
DEFAULT_JAR = Path(sys.prefix) / "share" / "streamclaim-spark" / "local-commits.jar"
SOURCES = Path(__file__).resolve().parent / "java"
RELEASE = "17"

LOG_STORE = LOCAL_LINK_LOG_STORE
CHECKPOINT_FILE_MANAGER = "io.streamclaim.spark.LocalCheckpointFileManager"
LOG_STORE_KEY = "spark.delta.logStore.file.impl"
CHECKPOINT_FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
# What DEFAULT_CONF names and LocalCheckpointFileManager extends: replaced, a user's other choice is kept.
FILE_SYSTEM_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
# Keys by which a session's settings choose Delta's log store for file:// themselves.
_LOG_STORE_CHOICES = ("spark.delta.logStore.class", "delta.logStore.class", LOG_STORE_KEY, LOG_STORE_KEY[6:])


def jar_path() -> Path | None:
    """The jar this installation uses: ``$STREAMCLAIM_LOCAL_COMMITS_JAR`` (empty: none) or DEFAULT_JAR."""
    named = os.environ.get(JAR_ENV)
    if named is None:
        return DEFAULT_JAR
    return Path(named) if named else None


def delta_storage_package() -> str:
    """The Maven package the classes extend (Delta's log stores): the session's Delta version."""
    return f"io.delta:delta-storage:{DELTA_PACKAGE.rsplit(':', 1)[1]}"


def jar_key() -> str:
    """What the jar is built from: the sources, the compiler, the release, Delta's and pyspark's versions."""
    return source_key(
        SOURCES,
        SOURCES.rglob("*.java"),
        release=RELEASE,
        packages=[delta_storage_package(), f"pyspark {pyspark.__version__}"],
    )


def key_path(jar: Path) -> Path:
    """The file beside ``jar`` that holds the key it was built from."""
    return jar.with_name(jar.name + ".key")


def is_current(jar: Path) -> bool:
    """True when ``jar`` exists and was built from what ``jar_key`` names now."""
    key = key_path(jar)
    return jar.is_file() and key.is_file() and key.read_text(encoding="utf-8") == jar_key()


def with_local_commits(settings: Mapping[str, str], jar: Path | None) -> dict[str, str]:
    """``settings`` with the jar loaded and its classes named, where they choose neither themselves;
    unchanged without a jar file."""
    chosen = dict(settings)
    if jar is None or not jar.is_file():
        return chosen
    named = False
    if not any(key in settings for key in _LOG_STORE_CHOICES):
        chosen[LOG_STORE_KEY] = LOG_STORE
        named = True
    if settings.get(CHECKPOINT_FILE_MANAGER_KEY, FILE_SYSTEM_CHECKPOINT_FILE_MANAGER) == (
        FILE_SYSTEM_CHECKPOINT_FILE_MANAGER
    ):
        chosen[CHECKPOINT_FILE_MANAGER_KEY] = CHECKPOINT_FILE_MANAGER
        named = True
    if named:
        jars = [entry for entry in settings.get("spark.jars", "").split(",") if entry]
        chosen["spark.jars"] = ",".join([*jars, str(jar)])
    return chosen

"""The JVM class-data archive that lets a new process start Spark and Delta sooner.

A Spark process spends its first seconds loading, parsing and verifying the same tens of thousands of
classes (Spark, Scala, Delta); a dynamic class-data-sharing archive (JDK 13+) holds them ready to map.
``streamclaim-jvm-archive`` builds one for this installation (scripts/setup.sh runs it) and a session this
process starts uses it when it exists: the scheduled recovery job's cold start ~4 s shorter
(CHANGELOG.md, "A cold process: the JVM's classes from an archive"). The JVM checks that the archive
matches its own build and the jars on its class path, and ignores it quietly when they changed (after an
upgrade: build it again); an archive that does not exist is not named at all, since naming a missing one
would turn off the JVM's own base archive too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ARCHIVE_ENV = "STREAMCLAIM_JVM_ARCHIVE"
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
# Where setup.sh puts it: beside the installation whose jars it holds, so a new .venv never reads an old one.
DEFAULT_ARCHIVE = Path(sys.prefix) / "share" / "streamclaim-spark" / "jvm-classes.jsa"
# The JVM reports an archive it cannot use as a warning on stdout, where console scripts print their JSON.
QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"


def archive_path() -> Path | None:
    """The archive this installation uses: ``$STREAMCLAIM_JVM_ARCHIVE`` (empty: none) or DEFAULT_ARCHIVE."""
    named = os.environ.get(ARCHIVE_ENV)
    if named is None:
        return DEFAULT_ARCHIVE
    return Path(named) if named else None


def with_archive(java_options: str | None, archive: Path | None) -> str | None:
    """The driver's Java options with ``archive`` mapped; None when nothing should change: no archive
    file, or options that already choose how the JVM shares classes (theirs win)."""
    if archive is None or not archive.is_file():
        return None
    options = java_options or ""
    if "SharedArchiveFile" in options or "-Xshare" in options or "ArchiveClassesAtExit" in options:
        return None
    return f"{options} -XX:SharedArchiveFile={archive} {QUIET_CDS}".strip()

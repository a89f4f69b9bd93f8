"""``streamclaim-local-commits-jar``: builds the jar of the store's local-disk commit classes (state/local_commits.py).

Compiles ``streamclaim_spark/state/java/`` with the JDK beside Spark's Java against Delta's
``delta-storage`` (resolved by Spark's Ivy, as the session resolves Delta) and pyspark's jars, into the
installation's jar (``$STREAMCLAIM_LOCAL_COMMITS_JAR`` or the venv's ``share/streamclaim-spark/``).
``--if-stale`` (what scripts/setup.sh passes) builds only when the sources, the JDK or the versions changed
since the jar was built (its ``.key`` file). Without a JDK it warns and builds nothing (sessions then commit
through Delta's defaults), except in CI (``CI=true``), where the suite must run on the jar: an error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from streamclaim_spark.state.java_build import build_command, compile_jar, resolve_classpath
from streamclaim_spark.state.local_commits import (
    JAR_ENV,
    RELEASE,
    SOURCES,
    delta_storage_package,
    is_current,
    jar_key,
    jar_path,
    key_path,
)

PROG = "streamclaim-local-commits-jar"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help=f"jar file (default ${JAR_ENV} or the venv's)")
    parser.add_argument("--if-stale", action="store_true", help="build only when the sources, JDK or versions changed")
    args = parser.parse_args(argv)
    jar = args.out or jar_path()
    if jar is None:
        parser.error(f"${JAR_ENV} is empty (no jar): pass --out PATH")

    def build() -> None:
        key = jar_key()
        compile_jar(SOURCES, resolve_classpath([delta_storage_package()]), jar, release=RELEASE)
        key_path(jar).write_text(key, encoding="utf-8")

    return build_command(
        PROG,
        jar,
        if_stale=args.if_stale,
        is_current=lambda: is_current(jar),
        build=build,
        without_jdk="sessions commit to local disks through Delta's defaults.",
        in_ci="CI runs the suite on the local commit classes.",
    )


if __name__ == "__main__":
    raise SystemExit(main())

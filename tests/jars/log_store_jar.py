"""The jar of Delta's ``S3DynamoDBLogStore``, built from the sources vendored in
``tests/jars/delta-storage-s3-dynamodb/`` (its README says where they come from), for the multi-writer test
in tests/spark/test_s3.py.

That test needs ``io.delta:delta-storage-s3-dynamodb``, and not every Maven registry serves it; the
classes it holds are six Java files, so the test builds them instead of downloading them. They are
compiled with ``javac --release 11`` (what Delta's own build targets) against the jars they run with:
``io.delta:delta-storage`` and the AWS SDK v1's DynamoDB client, resolved by Spark's own Ivy exactly as
``--packages`` resolves them (so they land in the same cache, from the same registry), and the jars
pyspark ships (Hadoop's client API, Guava, commons-io, SLF4J).

``python -m tests.jars.log_store_jar --if-stale`` (what scripts/setup.sh runs) builds it only when the
sources, the JDK or the versions changed since the jar beside them was built (its ``.key`` file). Without
a JDK it warns and builds nothing, except in CI (``CI=true``), where that is an error: the test would
then depend on the registry again.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from streamclaim_spark.core.object_store import DYNAMODB_PACKAGES
from streamclaim_spark.state.java_build import build_command, compile_jar, has_jdk, resolve_classpath, source_key

# The published artifact the jar stands in for, and the SDK v1 client it is used with (docs/DEPLOY.md).
LOG_STORE_PACKAGE, AWS_SDK_PACKAGE = DYNAMODB_PACKAGES.split(",")
VERSION = LOG_STORE_PACKAGE.rsplit(":", 1)[1]
# The log store extends delta-storage's classes (its internal ones too): the same Delta version.
DELTA_STORAGE_PACKAGE = f"io.delta:delta-storage:{VERSION}"
RELEASE = "11"

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "tests" / "jars" / "delta-storage-s3-dynamodb"
SOURCES = MODULE / "src" / "main" / "java"
JAR = MODULE / "build" / f"delta-storage-s3-dynamodb-{VERSION}.jar"
KEY = JAR.with_name(JAR.name + ".key")
NOTICES = ("LICENSE.txt", "NOTICE.txt")  # Apache-2.0: the licence and notice travel with the jar
NO_JDK_HINT = (
    "no javac (a JDK) on PATH or in $JAVA_HOME: the S3DynamoDBLogStore jar for tests/spark/test_s3.py cannot "
    "be built from tests/jars/delta-storage-s3-dynamodb (Debian: apt-get install openjdk-17-jdk-headless)"
)


def build_key() -> str:
    """What the jar is built from: every source file, the compiler, the target release, the versions."""
    return source_key(
        MODULE,
        [*SOURCES.rglob("*"), *(MODULE / notice for notice in NOTICES)],
        release=RELEASE,
        packages=[DELTA_STORAGE_PACKAGE, AWS_SDK_PACKAGE],
    )


def is_current() -> bool:
    """True when the jar exists and was built from what ``build_key`` names now."""
    return JAR.is_file() and KEY.is_file() and KEY.read_text(encoding="utf-8") == build_key()


def jar_for_tests() -> Path | None:
    """``JAR``, built first when it is missing or stale (scripts/setup.sh builds it; this covers a run of
    pytest alone) in a process of its own, whose JVM is not the test process' session's. None when there
    is no JDK to build it with, outside CI (the test then asks Maven for ``LOG_STORE_PACKAGE``); in CI
    that, and any build that fails, raises."""
    if is_current():
        return JAR
    if not has_jdk():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{NO_JDK_HINT}; CI must run the multi-writer S3 test on it")
        return None
    # A gateway named in the environment would be used instead of launching one (pyspark.java_gateway).
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_GATEWAY_")}
    command = [sys.executable, "-m", "tests.jars.log_store_jar"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or not is_current():
        raise RuntimeError(f"the log store jar was not built (exit {done.returncode}): {done.stderr[-4000:]}")
    return JAR


def build() -> Path:
    """Compiles the sources into ``JAR`` (written beside it and renamed over it) and writes its key."""
    from streamclaim_spark.state.session import DELTA_PACKAGE

    if DELTA_PACKAGE.rsplit(":", 1)[1] != VERSION:
        raise RuntimeError(f"the vendored log store is Delta {VERSION}'s, the session runs {DELTA_PACKAGE}")
    if not has_jdk():
        raise FileNotFoundError(NO_JDK_HINT)
    key = build_key()
    classpath = resolve_classpath([DELTA_STORAGE_PACKAGE, AWS_SDK_PACKAGE])
    compile_jar(SOURCES, classpath, JAR, release=RELEASE, meta_files=[MODULE / notice for notice in NOTICES])
    KEY.write_text(key, encoding="utf-8")
    return JAR


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--if-stale", action="store_true", help="build only when the sources, JDK or versions changed")
    args = parser.parse_args(argv)
    return build_command(
        "log store jar",
        JAR,
        if_stale=args.if_stale,
        is_current=is_current,
        build=build,
        no_jdk=NO_JDK_HINT,
        without_jdk=f"the test asks Maven for {LOG_STORE_PACKAGE} instead.",
        in_ci="CI must run that test.",
    )


if __name__ == "__main__":
    raise SystemExit(main())

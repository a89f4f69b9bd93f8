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
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from streamclaim_spark.core.object_store import DYNAMODB_PACKAGES

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


def jdk_tool(name: str) -> str | None:
    """``$JAVA_HOME/bin/<name>`` when JAVA_HOME is set (the JDK Spark runs), else ``name`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        tool = Path(java_home) / "bin" / name
        return str(tool) if tool.is_file() else None
    return shutil.which(name)


def build_key() -> str:
    """What the jar is built from: every source file, the compiler, the target release, the versions."""
    digest = hashlib.sha256()
    for path in sorted([*SOURCES.rglob("*"), *(MODULE / notice for notice in NOTICES)]):
        if path.is_file():
            digest.update(path.relative_to(MODULE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    javac = jdk_tool("javac")
    compiler = os.path.realpath(javac) if javac else "no javac"
    stamp = os.stat(compiler).st_mtime_ns if javac else 0
    return (
        f"sources {digest.hexdigest()}\njavac {compiler} {stamp}\nrelease {RELEASE}\n"
        f"{DELTA_STORAGE_PACKAGE}\n{AWS_SDK_PACKAGE}\n"
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
    if jdk_tool("javac") is None or jdk_tool("jar") is None:
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


def unavailable(reason: str) -> None:
    """What a test does when the jar cannot be built: skips, except in CI, where it fails."""
    import pytest

    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI must run the multi-writer S3 test on the built log store jar: {reason}")
    pytest.skip(reason)


def resolve_classpath() -> list[str]:
    """The jars of ``DELTA_STORAGE_PACKAGE`` and ``AWS_SDK_PACKAGE`` with their dependencies, as Spark's
    Ivy resolves ``spark.jars.packages`` (its settings, cache and registry), then pyspark's own jars."""
    import pyspark
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).set("spark.jars.packages", f"{DELTA_STORAGE_PACKAGE},{AWS_SDK_PACKAGE}")
    conf.set("spark.ui.enabled", "false")
    with tempfile.TemporaryFile("w+") as output:
        try:
            # spark-submit resolves the packages before its JVM starts the gateway, and hands their local
            # paths to it as the system property spark.jars; nothing else of Spark starts.
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                conf, popen_kwargs={"stdout": output, "stderr": output}
            )
        except Exception:
            output.seek(0)
            print(output.read()[-4000:], file=sys.stderr)
            raise
        try:
            jars = str(gateway.jvm.System.getProperty("spark.jars") or "")
        finally:
            gateway.proc.stdin.close()  # the gateway's JVM exits when its stdin closes
            gateway.proc.wait()
    paths = [unquote(urlparse(jar).path) for jar in jars.split(",") if jar]
    named = {Path(path).name for path in paths}
    for package in (DELTA_STORAGE_PACKAGE, AWS_SDK_PACKAGE):
        organisation, artifact, version = package.split(":")
        if f"{organisation}_{artifact}-{version}.jar" not in named:
            raise RuntimeError(f"Spark's Ivy did not resolve {package}: got {sorted(named)}")
    return [*paths, str(Path(pyspark.__file__).parent / "jars" / "*")]


def build() -> Path:
    """Compiles the sources into ``JAR`` (written beside it and renamed over it) and writes its key."""
    from streamclaim_spark.state.session import DELTA_PACKAGE

    if DELTA_PACKAGE.rsplit(":", 1)[1] != VERSION:
        raise RuntimeError(f"the vendored log store is Delta {VERSION}'s, the session runs {DELTA_PACKAGE}")
    javac, jar_tool = jdk_tool("javac"), jdk_tool("jar")
    if javac is None or jar_tool is None:
        raise FileNotFoundError(NO_JDK_HINT)
    key = build_key()
    classpath = resolve_classpath()
    JAR.parent.mkdir(parents=True, exist_ok=True)
    partial = JAR.with_name(JAR.name + ".partial")
    with tempfile.TemporaryDirectory(dir=JAR.parent) as folder:
        classes = Path(folder) / "classes"
        meta = classes / "META-INF"
        meta.mkdir(parents=True)
        for notice in NOTICES:
            shutil.copyfile(MODULE / notice, meta / notice)
        sources = sorted(str(path) for path in SOURCES.rglob("*.java"))
        compile_command = [javac, "--release", RELEASE, "-encoding", "UTF-8", "-nowarn", "-d", str(classes)]
        _run([*compile_command, "-cp", os.pathsep.join(classpath), *sources])
        _run([jar_tool, "--create", "--file", str(partial), "-C", str(classes), "."])
    partial.replace(JAR)
    KEY.write_text(key, encoding="utf-8")
    return JAR


def _run(command: list[str]) -> None:
    """Runs a JDK tool; its output (javac's note on the deprecated API the log store uses) only if it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        raise subprocess.CalledProcessError(done.returncode, command[0])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--if-stale", action="store_true", help="build only when the sources, JDK or versions changed")
    args = parser.parse_args(argv)
    if args.if_stale and is_current():
        print(f"log store jar: {JAR} is up to date")
        return 0
    if jdk_tool("javac") is None or jdk_tool("jar") is None:
        if os.environ.get("CI") == "true":
            print(f"ERROR: {NO_JDK_HINT}; CI must run that test.", file=sys.stderr)
            return 1
        print(f"WARNING: {NO_JDK_HINT}; the test asks Maven for {LOG_STORE_PACKAGE} instead.", file=sys.stderr)
        return 0
    started = time.monotonic()
    try:
        jar = build()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"ERROR: the log store jar was not built: {error}", file=sys.stderr)
        return 1
    print(f"log store jar: {jar} ({jar.stat().st_size / 1e3:.0f} kB) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

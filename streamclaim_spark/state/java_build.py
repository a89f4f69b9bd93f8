"""Compiles Java sources into a jar against the jars a Spark session runs with.

Two jars are built this way: the store's own local-disk commit classes (``state/local_commits.py``) and the
tests' ``S3DynamoDBLogStore`` (tests/jars/log_store_jar.py). Each is compiled with the JDK beside the Java
that Spark runs, against Maven packages resolved by Spark's own Ivy exactly as ``spark.jars.packages``
resolves them (same settings, cache and registry) and the jars pyspark ships, and written beside its
final name, then renamed over it, so a process starting meanwhile sees the old jar or the new one.
``build_command`` is what both jars' build commands do around the build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

NO_JDK_HINT = "no javac (a JDK) on PATH or in $JAVA_HOME (Debian: apt-get install openjdk-17-jdk-headless)"


def jdk_tool(name: str) -> str | None:
    """``$JAVA_HOME/bin/<name>`` when JAVA_HOME is set (the JDK Spark runs), else ``name`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        tool = Path(java_home) / "bin" / name
        return str(tool) if tool.is_file() else None
    return shutil.which(name)


def has_jdk() -> bool:
    """True when both ``javac`` and ``jar`` are there to build with."""
    return jdk_tool("javac") is not None and jdk_tool("jar") is not None


def source_key(root: Path, files: Iterable[Path], *, release: str, packages: Sequence[str]) -> str:
    """What a jar is built from: ``files`` (named relative to ``root``, their bytes), the compiler, the
    target release and the packages it is compiled against. A jar whose key file holds this is current."""
    digest = hashlib.sha256()
    for path in sorted(files):
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    javac = jdk_tool("javac")
    compiler = os.path.realpath(javac) if javac else "no javac"
    stamp = os.stat(compiler).st_mtime_ns if javac else 0
    return f"sources {digest.hexdigest()}\njavac {compiler} {stamp}\nrelease {release}\n" + "".join(
        f"{package}\n" for package in packages
    )


def resolve_classpath(packages: Sequence[str]) -> list[str]:
    """The jars of ``packages`` with their dependencies, as Spark's Ivy resolves ``spark.jars.packages``,
    then pyspark's own jars."""
    import pyspark
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).set("spark.jars.packages", ",".join(packages))
    conf.set("spark.ui.enabled", "false")
    # A gateway named in the environment would be used instead of launching one (pyspark.java_gateway).
    named = {key: os.environ.pop(key) for key in list(os.environ) if key.startswith("PYSPARK_GATEWAY_")}
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
        finally:
            os.environ.update(named)
        try:
            jars = str(gateway.jvm.System.getProperty("spark.jars") or "")
        finally:
            gateway.proc.stdin.close()  # the gateway's JVM exits when its stdin closes
            gateway.proc.wait()
    paths = [unquote(urlparse(jar).path) for jar in jars.split(",") if jar]
    resolved = {Path(path).name for path in paths}
    for package in packages:
        organisation, artifact, version = package.split(":")
        if f"{organisation}_{artifact}-{version}.jar" not in resolved:
            raise RuntimeError(f"Spark's Ivy did not resolve {package}: got {sorted(resolved)}")
    return [*paths, str(Path(pyspark.__file__).parent / "jars" / "*")]


def compile_jar(
    sources: Path, classpath: Sequence[str], jar: Path, *, release: str, meta_files: Iterable[Path] = ()
) -> Path:
    """Compiles every ``.java`` file under ``sources`` for Java ``release`` into ``jar`` (``meta_files``
    copied into its META-INF), written beside it and renamed over it."""
    javac, jar_tool = jdk_tool("javac"), jdk_tool("jar")
    if javac is None or jar_tool is None:
        raise FileNotFoundError(NO_JDK_HINT)
    jar.parent.mkdir(parents=True, exist_ok=True)
    partial = jar.with_name(jar.name + ".partial")
    with tempfile.TemporaryDirectory(dir=jar.parent) as folder:
        classes = Path(folder) / "classes"
        meta = classes / "META-INF"
        meta.mkdir(parents=True)
        for file in meta_files:
            shutil.copyfile(file, meta / file.name)
        java_files = sorted(str(path) for path in sources.rglob("*.java"))
        compile_command = [javac, "--release", release, "-encoding", "UTF-8", "-nowarn", "-d", str(classes)]
        _run([*compile_command, "-cp", os.pathsep.join(classpath), *java_files])
        _run([jar_tool, "--create", "--file", str(partial), "-C", str(classes), "."])
    partial.replace(jar)
    return jar


def _run(command: list[str]) -> None:
    """Runs a JDK tool; its output (javac's notes on deprecated API) only if it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        raise subprocess.CalledProcessError(done.returncode, command[0])


def build_command(
    label: str,
    jar: Path,
    *,
    if_stale: bool,
    is_current: Callable[[], bool],
    build: Callable[[], object],
    no_jdk: str = NO_JDK_HINT,
    without_jdk: str,
    in_ci: str,
) -> int:
    """A jar's build command: with ``if_stale``, nothing when ``is_current()``; without a JDK a warning
    (``without_jdk``: what happens instead) and exit 0, except in CI (``CI=true``), where that is an error
    (``in_ci``: why CI needs the jar); else ``build()``, timed. The exit status: 0 built or nothing to do."""
    if if_stale and is_current():
        print(f"{label}: {jar} is up to date")
        return 0
    if not has_jdk():
        if os.environ.get("CI") == "true":
            print(f"ERROR: {no_jdk}; {in_ci}", file=sys.stderr)
            return 1
        print(f"WARNING: {no_jdk}; {without_jdk}", file=sys.stderr)
        return 0
    started = time.monotonic()
    try:
        build()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"ERROR: {label}: the jar was not built: {error}", file=sys.stderr)
        return 1
    print(f"{label}: {jar} ({jar.stat().st_size / 1e3:.0f} kB) in {time.monotonic() - started:.0f} s")
    return 0

"""``streamclaim-jvm-archive``: builds the JVM class-data archive new processes start from (state/jvm_archive.py).

It runs a training process whose JVM writes, as it exits, every class it loaded: the bulk paths, one of
each kind of command, the recovery job and the SQL views, on a temporary store. The archive is
written beside the file it replaces and renamed over it, so a process starting meanwhile maps the old one
or the new one, never half of one. Build it again after upgrading Java, pyspark or Delta: ``--if-stale``
(what scripts/setup.sh passes) builds only when the Java, pyspark or Delta beside the archive (its ``.key``
file) changed; a stale one is ignored by the JVM, not misused. It takes ~200 MB and 1-2 minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pyspark
from pyspark import SparkContext

from streamclaim_spark.cli import recover
from streamclaim_spark.fleet.bulk import NewGroup
from streamclaim_spark.sql import register
from streamclaim_spark.state.jvm_archive import ARCHIVE_ENV, JAVA_OPTIONS_KEY, QUIET_CDS, archive_path
from streamclaim_spark.state.session import DELTA_PACKAGE, build_session
from streamclaim_spark.store import StreamStore

HOUR_MS = 3_600_000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamclaim-jvm-archive", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help=f"archive file (default ${ARCHIVE_ENV} or the venv's)")
    parser.add_argument("--if-stale", action="store_true", help="build only when Java, pyspark or Delta changed")
    parser.add_argument("--train", type=Path, default=None, help=argparse.SUPPRESS)  # the training process
    args = parser.parse_args(argv)
    if args.train is not None:
        return train(args.train)
    out = args.out or archive_path()
    if out is None:
        parser.error(f"${ARCHIVE_ENV} is empty (no archive): pass --out PATH")
    key = archive_key()
    key_file = out.with_name(out.name + ".key")
    if args.if_stale and out.is_file() and key_file.is_file() and key_file.read_text(encoding="utf-8") == key:
        print(f"streamclaim-jvm-archive: {out} is up to date")
        return 0
    code = build(out)
    if code == 0:
        key_file.write_text(key, encoding="utf-8")
    return code


def archive_key() -> str:
    """What the archive's classes come from: the Java that spark-submit runs, pyspark's jars, Delta's."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    java = os.path.realpath(java) if java else "no java"
    stamp = os.stat(java).st_mtime_ns if os.path.exists(java) else 0
    return f"{java} {stamp}\npyspark {pyspark.__version__}\n{DELTA_PACKAGE}\n"


def build(out: Path) -> int:
    """Runs the training process with the JVM told to write its classes to a new file, then renames it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    started = time.monotonic()
    env = {**os.environ, ARCHIVE_ENV: ""}  # the training JVM maps no archive of ours: it writes one
    command = [sys.executable, "-m", "streamclaim_spark.cli.jvm_archive", "--train", str(partial)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not partial.is_file():
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
        print(f"streamclaim-jvm-archive: the training process failed (exit {done.returncode})", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    partial.replace(out)
    size_mb = out.stat().st_size / 1e6
    print(f"streamclaim-jvm-archive: {out} ({size_mb:.0f} MB) in {time.monotonic() - started:.0f} s")
    return 0


def train(partial: Path) -> int:
    """The training process: a small store built by the bulk paths, one of each kind of command, the
    recovery job with a dead letter and the SQL views; then waits for its JVM to exit, which is when the
    JVM writes ``partial``."""
    spark = build_session(conf={JAVA_OPTIONS_KEY: f"-XX:ArchiveClassesAtExit={partial} {QUIET_CDS}"})
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "store")
        store = StreamStore.open(path, spark=spark, clock=lambda: int(time.time() * 1000) - HOUR_MS)
        store.append_streams(spark.range(50).selectExpr("'orders' AS stream", "concat('sku-', id) AS sku"), "stream")
        store.create_groups([NewGroup("orders", "billing", "0")])
        store.deliver_many([("orders", "billing", "worker-1")])
        first, second = (entry[0] for entry in store.execute("XRANGE", "orders", "-", "+", "COUNT", "2"))
        for command in (
            ("XADD", "orders", "*", "sku", "sku-x"),
            ("XREADGROUP", "GROUP", "billing", "worker-2", "COUNT", "1", "STREAMS", "orders", ">"),
            ("XCLAIM", "orders", "billing", "worker-1", "0", first, "RETRYCOUNT", "12"),  # a dead letter
            ("XAUTOCLAIM", "orders", "billing", "worker-3", "0", "0", "COUNT", "5"),
            ("XPENDING", "orders", "billing"),
            ("XPENDING", "orders", "billing", "-", "+", "10"),
            ("XACK", "orders", "billing", second),
            ("XINFO", "GROUPS", "orders"),
        ):
            store.execute(*command)
        job = recover.main(["--store", path, "--min-idle", "0ms", "--max-deliveries", "10", "--consumer", "recovery"])
        register(spark, path)
        spark.sql("SELECT count(*) FROM streamclaim.dead_letters").collect()
        spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None) if gateway is not None else None
    if process is not None:  # the JVM exits when its stdin closes, and writes the archive as it does
        process.stdin.close()
        process.wait()
    if job != recover.EXIT_OK:  # an archive without the job's classes would be built silently otherwise
        print(
            f"streamclaim-jvm-archive: the training's recovery job exited {job}: run it from the project "
            "folder, or set STREAMCLAIM_CONF_DIR to the folder with base.toml",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

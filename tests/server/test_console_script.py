"""The ``streamclaim-server`` process as a user starts it: redis-cli against it, SIGTERM, refused binds."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.redis_server import RedisServer
from tests.server.conftest import STORE_WRITES, RawConnection, variants_per_step

pytestmark = pytest.mark.spark

PROJECT = Path(__file__).resolve().parents[2]
READY = re.compile(rb"streamclaim-server ready on 127\.0\.0\.1:(\d+)")


def _server_command(*flags: str) -> list[str]:
    return [sys.executable, "-m", "streamclaim_spark.server", "--conf-dir", str(PROJECT / "conf"), *flags]


def test_a_non_loopback_bind_without_a_password_is_refused_before_spark_starts(tmp_path: Path) -> None:
    env = {**os.environ, "STREAMCLAIM_REQUIREPASS": ""}
    result = subprocess.run(
        _server_command("--store", str(tmp_path / "s"), "--bind", "0.0.0.0"),
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 2
    assert b"config error: --bind" in result.stderr
    assert b"bind='0.0.0.0' is not a loopback address and no requirepass is set" in result.stderr
    assert not (tmp_path / "s").exists()


def test_a_store_on_s3_without_a_multi_writer_log_store_exits_2_naming_the_fix() -> None:
    # Spark starts (the check reads its settings) but has no S3A connector: touching the path would fail.
    result = subprocess.run(
        _server_command("--store", "s3a://bucket/streams", "--port", "0"), capture_output=True, timeout=300
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert b"streamclaim-server: path=s3a://bucket/streams: Delta commits to s3a:// through " in result.stderr
    assert b"(store.single_writer = true in conf/, --single-writer for the jobs)." in result.stderr
    assert b"ready on" not in result.stdout


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``python -m streamclaim_spark.server`` on a new store and a free port, as a user runs it."""
    folder = tmp_path_factory.mktemp("console")
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        _server_command("--store", str(folder / "store"), "--port", "0", "--master", "local[1]"),
        stdout=subprocess.PIPE,
        stderr=log,
    )
    process.log_path = folder / "server.log"  # type: ignore[attr-defined]
    assert process.stdout is not None
    port = None
    deadline = time.monotonic() + 300
    while port is None and time.monotonic() < deadline and process.poll() is None:
        match = READY.search(process.stdout.readline())
        port = int(match.group(1)) if match else None
    if port is None:
        process.kill()
        pytest.fail(f"the server did not start: {(folder / 'server.log').read_text(errors='replace')[-3000:]}")
    yield process, port
    if process.poll() is None:
        process.kill()
        process.wait()
    log.close()


def _wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Polls ``condition`` every 50 ms until it holds; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout_s:g} s for {what}")
        time.sleep(0.05)


def _redis_cli(port: int, *argv: str) -> str:
    executable = shutil.which("redis-cli")
    assert executable is not None, "redis-cli comes with Debian's redis-server package (scripts/setup.sh)"
    result = subprocess.run([executable, "-p", str(port), *argv], capture_output=True, timeout=120, check=True)
    return result.stdout.decode()


@pytest.mark.slow
def test_redis_cli_prints_what_it_prints_against_redis_server(
    server_process: tuple[subprocess.Popen[bytes], int], redis_server: RedisServer
) -> None:
    _, port = server_process
    commands = [
        ("XADD", "orders", "5-1", "item", "book"),
        ("XGROUP", "CREATE", "orders", "billing", "0"),
        ("XREADGROUP", "GROUP", "billing", "alice", "STREAMS", "orders", ">"),
        ("XREADGROUP", "GROUP", "billing", "alice", "STREAMS", "orders", ">"),
        ("XPENDING", "orders", "billing"),
        ("XCLAIM", "orders", "billing", "bob", "0", "5-1", "JUSTID"),
        ("XACK", "orders", "billing", "5-1"),
        ("XINFO", "GROUPS", "orders"),
        ("XLEN", "nothing"),
        ("XGROUP", "CREATE", "nothing", "g", "0"),
    ]
    plan = variants_per_step([argv[0] for argv in commands], STORE_WRITES, ((), ("--no-raw",)))
    for argv, variants in zip(commands, plan, strict=True):
        for flags in variants:
            assert _redis_cli(port, *flags, *argv) == _redis_cli(redis_server.port, *flags, *argv), (flags, argv)


@pytest.mark.slow
def test_sigterm_lets_the_running_command_finish_and_the_process_exit_cleanly(
    server_process: tuple[subprocess.Popen[bytes], int],
) -> None:
    process, port = server_process
    replies: list[bytes] = []
    with RawConnection(port) as blocked:
        waiter = threading.Thread(
            target=lambda: replies.append(blocked.call("XREAD", "BLOCK", "0", "STREAMS", "x", "$"))
        )
        waiter.start()
        with RawConnection(port) as watcher:

            def reading() -> bool:
                """The server runs the read (CLIENT LIST names it): its first pass or its wait, as
                nothing will ever be added to x. That a read waits at all is tests/server's to show."""
                return re.search(rb"cmd=xread\b", watcher.call("CLIENT", "LIST")) is not None

            _wait_until(reading, 120, "the XREAD BLOCK in CLIENT LIST")
        assert waiter.is_alive() and replies == []
        process.send_signal(signal.SIGTERM)
        waiter.join(60)
        assert replies == [b"*-1\r\n"], "the blocked read ends with nil when the server stops"
    assert process.wait(timeout=120) == 0
    assert "shutting down" in process.log_path.read_text(errors="replace")  # type: ignore[attr-defined]

"""A throwaway redis-server on a free loopback port, for the parity tests.

The reference for every parity test is a real redis-server, started fresh per test run so no state or config
leaks in from a system service. ``--stream-node-max-bytes 0`` makes ``~`` trimming depend only on entry counts,
which the store models. If redis-server is not installed the tests skip locally (``scripts/setup.sh`` installs
it) but fail in CI, where a skipped parity suite would pass for the wrong reason.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pytest

from tests.resp import RespClient

INSTALL_HINT = (
    "redis-server is not on PATH: run `bash scripts/setup.sh` (as root it installs Debian's redis-server) "
    "or `apt-get install redis-server`"
)

_RUNNING: set[RedisServer] = set()


def find_redis_server() -> str:
    """The redis-server executable; skip the test when it is missing, unless in CI where that is an error."""
    path = shutil.which("redis-server")
    if path is not None:
        return path
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI must run the parity tests against a real server. {INSTALL_HINT}")
    pytest.skip(INSTALL_HINT)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the caller retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """Run ``redis-server`` as a child process on 127.0.0.1 for the duration of a ``with`` block.

    After ``start()`` (or entering the block) ``host``, ``port`` and ``version`` are set and the server answers
    PING. ``stop()`` terminates it, killing it if it does not exit within ``stop_timeout`` seconds.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        extra_args: tuple[str, ...] = (),
        startup_timeout: float = 10.0,
        stop_timeout: float = 5.0,
        attempts: int = 3,
    ) -> None:
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.attempts = attempts
        self.port = 0
        self.version = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisServer({self.host}:{self.port}, version={self.version or '?'})"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    def client(self) -> RespClient:
        """A new raw RESP connection to this server (the caller closes it)."""
        return RespClient(self.host, self.port)

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING; retry on a new port if the chosen one was taken."""
        if self._proc is not None:
            raise RuntimeError(f"{self!r} is already running")
        executable = find_redis_server()
        self._workdir = Path(tempfile.mkdtemp(prefix="streamclaim-redis-"))
        failures: list[str] = []
        try:
            for _ in range(self.attempts):
                failure = self._try_start(executable)
                if failure is None:
                    _RUNNING.add(self)
                    return self
                failures.append(failure)
        except BaseException:
            self.stop()
            raise
        self.stop()
        raise RuntimeError("redis-server did not start:\n" + "\n---\n".join(failures))

    def _try_start(self, executable: str) -> str | None:
        """One start attempt; None when the server is up, else a description of what went wrong."""
        assert self._workdir is not None
        self.port = free_port(self.host)
        log_path = self._workdir / f"redis-{self.port}.log"
        argv = [
            executable,
            "--port", str(self.port),
            "--bind", self.host,
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--protected-mode", "no",
            "--stream-node-max-bytes", "0",
            "--dir", str(self._workdir),
            "--logfile", str(log_path),
            *self.extra_args,
        ]  # fmt: skip
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return self._abandon(log_path, f"redis-server exited with code {self._proc.returncode}")
            version = self._probe()
            if version is not None:
                self.version = version
                return None
            time.sleep(0.02)
        return self._abandon(log_path, f"redis-server did not answer PING within {self.startup_timeout:.0f} s")

    def _probe(self) -> str | None:
        """The server's version if it answers PING now, else None."""
        try:
            with RespClient(self.host, self.port, timeout=1.0) as client:
                if client.execute("PING") != "PONG":
                    return None
                info = client.execute("INFO", "server")
        except OSError:
            return None
        text = info if isinstance(info, str) else ""
        for line in text.splitlines():
            if line.startswith("redis_version:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def _abandon(self, log_path: Path, reason: str) -> str:
        """Stop a failed attempt and describe it with the tail of the server's own output."""
        stderr = b""
        if self._proc is not None:
            self._terminate(self._proc)
            if self._proc.stderr is not None:
                stderr = self._proc.stderr.read()
                self._proc.stderr.close()
            self._proc = None
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        tail = "\n".join((log + stderr.decode(errors="replace")).strip().splitlines()[-15:])
        return f"{reason} (port {self.port})\n{tail}"

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.stop_timeout)

    def stop(self) -> None:
        """Stop the server (terminate, then kill after ``stop_timeout``) and remove its work directory."""
        _RUNNING.discard(self)
        if self._proc is not None:
            self._terminate(self._proc)
            if self._proc.stderr is not None:
                with contextlib.suppress(OSError):
                    self._proc.stderr.close()
            self._proc = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


@atexit.register
def _stop_leftovers() -> None:
    """Last resort: never leave a redis-server behind when the interpreter exits without tearing down."""
    for server in list(_RUNNING):
        server.stop()

"""A tiny raw RESP2 client for the parity tests.

redis-py strips the error code ("ERR ", "NOGROUP ") from error replies and post-processes some replies, so the
parity harness talks to the real server through this client instead: every reply comes back exactly as the
server framed it, and errors raise ``ReplyError`` with the full line, the same way the store raises them.

Reply mapping: simple string -> ``Status`` (a str, as the store returns ``+OK``), error -> raise
ReplyError(line), integer -> int, bulk string -> str (UTF-8; bytes when the payload is not valid UTF-8),
null bulk / null array -> None, array -> list (recursively).
"""

from __future__ import annotations

import socket
from typing import TypeAlias

from streamclaim_spark.core.replies import Status
from streamclaim_spark.errors import ReplyError

Reply: TypeAlias = "int | str | bytes | list[Reply] | None"
"""A decoded RESP2 reply (errors are raised, never returned)."""

_CRLF = b"\r\n"
_RECV_SIZE = 65536


class ProtocolError(ConnectionError):
    """The server sent something that is not RESP2, or closed the connection mid-reply."""


class _NestedError:
    """An error reply found inside an array; kept while the rest of the array is read, then raised."""

    def __init__(self, line: str) -> None:
        self.line = line


_Parsed: TypeAlias = "int | str | bytes | _NestedError | list[_Parsed] | None"


def encode_command(argv: tuple[str | bytes, ...]) -> bytes:
    """Frame ``argv`` as a RESP2 array of bulk strings (str arguments are sent as UTF-8)."""
    parts = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        data = arg.encode("utf-8") if isinstance(arg, str) else bytes(arg)
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class RespClient:
    """One blocking connection to a Redis server, speaking RESP2 with no reply post-processing.

    ``execute`` sends one command and reads exactly one reply, so the connection never falls out of step:
    even when an error sits inside an array, the whole array is read before the error is raised.
    """

    def __init__(self, host: str, port: int, *, timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self._pos = 0

    def __enter__(self) -> RespClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RespClient({self.host!r}, {self.port})"

    def close(self) -> None:
        """Close the socket; safe to call twice."""
        self._sock.close()

    def execute(self, *argv: str | bytes) -> Reply:
        """Send one command and return its reply; an error reply raises ``ReplyError`` with the full line."""
        if not argv:
            raise ValueError("execute() needs at least the command name")
        self._sock.sendall(encode_command(argv))
        reply = self._read_reply()
        error = _first_error(reply)
        if error is not None:
            raise ReplyError(error)
        return _strip_errors(reply)

    def transaction(self, commands: list[tuple[str | bytes, ...]]) -> list[Reply | ReplyError] | None:
        """MULTI, the commands, EXEC, sent at once; EXEC's replies with each error in its place (a
        ``ReplyError``), or None for a null array (a WATCHed key changed). A refused MULTI, a command
        refused while queuing, or an error instead of EXEC's array raises ``ReplyError``."""
        self._sock.sendall(b"".join(encode_command(argv) for argv in [("MULTI",), *commands, ("EXEC",)]))
        answers = [self._read_reply() for _ in range(len(commands) + 2)]
        for answer in answers[:-1]:
            if isinstance(answer, _NestedError):
                raise ReplyError(answer.line)
        replies = answers[-1]
        if isinstance(replies, _NestedError):
            raise ReplyError(replies.line)
        if replies is None:
            return None
        assert isinstance(replies, list), f"EXEC replied {replies!r}"
        return [ReplyError(item.line) if isinstance(item, _NestedError) else _strip_errors(item) for item in replies]

    # -- reading -------------------------------------------------------------------------------------------

    def _fill(self) -> None:
        """Read more bytes from the socket into the buffer, dropping what was already consumed."""
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        chunk = self._sock.recv(_RECV_SIZE)
        if not chunk:
            raise ProtocolError(f"connection to {self.host}:{self.port} closed by the server")
        self._buf += chunk

    def _read_line(self) -> bytes:
        while True:
            end = self._buf.find(_CRLF, self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos : end])
                self._pos = end + 2
                return line
            self._fill()

    def _read_exact(self, size: int) -> bytes:
        while len(self._buf) - self._pos < size + 2:
            self._fill()
        data = bytes(self._buf[self._pos : self._pos + size])
        if self._buf[self._pos + size : self._pos + size + 2] != _CRLF:
            raise ProtocolError("bulk string not terminated by CRLF")
        self._pos += size + 2
        return data

    def _read_reply(self) -> _Parsed:
        line = self._read_line()
        if not line:
            raise ProtocolError("empty reply line")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return Status(rest.decode("utf-8", errors="replace"))
        if kind == b"-":
            return _NestedError(rest.decode("utf-8", errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self._read_exact(size)
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return data
        if kind == b"*":
            count = int(rest)
            if count < 0:
                return None
            return [self._read_reply() for _ in range(count)]
        raise ProtocolError(f"unexpected RESP2 reply type {line[:40]!r}")


def _first_error(reply: _Parsed) -> str | None:
    """The first error line anywhere in a parsed reply, or None."""
    if isinstance(reply, _NestedError):
        return reply.line
    if isinstance(reply, list):
        for item in reply:
            found = _first_error(item)
            if found is not None:
                return found
    return None


def _strip_errors(reply: _Parsed) -> Reply:
    """Narrow a parsed reply known to hold no errors to the public ``Reply`` type."""
    if isinstance(reply, list):
        return [_strip_errors(item) for item in reply]
    if isinstance(reply, _NestedError):
        raise AssertionError("error replies are raised before narrowing")
    return reply

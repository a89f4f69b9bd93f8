"""streamclaim-server: the store behind the Redis protocol, for redis-cli, redis-py and any Redis client.

One process, one SparkSession, one ``StreamStore``; a thread per connection reads its commands in order.
Data commands run through the same handlers as ``StreamStore.execute`` (commands.dispatch), gathered
from every connection into shared batches by one ``GroupCommitter`` (server/group_commit.py): a connection's
pipelined commands and an EXEC's queue each run together, and a batch is one Delta commit. Blocking
reads wait in their own thread. Connection-level commands (PING, AUTH, HELLO, CLIENT, COMMAND, INFO,
MULTI ...) are server/connection.py; framing (RESP2, or RESP3 after HELLO 3) is ``wire``; what is supported
is docs/SERVER.md.
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import logging
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from streamclaim_spark.commands import dispatch, validate
from streamclaim_spark.commands.args import decode_argv
from streamclaim_spark.commands.spec import COMMANDS
from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.core.replies import OK
from streamclaim_spark.engine.batch import Unit
from streamclaim_spark.errors import (
    EXECABORT,
    FLUSH_DISABLED,
    MAX_CLIENTS_REACHED,
    NOAUTH,
    ClientQuitError,
    ProtocolViolationError,
    ReplyError,
    internal_error,
)
from streamclaim_spark.server.connection import CONNECTION_COMMANDS, Client
from streamclaim_spark.server.group_commit import GroupCommitter
from streamclaim_spark.server.maintenance import BackgroundMaintenance
from streamclaim_spark.server.multi_exec import IMMEDIATE, Queued
from streamclaim_spark.server.wire import NULL_ARRAY, RequestLimits, RequestReader, as_resp3, encode_error, encode_reply
from streamclaim_spark.store import StreamStore

log = logging.getLogger("streamclaim_spark.server")

PROG = "streamclaim-server"
_RECV_BYTES = 64 * 1024
# How often an idle connection thread looks at the shutdown flag.
_POLL_S = 0.2


# --- the server -------------------------------------------------------------------------------------------------


class StreamClaimServer:
    """Serves one store over RESP2 or RESP3 (each connection's HELLO) on ``config.bind``:``config.port`` until ``stop``.

    ``start`` binds and returns at once (the accept loop runs in a thread); ``port`` is then the bound port
    (useful with port 0). ``stop`` refuses new connections and commands, lets running commands finish and
    reply (a blocked read ends with nil), then closes every connection.
    """

    def __init__(
        self, store: StreamStore, config: ServerConfig | None = None, history_retention_ms: int | None = None
    ) -> None:
        self.store = store
        self.config = config or ServerConfig()
        self.limits = RequestLimits(self.config.max_bulk_bytes, self.config.max_arguments)
        self.started = time.monotonic()
        self.port = 0
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[Client, socket.socket, threading.Thread]] = {}
        self._acceptor: threading.Thread | None = None
        self.committer = GroupCommitter(
            store.runner, dispatch, self.config.batch_max_commands, self.config.batch_max_bytes
        )
        self.maintenance = BackgroundMaintenance(
            store,
            lambda: self.committer.stats.batches,
            enabled=self.config.maintain,
            every_ms=self.config.maintain_every_ms,
            after_batches=self.config.maintain_after_batches,
            retention_ms=history_retention_ms,
        )

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self) -> StreamClaimServer:
        family = socket.AF_INET6 if ":" in self.config.bind else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.config.bind, self.config.port))
        listener.listen(511)
        listener.settimeout(_POLL_S)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self.committer.start()
        self.maintenance.start()
        self._acceptor = threading.Thread(target=self._accept_loop, name="streamclaim-accept", daemon=True)
        self._acceptor.start()
        log.info("ready on %s:%d, store %s", self.config.bind, self.port, self.store.path)
        return self

    def stop(self, grace_s: float = 60.0) -> None:
        """Refuses new connections and commands, waits up to ``grace_s`` for running ones, closes the rest."""
        self._stopping.set()
        if self._acceptor is not None:
            self._acceptor.join()
        deadline = time.monotonic() + grace_s
        for _, _, thread in self._connections():
            thread.join(max(0.0, deadline - time.monotonic()))
        for _, sock, _ in self._connections():
            with contextlib.suppress(OSError):
                sock.close()
        self.maintenance.stop()
        self.committer.stop()
        log.info("stopped")

    def clients(self) -> list[Client]:
        return [client for client, _, _ in self._connections()]

    def check_password(self, user: str, password: str) -> bool:
        """The ``default`` user's password (any password when none is set, as Redis' nopass user)."""
        if user != "default":
            return False
        expected = self.config.requirepass
        return not expected or hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))

    def _connections(self) -> list[tuple[Client, socket.socket, threading.Thread]]:
        with self._lock:
            return list(self._clients.values())

    def _accept_loop(self) -> None:
        assert self._listener is not None
        with self._listener:
            while not self._stopping.is_set():
                try:
                    sock, address = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError as error:
                    if self._stopping.is_set():
                        return
                    # E.g. out of file descriptors: keep serving the connected clients and retry.
                    log.warning("accept failed: %s; retrying", error)
                    time.sleep(_POLL_S)
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._admit(sock, f"{address[0]}:{address[1]}")

    def _admit(self, sock: socket.socket, address: str) -> None:
        with self._lock:
            if len(self._clients) >= self.config.max_clients:
                with contextlib.suppress(OSError):
                    sock.sendall(encode_error(MAX_CLIENTS_REACHED))
                sock.close()
                return
            client = Client(next(self._ids), address, authenticated=not self.config.requirepass)
            thread = threading.Thread(target=self._serve, args=(client, sock), name=f"streamclaim-client-{client.id}")
            self._clients[client.id] = (client, sock, thread)
        thread.start()

    def _serve(self, client: Client, sock: socket.socket) -> None:
        """One connection: read requests, run them in order, reply; until QUIT, EOF, a violation or stop."""
        reader = RequestReader(self.limits)
        # Blocking sends (a large reply to a slow reader must not time out); reads wait in poll so the
        # thread sees the shutdown flag (poll, not select: descriptors may exceed FD_SETSIZE).
        sock.settimeout(None)
        incoming = select.poll()
        incoming.register(sock, select.POLLIN)
        try:
            while not self._stopping.is_set():
                if not incoming.poll(_POLL_S * 1000):
                    continue
                data = sock.recv(_RECV_BYTES)
                if not data:
                    return
                reader.feed(data)
                requests: list[list[bytes]] = []
                violation: ProtocolViolationError | None = None
                while True:
                    try:
                        argv = reader.next_request()
                    except ProtocolViolationError as error:
                        violation = error
                        break
                    if argv is None:
                        break
                    requests.append(argv)
                if self._serve_requests(client, sock, requests):
                    return
                if violation is not None:
                    log.info("client %s: %s; closing the connection", client.address, violation.line)
                    sock.sendall(encode_error(violation.line))
                    return
        except OSError as error:
            log.debug("client %s: connection error %s", client.address, error)
        finally:
            with self._lock:
                self._clients.pop(client.id, None)
            with contextlib.suppress(OSError):
                sock.close()

    def _serve_requests(self, client: Client, sock: socket.socket, requests: list[list[bytes]]) -> bool:
        """Answers a connection's requests in order; True when the connection is to close.

        Consecutive data commands (pipelined by the client) go to the group committer as one unit, so
        they commit with other connections' commands; anything else (connection commands, MULTI's
        queue, blocking reads) runs on its own between them.
        """
        grouped: list[tuple[str, list[bytes]]] = []

        def flush() -> None:
            if grouped:
                sock.sendall(b"".join(self._run_grouped(client, grouped)))
                grouped.clear()

        for raw in requests:
            if self._stopping.is_set():
                break
            name = raw[0].decode("utf-8", "replace").lower()
            if self._groupable(client, name, raw):
                grouped.append((name, raw))
                continue
            flush()
            reply, close = self._run(client, sock, raw)
            sock.sendall(reply)
            if close:
                return True
        flush()
        return False

    def _groupable(self, client: Client, name: str, raw: list[bytes]) -> bool:
        """A data command outside MULTI that does not block: it can join a group commit."""
        spec = COMMANDS.get(name)
        if spec is None or name in CONNECTION_COMMANDS or client.transaction.open:
            return False
        return not spec.blocking or not any(arg.upper() == b"BLOCK" for arg in raw)

    def _run_grouped(self, client: Client, grouped: list[tuple[str, list[bytes]]]) -> list[bytes]:
        """The replies of a connection's consecutive data commands, run as one unit of a group commit."""
        replies: list[bytes | None] = []
        admitted: list[tuple[str, list[bytes]]] = []
        for name, raw in grouped:
            client.last_command = name
            try:
                self._check_command(client, name, [arg.decode("utf-8", "replace") for arg in raw])
                admitted.append((name, raw))
                replies.append(None)
            except ReplyError as error:
                replies.append(encode_error(error.line))
        if admitted:
            try:
                unit = Unit([decode_argv(raw) for _, raw in admitted])
                results = self.committer.submit(unit, sum(len(arg) for _, raw in admitted for arg in raw)).replies
            except ReplyError as error:
                results = [error] * len(admitted)
            except Exception as error:
                log.exception("client %s: a group commit failed", client.address)
                results = [_internal_error(error)] * len(admitted)
            pairs = zip(admitted, results, strict=True)
            framed = iter(self._framed(client, raw, name, reply) for (name, raw), reply in pairs)
            replies = [next(framed) if reply is None else reply for reply in replies]
        return [reply for reply in replies if reply is not None]

    def _framed(self, client: Client, raw: list[bytes], name: str, reply: Any) -> bytes:
        """One data command's reply (or its ``ReplyError``) framed for the client's protocol."""
        if isinstance(reply, ReplyError):
            return encode_error(reply.line)
        if client.protocol == 3:
            reply = as_resp3(reply, [arg.decode("utf-8", "replace") for arg in raw[:3]])
        return encode_reply(reply, name, client.protocol)

    def _run(self, client: Client, sock: socket.socket, raw: list[bytes]) -> tuple[bytes, bool]:
        """One command's reply bytes, and whether to close the connection after sending them."""
        name = raw[0].decode("utf-8", "replace").lower()
        client.last_command = name
        try:
            reply = self._execute(client, sock, name, raw)
            if isinstance(reply, Framed):
                return reply.data, False
            return self._framed(client, raw, name, reply), False
        except ClientQuitError:
            return encode_reply(OK), True
        except ReplyError as error:
            return encode_error(error.line), False
        except Exception as error:
            log.exception("client %s: %s failed", client.address, name)
            return encode_error(_internal_error(error).line), False

    def _execute(self, client: Client, sock: socket.socket, name: str, raw: list[bytes]) -> Any:
        argv = [arg.decode("utf-8", "replace") for arg in raw]
        if client.transaction.open and name not in IMMEDIATE:
            try:
                self._check_command(client, name, argv)
            except ReplyError:
                client.transaction.doom()
                raise
            return client.transaction.queue(raw)
        self._check_command(client, name, argv)
        if name in CONNECTION_COMMANDS:
            return CONNECTION_COMMANDS[name].handler(self, client, argv)
        # A blocking read (the only data command that is not grouped outside MULTI): its passes run in batches.
        return self.committer.read_blocking(
            decode_argv(raw), cancelled=lambda: self._stopping.is_set() or _peer_closed(sock)
        )

    def _check_command(self, client: Client, name: str, argv: list[str]) -> None:
        """The checks Redis makes before it runs or queues a command: known, arity, AUTH, allowed here."""
        if name in CONNECTION_COMMANDS:
            command = CONNECTION_COMMANDS[name]
            command.spec.check(argv)
            if not client.authenticated and not command.no_auth:
                raise ReplyError(NOAUTH)
            return
        # Redis checks the arity (and XGROUP's and XINFO's subcommands) before AUTH.
        validate(argv)
        if not client.authenticated:
            raise ReplyError(NOAUTH)
        if name in ("flushdb", "flushall") and not self.config.allow_flush:
            raise ReplyError(FLUSH_DISABLED.format(name=name.upper()))

    def exec_transaction(self, client: Client, queued: Queued) -> Framed:
        """EXEC: the queued data commands as one batch (one commit), connection commands in their places."""
        if queued.failed:
            raise ReplyError(EXECABORT)
        names = [raw[0].decode("utf-8", "replace").lower() for raw in queued.requests]
        data = [
            decode_argv(raw)
            for raw, name in zip(queued.requests, names, strict=True)
            if name not in CONNECTION_COMMANDS
        ]
        replies: list[Any] = []
        if data or queued.watched:
            size = sum(len(arg) for raw in queued.requests for arg in raw)
            result = self.committer.submit(Unit(data, queued.watched), size)
            if result.aborted:
                return Framed(b"_\r\n" if client.protocol == 3 else NULL_ARRAY)
            replies = list(result.replies)
        answers = iter(replies)
        parts = [b"*%d\r\n" % len(queued.requests)]
        for raw, name in zip(queued.requests, names, strict=True):
            if name in CONNECTION_COMMANDS:
                try:
                    reply = CONNECTION_COMMANDS[name].handler(
                        self, client, [arg.decode("utf-8", "replace") for arg in raw]
                    )
                except ReplyError as error:
                    reply = error
            else:
                reply = next(answers)
            parts.append(self._framed(client, raw, name, reply))
        return Framed(b"".join(parts))


@dataclass(frozen=True)
class Framed:
    """A reply already framed as RESP (EXEC's array of replies, each framed as its own command's)."""

    data: bytes


def _internal_error(error: Exception) -> ReplyError:
    """What a client gets when a command fails in a way Redis has no error for (a bug, a failed job)."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return internal_error(error, first_line)


def _peer_closed(sock: socket.socket) -> bool:
    """True once the client has closed its end (a blocked read then stops waiting, as Redis unblocks it)."""
    try:
        incoming = select.poll()
        incoming.register(sock, select.POLLIN)
        return bool(incoming.poll(0)) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True

"""streamclaim-server: the store behind the Redis protocol, for redis-cli, redis-py and any Redis client.

One process, one SparkSession, one ``StreamStore``; a thread per connection reads its commands in order
and runs each data command through ``StreamStore.execute`` (the one implementation of every command), so
commands of different connections run concurrently as the store allows. The connection-level commands a
client library sends (PING, AUTH, HELLO, SELECT, CLIENT, COMMAND, INFO, QUIT ...) are answered here.
Framing is ``wire``; what is supported and what is not is docs/SERVER.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import importlib.metadata
import itertools
import logging
import os
import platform
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from streamclaim_spark.batch import Unit
from streamclaim_spark.commands import command_arity, command_names, dispatch, validate
from streamclaim_spark.commands.args import check_arity, check_subcommand
from streamclaim_spark.config import AppConfig, ConfigError, Key, ServerConfig, flag_overrides, load_config
from streamclaim_spark.errors import EXECABORT, SYNTAX, ReplyError, wrong_arity
from streamclaim_spark.group_commit import GroupCommitter
from streamclaim_spark.object_store import UnsafeObjectStoreError
from streamclaim_spark.replies import OK, Status
from streamclaim_spark.server_transactions import IMMEDIATE, Queued, Transaction
from streamclaim_spark.store import StreamStore, decode_argv
from streamclaim_spark.wire import (
    NULL_ARRAY,
    Map,
    ProtocolViolation,
    RequestLimits,
    RequestReader,
    as_resp3,
    encode_error,
    encode_reply,
)

log = logging.getLogger("streamclaim_spark.server")

PROG = "streamclaim-server"
# The Redis version whose replies the store reproduces (tests/parity runs against it).
REDIS_COMPAT_VERSION = "7.0.15"
PASSWORD_ENV = "STREAMCLAIM_REQUIREPASS"
MAX_CLIENTS_REACHED = "ERR max number of clients reached"
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NO_PASSWORD_SET = (
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
NOAUTH_HELLO = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH "
    "<user> <pass> option can be used to authenticate the client and select the RESP protocol version at the "
    "same time"
)
NOPROTO = "NOPROTO unsupported protocol version"
DB_OUT_OF_RANGE = "ERR DB index is out of range"
NOT_AN_INTEGER = "ERR value is not an integer or out of range"
BAD_CLIENT_NAME = "ERR Client names cannot contain spaces, newlines or special characters."
FLUSH_DISABLED = (
    "ERR {name} is disabled on this server: it deletes every stream. Start streamclaim-server with "
    "--allow-flush (or set [server] allow_flush = true) to allow it"
)
_RECV_BYTES = 64 * 1024
# How often an idle connection thread looks at the shutdown flag.
_POLL_S = 0.2


@dataclass
class Client:
    """One connection's state, as CLIENT LIST shows it."""

    id: int
    address: str
    authenticated: bool
    protocol: int = 2
    name: str = ""
    library: dict[str, str] = field(default_factory=dict)
    created: float = field(default_factory=time.monotonic)
    last_command: str = "NULL"
    transaction: Transaction = field(default_factory=Transaction)

    def describe(self) -> str:
        age = int(time.monotonic() - self.created)
        return f"id={self.id} addr={self.address} name={self.name} age={age} db=0 cmd={self.last_command}"


class _Quit(Exception):
    """Close the connection once the pending reply is sent."""


# --- connection-level commands -------------------------------------------------------------------------------

# name -> (arity, handler); the handler gets the server, the client and the decoded argv.
_Handler = Callable[["StreamClaimServer", Client, list[str]], Any]
_CONNECTION_COMMANDS: dict[str, tuple[int, _Handler]] = {}
# Commands a client may send before AUTH (Redis' CMD_NO_AUTH).
_NO_AUTH = {"auth", "hello", "quit"}
# Data commands that write (for COMMAND INFO's flags).
_WRITE_COMMANDS = {"xadd", "xdel", "xtrim", "xsetid", "xgroup", "xack", "xclaim", "xautoclaim", "xreadgroup", "del"}
_WRITE_COMMANDS |= {"flushdb", "flushall", "xackdel", "xdelex", "xnack"}


def _connection_command(name: str, arity: int) -> Callable[[_Handler], _Handler]:
    def register(handler: _Handler) -> _Handler:
        _CONNECTION_COMMANDS[name] = (arity, handler)
        return handler

    return register


@_connection_command("ping", -1)
def _ping(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    if len(argv) > 2:
        raise wrong_arity("ping")
    return Status("PONG") if len(argv) == 1 else argv[1]


@_connection_command("echo", 2)
def _echo(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    return argv[1]


@_connection_command("quit", -1)
def _quit(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    raise _Quit


@_connection_command("auth", -2)
def _auth(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 2 and not server.config.requirepass:
        raise ReplyError(NO_PASSWORD_SET)
    user, password = ("default", argv[1]) if len(argv) == 2 else (argv[1], argv[2])
    if not server.check_password(user, password):
        raise ReplyError(WRONGPASS)
    client.authenticated = True
    return OK


@_connection_command("hello", -1)
def _hello(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    protocol = client.protocol
    if len(argv) >= 2:
        try:
            protocol = int(argv[1])
        except ValueError:
            raise ReplyError("ERR Protocol version is not an integer or out of range") from None
        if protocol not in (2, 3):
            raise ReplyError(NOPROTO)
    name = None
    at = 2
    while at < len(argv):
        option = argv[at].lower()
        if option == "auth" and at + 2 < len(argv):
            if not server.check_password(argv[at + 1], argv[at + 2]):
                raise ReplyError(WRONGPASS)
            client.authenticated = True
            at += 3
        elif option == "setname" and at + 1 < len(argv):
            name = _valid_client_name(argv[at + 1])
            at += 2
        else:
            raise ReplyError(f"ERR Syntax error in HELLO option '{argv[at]}'")
    if not client.authenticated:
        raise ReplyError(NOAUTH_HELLO)
    if name is not None:
        client.name = name
    client.protocol = protocol
    return Map(
        (
            ("server", "redis"), ("version", REDIS_COMPAT_VERSION), ("proto", protocol), ("id", client.id),
            ("mode", "standalone"), ("role", "master"), ("modules", []),
        )
    )  # fmt: skip


@_connection_command("multi", 1)
def _multi(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    client.transaction.begin()
    return OK


@_connection_command("discard", 1)
def _discard(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    client.transaction.discard()
    return OK


@_connection_command("watch", -2)
def _watch(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    client.transaction.watch(server.store.snapshot(), argv[1:])
    return OK


@_connection_command("unwatch", 1)
def _unwatch(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    client.transaction.unwatch()
    return OK


@_connection_command("exec", 1)
def _exec(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    return server.exec_transaction(client, client.transaction.take())


@_connection_command("select", 2)
def _select(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    try:
        index = int(argv[1])
    except ValueError:
        raise ReplyError(NOT_AN_INTEGER) from None
    if index != 0:
        # One store is one database: db 0 (docs/SERVER.md).
        raise ReplyError(DB_OUT_OF_RANGE)
    return OK


_CLIENT_ARITY = {"id": 2, "getname": 2, "setname": 3, "setinfo": 4, "list": -2, "info": 2, "help": 2}
_CLIENT_HELP = [
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "LIST",
    "    Return information about client connections.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Print this help.",
]


@_connection_command("client", -2)
def _client(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    sub = check_subcommand(argv, _CLIENT_ARITY)
    if sub == "id":
        return client.id
    if sub == "getname":
        return client.name or None
    if sub == "setname":
        client.name = _valid_client_name(argv[2])
        return OK
    if sub == "setinfo":
        attribute = argv[2].lower()
        if attribute not in ("lib-name", "lib-ver"):
            raise ReplyError(f"ERR Unrecognized option '{argv[2]}'")
        client.library[attribute] = argv[3]
        return OK
    if sub == "info":
        return client.describe() + "\n"
    if sub == "list":
        return "".join(other.describe() + "\n" for other in server.clients())
    return [Status(line) for line in _CLIENT_HELP]


def _valid_client_name(name: str) -> str:
    if any(not "!" <= char <= "~" for char in name):
        raise ReplyError(BAD_CLIENT_NAME)
    return name


_COMMAND_ARITY = {"count": 2, "info": -2, "docs": -2, "list": -2, "help": 2}


@_connection_command("command", -1)
def _command(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    if len(argv) == 1:
        return [_command_info(name) for name in _all_commands()]
    sub = check_subcommand(argv, _COMMAND_ARITY)
    if sub == "count":
        return len(_all_commands())
    if sub == "info":
        return [_command_info(name.lower()) if name.lower() in _all_commands() else None for name in argv[2:]]
    if sub == "docs":
        # No documentation is served: an empty map, which redis-cli takes as "no hints".
        return Map(())
    if sub == "list":
        return list(_all_commands())
    return [Status(line) for line in ("COMMAND <subcommand>. Subcommands are: COUNT, DOCS, INFO, LIST, HELP",)]


def _all_commands() -> list[str]:
    return sorted({*command_names(), *_CONNECTION_COMMANDS})


def _command_info(name: str) -> list[Any]:
    """COMMAND INFO's record: name, arity, flags, first key, last key, key step, ACL categories, tips, key
    specs, subcommands (the last four empty)."""
    if name in _CONNECTION_COMMANDS:
        arity = _CONNECTION_COMMANDS[name][0]
        flags, keys = ["fast", "no-auth" if name in _NO_AUTH else "loading"], (0, 0, 0)
    else:
        arity = command_arity(name)
        flags = ["write"] if name in _WRITE_COMMANDS else ["readonly"]
        if name in ("xread", "xreadgroup"):
            flags, keys = [*flags, "blocking", "movablekeys"], (0, 0, 0)
        elif name in ("del", "exists"):
            keys = (1, -1, 1)
        elif name in ("dbsize", "flushdb", "flushall"):
            keys = (0, 0, 0)
        else:
            keys = (1, 1, 1)
    return [name, arity, [Status(flag) for flag in flags], *keys, [], [], [], []]


_FUNCTION_ARITY = {
    "flush": -2, "list": -2, "stats": 2, "delete": 3, "kill": 2, "load": -3, "dump": 2, "restore": -3, "help": 2,
}  # fmt: skip


@_connection_command("function", -2)
def _function(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    """FUNCTION as redis-server answers it with no library loaded; loading one is refused (the store runs
    no scripts). Redis' own test suite starts with FUNCTION FLUSH."""
    sub = check_subcommand(argv, _FUNCTION_ARITY)
    if sub == "flush":
        if len(argv) > 3 or (len(argv) == 3 and argv[2].upper() not in ("ASYNC", "SYNC")):
            raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
        return OK
    if sub == "list":
        return []
    if sub == "stats":
        engines = Map((("LUA", Map((("libraries_count", 0), ("functions_count", 0)))),))
        return Map((("running_script", None), ("engines", engines)))
    if sub == "delete":
        raise ReplyError("ERR Library not found")
    if sub == "kill":
        raise ReplyError("NOTBUSY No scripts in execution right now.")
    raise ReplyError(f"ERR streamclaim-server runs no functions: FUNCTION {argv[1].upper()} is not supported")


# Connection commands with subcommands, which Redis checks before running or queuing them.
_CONTAINERS = {"client": _CLIENT_ARITY, "command": _COMMAND_ARITY, "function": _FUNCTION_ARITY}


@_connection_command("info", -1)
def _info(server: StreamClaimServer, client: Client, argv: list[str]) -> Any:
    wanted = {section.lower() for section in argv[1:]} or {"default"}
    everything = bool(wanted & {"all", "everything", "default"})
    sections = []
    if everything or "server" in wanted:
        sections.append(
            "# Server\r\n"
            f"redis_version:{REDIS_COMPAT_VERSION}\r\n"
            f"streamclaim_spark_version:{importlib.metadata.version('streamclaim-spark')}\r\n"
            "redis_mode:standalone\r\n"
            f"os:{platform.system()} {platform.release()} {platform.machine()}\r\n"
            "arch_bits:64\r\n"
            f"process_id:{os.getpid()}\r\n"
            f"tcp_port:{server.port}\r\n"
            f"uptime_in_seconds:{int(time.monotonic() - server.started)}\r\n"
            f"store_path:{server.store.path}\r\n"
            f"store_writer_mode:{server.store.safety.mode}\r\n"
        )
    if everything or "clients" in wanted:
        sections.append(
            f"# Clients\r\nconnected_clients:{len(server.clients())}\r\nmaxclients:{server.config.max_clients}\r\n"
        )
    if everything or "batches" in wanted:
        lines = [
            *server.committer.stats.lines(),
            f"batch_max_commands:{server.config.batch_max_commands}",
            f"batch_max_bytes:{server.config.batch_max_bytes}",
        ]
        sections.append("# Batches\r\n" + "".join(line + "\r\n" for line in lines))
    if everything or "keyspace" in wanted:
        keys = server.store.execute("DBSIZE")
        sections.append("# Keyspace\r\n" + (f"db0:keys={keys},expires=0,avg_ttl=0\r\n" if keys else ""))
    return "\r\n".join(sections)


# --- the server -------------------------------------------------------------------------------------------------


class StreamClaimServer:
    """Serves one store over RESP2 on ``config.bind``:``config.port`` until ``stop``.

    ``start`` binds and returns at once (the accept loop runs in a thread); ``port`` is then the bound port
    (useful with port 0). ``stop`` refuses new connections and commands, lets running commands finish and
    reply (a blocked read ends with nil), then closes every connection.
    """

    def __init__(self, store: StreamStore, config: ServerConfig | None = None) -> None:
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
                violation: ProtocolViolation | None = None
                while True:
                    try:
                        argv = reader.next_request()
                    except ProtocolViolation as error:
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
        if name in _CONNECTION_COMMANDS or name not in command_names() or client.transaction.open:
            return False
        return name not in ("xread", "xreadgroup") or not any(arg.upper() == b"BLOCK" for arg in raw)

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
            if client.protocol == 3:
                reply = as_resp3(reply, [arg.decode("utf-8", "replace") for arg in raw[:3]])
            return encode_reply(reply, name, client.protocol), False
        except _Quit:
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
        if name in _CONNECTION_COMMANDS:
            return _CONNECTION_COMMANDS[name][1](self, client, argv)
        # Payloads go back on the wire exactly as stored, whatever the store's decode_responses.
        return self.store.resp_reply(*raw, cancelled=lambda: self._stopping.is_set() or _peer_closed(sock))

    def _check_command(self, client: Client, name: str, argv: list[str]) -> None:
        """The checks Redis makes before it runs or queues a command: known, arity, AUTH, allowed here."""
        if name in _CONNECTION_COMMANDS:
            check_arity(argv, _CONNECTION_COMMANDS[name][0], name)
            if name in _CONTAINERS and len(argv) > 1:
                check_subcommand(argv, _CONTAINERS[name])
            if not client.authenticated and name not in _NO_AUTH:
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
            if name not in _CONNECTION_COMMANDS
        ]
        replies: list[Any] = []
        if data or queued.watched:
            size = sum(len(arg) for raw in queued.requests for arg in raw)
            result = self.committer.submit(Unit(data, queued.watched), size)
            if result.aborted:
                return Framed(b"_\r\n" if client.protocol == 3 else NULL_ARRAY)
            replies = list(result.replies)
        parts = [b"*%d\r\n" % len(queued.requests)]
        for raw, name in zip(queued.requests, names, strict=True):
            argv = [arg.decode("utf-8", "replace") for arg in raw]
            try:
                if name in _CONNECTION_COMMANDS:
                    reply = _CONNECTION_COMMANDS[name][1](self, client, argv)
                else:
                    reply = replies.pop(0)
                    if isinstance(reply, ReplyError):
                        raise reply
                if client.protocol == 3:
                    reply = as_resp3(reply, argv[:3])
                parts.append(encode_reply(reply, name, client.protocol))
            except ReplyError as error:
                parts.append(encode_error(error.line))
        return Framed(b"".join(parts))


@dataclass(frozen=True)
class Framed:
    """A reply already framed as RESP (EXEC's array of replies, each framed as its own command's)."""

    data: bytes


def _internal_error(error: Exception) -> ReplyError:
    """What a client gets when a command fails in a way Redis has no error for (a bug, a failed job)."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return ReplyError(f"ERR internal error in streamclaim-server: {type(error).__name__}: {first_line}")


def _peer_closed(sock: socket.socket) -> bool:
    """True once the client has closed its end (a blocked read then stops waiting, as Redis unblocks it)."""
    try:
        incoming = select.poll()
        incoming.register(sock, select.POLLIN)
        return bool(incoming.poll(0)) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


# --- the console script --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serve a streamclaim store over the Redis protocol: point redis-cli, redis-py or any Redis "
        "client at it. Settings come from conf/base.toml, then conf/local.toml, then these flags "
        "(docs/SERVER.md).",
    )
    parser.add_argument("--conf-dir", default=os.environ.get("STREAMCLAIM_CONF_DIR", "conf"), help="conf folder")
    parser.add_argument("--store", metavar="PATH", help="folder of the store; created when missing [store.path]")
    parser.add_argument(
        "--single-writer",
        action="store_true",
        default=None,
        help="promise that no other driver writes the store meanwhile (S3 without DynamoDB) [store.single_writer]",
    )
    parser.add_argument("--bind", metavar="ADDRESS", help="address to listen on [server.bind]")
    parser.add_argument("--port", type=int, help="TCP port, 0 for any free one [server.port]")
    parser.add_argument(
        "--requirepass",
        metavar="PASSWORD",
        help=f"password of the default user [server.requirepass]; ${PASSWORD_ENV} keeps it out of `ps`",
    )
    parser.add_argument("--max-clients", type=int, metavar="N", help="most connections at once [server.max_clients]")
    parser.add_argument(
        "--allow-flush", action="store_true", default=None, help="let FLUSHDB/FLUSHALL delete every stream"
    )
    parser.add_argument(
        "--batch-max-commands",
        type=int,
        metavar="N",
        help="most commands one group commit gathers from all clients [server.batch_max_commands]",
    )
    parser.add_argument("--master", help="Spark master URL [spark.master]")
    parser.add_argument("--log-level", default="INFO", help="this process' log level (default INFO)")
    return parser


def overrides_from(args: argparse.Namespace, environ: dict[str, str]) -> dict[Key, tuple[Any, str]]:
    overrides: dict[Key, tuple[Any, str]] = {}
    if args.store is not None:
        overrides[("store", "path")] = (
            os.path.abspath(args.store) if "://" not in args.store else args.store,
            "--store",
        )
    if environ.get(PASSWORD_ENV):
        overrides[("server", "requirepass")] = (environ[PASSWORD_ENV], PASSWORD_ENV)
    flags = [
        ("single_writer", ("store", "single_writer")),
        ("bind", ("server", "bind")),
        ("port", ("server", "port")),
        ("requirepass", ("server", "requirepass")),
        ("max_clients", ("server", "max_clients")),
        ("allow_flush", ("server", "allow_flush")),
        ("batch_max_commands", ("server", "batch_max_commands")),
        ("master", ("spark", "master")),
    ]
    overrides.update(flag_overrides(args, flags))
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the server until SIGTERM or SIGINT; returns the exit code (2: bad flags or config)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        config = load_config(args.conf_dir, overrides_from(args, dict(os.environ)))
    except ConfigError as error:
        print(f"{PROG}: config error: {error}", file=sys.stderr)
        return 2
    return serve(config)


def serve(config: AppConfig) -> int:
    """Starts Spark, opens (or creates) the store and serves it until SIGTERM or SIGINT."""
    from streamclaim_spark.cli import start_session

    stop_requested = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_requested.set())
    spark = start_session(replace(config.spark, app_name=PROG))
    try:
        try:
            store = StreamStore.open(config.store.path, spark=spark, single_writer=config.store.single_writer)
        except UnsafeObjectStoreError as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return 2
        server = StreamClaimServer(store, config.server).start()
        print(f"{PROG} ready on {config.server.bind}:{server.port} (store {store.path})", flush=True)
        while not stop_requested.wait(1.0):
            pass
        log.info("shutting down: finishing running commands, refusing new ones")
        server.stop()
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())

"""The connection-level commands of streamclaim-server, and one connection's state.

What a client library sends besides data commands — PING, ECHO, QUIT, AUTH, HELLO, SELECT, CLIENT,
COMMAND, INFO, FUNCTION — and MULTI, EXEC, DISCARD, WATCH, UNWATCH, answered here as redis-server 7.0
answers them. Each handler gets the server, the connection's ``Client`` and the decoded argv; the
server (server.py) checks arity, subcommands and AUTH before calling one.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from streamclaim_spark.commands.args import check_subcommand
from streamclaim_spark.commands.spec import COMMANDS, CommandSpec
from streamclaim_spark.core.replies import OK, Status
from streamclaim_spark.errors import (
    BAD_CLIENT_NAME,
    DB_OUT_OF_RANGE,
    FUNCTION_FLUSH_MODE,
    LIBRARY_NOT_FOUND,
    NO_PASSWORD_SET,
    NOAUTH_HELLO,
    NOPROTO,
    NOT_AN_INTEGER,
    NOTBUSY,
    PROTOCOL_VERSION_NOT_AN_INTEGER,
    SYNTAX,
    WRONGPASS,
    ClientQuitError,
    ReplyError,
    function_unsupported,
    hello_option_syntax,
    unrecognized_option,
    wrong_arity,
)
from streamclaim_spark.server.multi_exec import Transaction
from streamclaim_spark.server.wire import Map

if TYPE_CHECKING:
    from streamclaim_spark.core.config import ServerConfig
    from streamclaim_spark.server.group_commit import GroupCommitter
    from streamclaim_spark.server.maintenance import BackgroundMaintenance
    from streamclaim_spark.server.multi_exec import Queued
    from streamclaim_spark.store import StreamStore


class Server(Protocol):
    """What the connection commands need of the server (server.StreamClaimServer)."""

    store: StreamStore
    config: ServerConfig
    committer: GroupCommitter
    maintenance: BackgroundMaintenance
    port: int
    started: float

    def check_password(self, user: str, password: str) -> bool: ...

    def clients(self) -> list[Client]: ...

    def exec_transaction(self, client: Client, queued: Queued) -> Any: ...


# The Redis version whose replies the store reproduces (tests/parity runs against it).
REDIS_COMPAT_VERSION = "7.0.15"


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


# --- connection-level commands -------------------------------------------------------------------------------

# The handler gets the server, the client and the decoded argv.
_Handler = Callable[["Server", Client, list[str]], Any]


@dataclass(frozen=True)
class ConnectionCommand:
    """A connection-level command: its row of the command table (``commands.spec.CommandSpec``: arity,
    subcommands, no keys), its handler, and whether a client may send it before AUTH (Redis' CMD_NO_AUTH)."""

    spec: CommandSpec
    handler: _Handler
    no_auth: bool = False


CONNECTION_COMMANDS: dict[str, ConnectionCommand] = {}


def _connection_command(
    name: str, arity: int, *, subcommands: dict[str, int] | None = None, no_auth: bool = False
) -> Callable[[_Handler], _Handler]:
    spec = CommandSpec(name, arity, subcommands=subcommands or {}, keys=(0, 0, 0))

    def register(handler: _Handler) -> _Handler:
        CONNECTION_COMMANDS[name] = ConnectionCommand(spec, handler, no_auth)
        return handler

    return register


@_connection_command("ping", -1)
def _ping(server: Server, client: Client, argv: list[str]) -> Any:
    if len(argv) > 2:
        raise wrong_arity("ping")
    return Status("PONG") if len(argv) == 1 else argv[1]


@_connection_command("echo", 2)
def _echo(server: Server, client: Client, argv: list[str]) -> Any:
    return argv[1]


@_connection_command("quit", -1, no_auth=True)
def _quit(server: Server, client: Client, argv: list[str]) -> Any:
    raise ClientQuitError


@_connection_command("auth", -2, no_auth=True)
def _auth(server: Server, client: Client, argv: list[str]) -> Any:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 2 and not server.config.requirepass:
        raise ReplyError(NO_PASSWORD_SET)
    user, password = ("default", argv[1]) if len(argv) == 2 else (argv[1], argv[2])
    if not server.check_password(user, password):
        raise ReplyError(WRONGPASS)
    client.authenticated = True
    return OK


@_connection_command("hello", -1, no_auth=True)
def _hello(server: Server, client: Client, argv: list[str]) -> Any:
    protocol = client.protocol
    if len(argv) >= 2:
        try:
            protocol = int(argv[1])
        except ValueError:
            raise ReplyError(PROTOCOL_VERSION_NOT_AN_INTEGER) from None
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
            raise hello_option_syntax(argv[at])
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
def _multi(server: Server, client: Client, argv: list[str]) -> Any:
    client.transaction.begin()
    return OK


@_connection_command("discard", 1)
def _discard(server: Server, client: Client, argv: list[str]) -> Any:
    client.transaction.discard()
    return OK


@_connection_command("watch", -2)
def _watch(server: Server, client: Client, argv: list[str]) -> Any:
    client.transaction.watch(server.store.snapshot(), argv[1:])
    return OK


@_connection_command("unwatch", 1)
def _unwatch(server: Server, client: Client, argv: list[str]) -> Any:
    client.transaction.unwatch()
    return OK


@_connection_command("exec", 1)
def _exec(server: Server, client: Client, argv: list[str]) -> Any:
    return server.exec_transaction(client, client.transaction.take())


@_connection_command("select", 2)
def _select(server: Server, client: Client, argv: list[str]) -> Any:
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


@_connection_command("client", -2, subcommands=_CLIENT_ARITY)
def _client(server: Server, client: Client, argv: list[str]) -> Any:
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
            raise unrecognized_option(argv[2])
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


@_connection_command("command", -1, subcommands=_COMMAND_ARITY)
def _command(server: Server, client: Client, argv: list[str]) -> Any:
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
    return sorted({*COMMANDS, *CONNECTION_COMMANDS})


def _command_info(name: str) -> list[Any]:
    """COMMAND INFO's record: name, arity, flags, first key, last key, key step, ACL categories, tips, key
    specs, subcommands (the last four empty)."""
    if name in CONNECTION_COMMANDS:
        command = CONNECTION_COMMANDS[name]
        spec, flags = command.spec, ["fast", "no-auth" if command.no_auth else "loading"]
    else:
        spec = COMMANDS[name]
        flags = spec.flags
    return [name, spec.arity, [Status(flag) for flag in flags], *spec.keys, [], [], [], []]


_FUNCTION_ARITY = {
    "flush": -2, "list": -2, "stats": 2, "delete": 3, "kill": 2, "load": -3, "dump": 2, "restore": -3, "help": 2,
}  # fmt: skip


@_connection_command("function", -2, subcommands=_FUNCTION_ARITY)
def _function(server: Server, client: Client, argv: list[str]) -> Any:
    """FUNCTION as redis-server answers it with no library loaded; loading one is refused (the store runs
    no scripts). Redis' own test suite starts with FUNCTION FLUSH."""
    sub = check_subcommand(argv, _FUNCTION_ARITY)
    if sub == "flush":
        if len(argv) > 3 or (len(argv) == 3 and argv[2].upper() not in ("ASYNC", "SYNC")):
            raise ReplyError(FUNCTION_FLUSH_MODE)
        return OK
    if sub == "list":
        return []
    if sub == "stats":
        engines = Map((("LUA", Map((("libraries_count", 0), ("functions_count", 0)))),))
        return Map((("running_script", None), ("engines", engines)))
    if sub == "delete":
        raise ReplyError(LIBRARY_NOT_FOUND)
    if sub == "kill":
        raise ReplyError(NOTBUSY)
    raise function_unsupported(argv[1])


@_connection_command("info", -1)
def _info(server: Server, client: Client, argv: list[str]) -> Any:
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
    if everything or "maintenance" in wanted:
        sections.append("# Maintenance\r\n" + "".join(line + "\r\n" for line in server.maintenance.stats.lines()))
    if everything or "keyspace" in wanted:
        keys = server.store.execute("DBSIZE")
        sections.append("# Keyspace\r\n" + (f"db0:keys={keys},expires=0,avg_ttl=0\r\n" if keys else ""))
    return "\r\n".join(sections)

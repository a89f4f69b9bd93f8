"""The command table: one ``CommandSpec`` per data command, as Redis' own command table describes it.

Everything that asks "which commands are there, how many arguments, do they write, do they block" reads
this table: the dispatcher's checks (``commands.validate``), the server's queue-time checks under MULTI,
which commands may join a group commit, and COMMAND INFO's flags and key positions. The server's
connection-level commands (PING, AUTH, CLIENT ...) are rows of the same shape in
``server/connection.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from streamclaim_spark.commands.args import check_arity, check_subcommand


@dataclass(frozen=True)
class CommandSpec:
    """One command as Redis' command table has it.

    Attributes:
        name: The lowercase command name.
        arity: Redis' arity: positive is the exact argc, negative "at least" (the name counts).
        write: Whether the command may write (COMMAND INFO's ``write`` flag, else ``readonly``).
        subcommands: For container commands (XGROUP, XINFO), each lowercase subcommand's own arity.
        payload: Whether field names and values may be any bytes (XADD); every other argument of
            every command must be UTF-8 text, checked before the command runs.
        keys: COMMAND INFO's first key, last key and key step.
        blocking: Whether the command may block (BLOCK): it then never joins a group commit.
    """

    name: str
    arity: int
    write: bool = False
    subcommands: Mapping[str, int] = field(default_factory=dict)
    payload: bool = False
    keys: tuple[int, int, int] = (1, 1, 1)
    blocking: bool = False

    def check(self, argv: Sequence[str]) -> str | None:
        """Redis' checks before a command runs or is queued: its arity, then a container's subcommand
        (unknown, then its own arity). Returns the lowercase subcommand, if any."""
        check_arity(argv, self.arity, self.name)
        if self.subcommands and len(argv) > 1:
            return check_subcommand(argv, self.subcommands)
        return None

    @property
    def flags(self) -> list[str]:
        """COMMAND INFO's flags (the ones clients act on: write or readonly, blocking, movable keys)."""
        flags = ["write" if self.write else "readonly"]
        return [*flags, "blocking", "movablekeys"] if self.blocking else flags


_NO_KEYS = (0, 0, 0)
_ALL_KEYS = (1, -1, 1)

XGROUP_SUBCOMMANDS = {"create": -5, "setid": -5, "destroy": 4, "createconsumer": 5, "delconsumer": 5, "help": 2}
XINFO_SUBCOMMANDS = {"stream": -3, "groups": 3, "consumers": 4, "help": 2}

_TABLE = (
    CommandSpec("xadd", -5, write=True, payload=True),
    CommandSpec("xrange", -4),
    CommandSpec("xrevrange", -4),
    CommandSpec("xlen", 2),
    CommandSpec("xdel", -3, write=True),
    CommandSpec("xtrim", -4, write=True),
    CommandSpec("xsetid", -3, write=True),
    CommandSpec("del", -2, write=True, keys=_ALL_KEYS),
    CommandSpec("exists", -2, keys=_ALL_KEYS),
    CommandSpec("type", 2),
    CommandSpec("dbsize", 1, keys=_NO_KEYS),
    CommandSpec("flushdb", -1, write=True, keys=_NO_KEYS),
    CommandSpec("flushall", -1, write=True, keys=_NO_KEYS),
    CommandSpec("xgroup", -2, write=True, subcommands=XGROUP_SUBCOMMANDS),
    CommandSpec("xinfo", -2, subcommands=XINFO_SUBCOMMANDS),
    CommandSpec("xack", -4, write=True),
    CommandSpec("xackdel", -6, write=True),
    CommandSpec("xdelex", -5, write=True),
    CommandSpec("xnack", -7, write=True),
    CommandSpec("xpending", -3),
    # XREADGROUP writes (it delivers: PEL rows, the group's last ID); its keys follow STREAMS.
    CommandSpec("xreadgroup", -7, write=True, keys=_NO_KEYS, blocking=True),
    CommandSpec("xread", -4, keys=_NO_KEYS, blocking=True),
    CommandSpec("xclaim", -6, write=True),
    CommandSpec("xautoclaim", -6, write=True),
)

COMMANDS: Mapping[str, CommandSpec] = MappingProxyType({spec.name: spec for spec in _TABLE})
"""Every data command the store answers, by lowercase name."""

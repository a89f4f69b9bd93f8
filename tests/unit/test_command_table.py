"""The command table (commands/spec.py) is the one list of data commands: the dispatcher, the server's
checks and COMMAND INFO all read it, so a command cannot be known to one and missing from another."""

from __future__ import annotations

import pytest

from streamclaim_spark import commands
from streamclaim_spark.commands.spec import COMMANDS
from streamclaim_spark.errors import ReplyError
from streamclaim_spark.server import connection


def test_every_command_of_the_table_has_a_handler_and_every_handler_a_row() -> None:
    assert sorted(commands._HANDLERS) == sorted(COMMANDS)


def test_connection_commands_and_data_commands_do_not_share_a_name() -> None:
    assert set(connection.CONNECTION_COMMANDS) & set(COMMANDS) == set()


def test_command_info_reads_arity_flags_and_keys_from_the_table() -> None:
    assert connection._command_info("xreadgroup")[:6] == [
        "xreadgroup",
        -7,
        ["write", "blocking", "movablekeys"],
        0,
        0,
        0,
    ]
    assert connection._command_info("xrange")[:6] == ["xrange", -4, ["readonly"], 1, 1, 1]
    assert connection._command_info("del")[3:6] == [1, -1, 1]
    assert connection._command_info("auth")[:3] == ["auth", -2, ["fast", "no-auth"]]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["XNOPE", "s"], "ERR unknown command 'XNOPE', with args beginning with: 's' "),
        (["XLEN"], "ERR wrong number of arguments for 'xlen' command"),
        (["XGROUP", "NOPE"], "ERR unknown subcommand 'NOPE'. Try XGROUP HELP."),
        (["XINFO", "GROUPS"], "ERR wrong number of arguments for 'xinfo|groups' command"),
    ],
)
def test_validate_gives_redis_errors_from_the_table(argv: list[str], error: str) -> None:
    with pytest.raises(ReplyError) as raised:
        commands.validate(argv)
    assert str(raised.value) == error

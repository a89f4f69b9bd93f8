"""The RESP2 framing of streamclaim-server: request reading, inline splitting, reply encoding (no Spark)."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.config import ServerConfig
from streamclaim_spark.core.config_loader import load_config
from streamclaim_spark.core.replies import OK, Status
from streamclaim_spark.errors import (
    INVALID_BULK_LENGTH,
    INVALID_MULTIBULK_LENGTH,
    TOO_BIG_INLINE,
    UNBALANCED_QUOTES,
    ConfigError,
    ProtocolViolationError,
    unknown_command,
)
from streamclaim_spark.server.wire import (
    RequestLimits,
    RequestReader,
    as_resp3,
    encode_error,
    encode_reply,
    split_inline,
)


def read_all(data: bytes, limits: RequestLimits | None = None, chunk: int = 0) -> list[list[bytes]]:
    """Every request in ``data``, fed whole or ``chunk`` bytes at a time."""
    reader = RequestReader(limits)
    requests = []
    pieces = [data] if not chunk else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        reader.feed(piece)
        while (request := reader.next_request()) is not None:
            requests.append(request)
    return requests


PIPELINE = (
    b"*3\r\n$4\r\nXLEN\r\n$1\r\ns\r\n$0\r\n\r\n"
    b"PING\r\n"
    b"*2\r\n$4\r\nECHO\r\n$5\r\na\r\nb\n\r\n"
    b"\r\n"
    b'ECHO "x y"\n'
    b"*0\r\n"
    b"*1\r\n$4\r\nPING\r\n"
)
PIPELINE_REQUESTS = [[b"XLEN", b"s", b""], [b"PING"], [b"ECHO", b"a\r\nb\n"], [b"ECHO", b"x y"], [b"PING"]]


@pytest.mark.parametrize("chunk", [0, 1, 3, 7])
def test_a_pipeline_mixing_multibulk_and_inline_commands_reads_the_same_in_any_chunking(chunk: int) -> None:
    assert read_all(PIPELINE, chunk=chunk) == PIPELINE_REQUESTS


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"*1\r\nfoo\r\n", "ERR Protocol error: expected '$', got 'f'"),
        (b"*1\r\n:5\r\n", "ERR Protocol error: expected '$', got ':'"),
        (b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n", "ERR Protocol error: expected '$', got '*'"),
        (b"*abc\r\n", INVALID_MULTIBULK_LENGTH),
        (b"*+1\r\n", INVALID_MULTIBULK_LENGTH),
        (b"*1\r\n$abc\r\n", INVALID_BULK_LENGTH),
        (b"*1\r\n$-5\r\n", INVALID_BULK_LENGTH),
        (b"*1\r\n$-1\r\n", INVALID_BULK_LENGTH),
        (b'ECHO "unterminated\r\n', UNBALANCED_QUOTES),
        (b'ECHO "a"b\r\n', UNBALANCED_QUOTES),
        (b"ECHO 'a\r\n", UNBALANCED_QUOTES),
    ],
)
def test_malformed_requests_raise_the_error_redis_sends(data: bytes, line: str) -> None:
    with pytest.raises(ProtocolViolationError) as raised:
        read_all(data)
    assert raised.value.line == line


def test_requests_over_the_limits_are_refused_before_they_are_buffered() -> None:
    limits = RequestLimits(max_bulk_bytes=10, max_arguments=3)
    assert read_all(b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$10\r\n0123456789\r\n", limits) == [[b"a", b"b", b"0123456789"]]
    with pytest.raises(ProtocolViolationError, match="invalid multibulk length"):
        read_all(b"*4\r\n", limits)
    with pytest.raises(ProtocolViolationError, match="invalid bulk length"):
        read_all(b"*2\r\n$1\r\na\r\n$11\r\n01234567890\r\n", limits)
    # A header promising a huge argument is refused once the bytes exceed what the limits allow.
    reader = RequestReader(limits)
    reader.feed(b"*1\r\n$99999\r\n")
    assert reader.next_request() is None
    reader.feed(b"x" * 200)
    with pytest.raises(ProtocolViolationError, match="invalid bulk length"):
        reader.next_request()
    with pytest.raises(ProtocolViolationError) as raised:
        read_all(b"x" * (64 * 1024 + 1))
    assert raised.value.line == TOO_BIG_INLINE


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"XADD s * f v", [b"XADD", b"s", b"*", b"f", b"v"]),
        (b"  ECHO   spaced\t", [b"ECHO", b"spaced"]),
        (b'ECHO "a\\x41\\n\\"b"', [b"ECHO", b'aA\n"b']),
        (b"ECHO 'it\\'s' \"\"", [b"ECHO", b"it's", b""]),
        (b'ECHO a"b c"', [b"ECHO", b"ab c"]),
        (b"ECHO a\0b c", [b"ECHO", b"a"]),
        (b"", []),
    ],
)
def test_inline_commands_split_as_sdssplitargs_splits_them(line: bytes, args: list[bytes]) -> None:
    assert split_inline(line) == args


def test_replies_frame_status_bulk_integer_array_and_both_nil_kinds() -> None:
    assert encode_reply(OK) == b"+OK\r\n"
    assert encode_reply("OK") == b"$2\r\nOK\r\n"
    assert encode_reply(7) == b":7\r\n"
    assert encode_reply(["1-1", ["f", "é"]]) == b"*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$2\r\n\xc3\xa9\r\n"
    assert encode_reply(None, "xadd") == b"$-1\r\n"
    assert encode_reply(None, "xreadgroup") == b"*-1\r\n"
    assert encode_reply(None, "XRANGE") == b"*-1\r\n"
    assert encode_reply([0, None, None, None], "xpending") == b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n"
    history = [["s", [["1-1", None], ["1-2", ["f", "v"]]]]]
    assert encode_reply(history, "xreadgroup") == (
        b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n*2\r\n$3\r\n1-1\r\n*-1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    )
    assert encode_reply(["first-entry", None], "xinfo") == b"*2\r\n$11\r\nfirst-entry\r\n$-1\r\n"
    assert encode_reply([Status("a\r\nb")]) == b"*1\r\n+a  b\r\n"
    assert encode_error("ERR bad\r\nline") == b"-ERR bad  line\r\n"


def test_unknown_command_errors_quote_at_most_128_characters_of_arguments_as_redis_does() -> None:
    line = unknown_command("FOO", ["a" * 100, "b" * 100, "c"]).line
    assert line == f"ERR unknown command 'FOO', with args beginning with: '{'a' * 100}' '{'b' * 25}' "


def test_a_server_bound_beyond_loopback_without_a_password_is_refused(tmp_path: object) -> None:
    assert ServerConfig(bind="::1").bind == "::1"
    assert ServerConfig(bind="0.0.0.0", requirepass="s3cret").requirepass == "s3cret"
    with pytest.raises(ValueError, match=r"bind='0.0.0.0' is not a loopback address and no requirepass is set"):
        ServerConfig(bind="0.0.0.0")
    with pytest.raises(ConfigError, match=r"--bind.*\[server\] bind='10.0.0.5' is not a loopback address"):
        load_config("conf", {("server", "bind"): ("10.0.0.5", "--bind")}, local=False)
    with pytest.raises(ConfigError, match=r"--port: server.port = 70000 must be a TCP port"):
        load_config("conf", {("server", "port"): (70000, "--port")}, local=False)


def test_resp3_sends_xinfo_stream_full_groups_and_their_consumers_as_maps() -> None:
    consumer = ["name", "c", "seen-time", 5, "pel-count", 0, "pending", []]
    group = ["name", "g", "pel-count", 0, "pending", [], "consumers", [consumer]]
    full = ["length", 1, "entries", [["1-1", ["f", "v"]]], "groups", [group]]
    shaped = as_resp3(full, ["XINFO", "STREAM", "s"])
    assert encode_reply(shaped, "xinfo", protocol=3) == (
        b"%3\r\n$6\r\nlength\r\n:1\r\n$7\r\nentries\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
        b"$6\r\ngroups\r\n*1\r\n%4\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\npel-count\r\n:0\r\n$7\r\npending\r\n*0\r\n"
        b"$9\r\nconsumers\r\n*1\r\n%4\r\n$4\r\nname\r\n$1\r\nc\r\n$9\r\nseen-time\r\n:5\r\n$9\r\npel-count\r\n:0\r\n"
        b"$7\r\npending\r\n*0\r\n"
    )
    # RESP2 frames the same value as the flat arrays execute returns.
    assert encode_reply(shaped, "xinfo") == encode_reply(full, "xinfo")
    assert encode_reply(None, "xreadgroup", protocol=3) == b"_\r\n"

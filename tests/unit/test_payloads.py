"""Binary payloads in the pure core: argv decoding, XADD's payload tokens, and reply decoding."""

from __future__ import annotations

import pytest

from streamclaim_spark.commands.args import decode_argv, payload_bytes, require_text
from streamclaim_spark.commands.streams import parse_xadd
from streamclaim_spark.core.replies import OK, decoded, encoded
from streamclaim_spark.errors import PayloadNotTextError, ReplyError

EVERY_BYTE = bytes(range(256))


def test_every_byte_of_a_payload_argument_survives_decoding_and_comes_back_as_bytes() -> None:
    argv = decode_argv([b"XADD", b"s", b"*", EVERY_BYTE, b"", b"\xc3\xa9", b"\xff\x00\xfe"])
    request = parse_xadd(argv)
    assert request.fields == ((EVERY_BYTE, b""), ("\u00e9".encode(), b"\xff\x00\xfe"))
    assert [payload_bytes(token) for token in decode_argv([EVERY_BYTE])] == [EVERY_BYTE]


def test_a_str_argument_with_lone_surrogates_of_its_own_is_refused() -> None:
    with pytest.raises(ReplyError) as raised:
        decode_argv(["XADD", "s", "*", "f", "\udcff"])
    assert str(raised.value) == (
        "ERR argument 4 is not valid UTF-8 text (it holds lone surrogates); pass bytes or well-formed str"
    )


def test_text_arguments_must_be_utf8_and_the_error_names_the_first_that_is_not() -> None:
    argv = decode_argv([b"XADD", b"s\xff", b"*", b"\xff", b"v"])
    with pytest.raises(ReplyError) as raised:
        parse_xadd(argv)
    assert str(raised.value) == (
        "ERR argument 1 is not valid UTF-8: streamclaim-spark keeps keys, group and consumer names, IDs and "
        "options as UTF-8 text; only field names and values may be any bytes"
    )
    require_text(decode_argv([b"XLEN", "caf\u00e9".encode()]))  # UTF-8 names pass


def test_decoded_turns_payloads_into_text_and_leaves_everything_else_alone() -> None:
    reply = [["s", [["1-1", [b"f", b"\xc3\xa9"]], ["1-2", None]]], 7, None, "1-3"]
    assert decoded(reply) == [["s", [["1-1", ["f", "\u00e9"]], ["1-2", None]]], 7, None, "1-3"]
    claim_form = ["1-1", [b"f", b"v"], 1500, 2]  # XREADGROUP ... CLAIM adds idle time and count
    assert decoded(claim_form) == ["1-1", ["f", "v"], 1500, 2]


def test_a_payload_that_is_not_utf8_raises_naming_its_entry_and_showing_its_first_bytes() -> None:
    with pytest.raises(PayloadNotTextError) as raised:
        decoded(["0-0", [["9-9", [b"f", b"\xff" * 20]]], []])
    assert str(raised.value) == (
        "entry 9-9 holds a field name or value that is not valid UTF-8 (b'"
        + "\\xff" * 16
        + "'...); open the store with decode_responses=False, or pass it to execute, to get bytes replies"
    )


def test_bytes_replies_hold_every_text_as_utf8_bytes_and_leave_payloads_numbers_and_nils_alone() -> None:
    reply = ["0-0", [["1-1", [EVERY_BYTE, b""]], ["1-2", None]], ["9-9"], 3, None, OK, "caf\u00e9"]
    assert encoded(reply) == [
        b"0-0",
        [[b"1-1", [EVERY_BYTE, b""]], [b"1-2", None]],
        [b"9-9"],
        3,
        None,
        b"OK",
        "caf\u00e9".encode(),
    ]

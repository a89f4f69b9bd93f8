"""The Redis protocol (RESP2, and RESP3 after HELLO 3) for streamclaim-server: requests in, replies out.

Requests are read as Redis reads them: a frame that starts with ``*`` is a multibulk array of bulk strings,
parsed by hiredis (``hiredis.Reader``, the C parser redis-py uses); anything else is an inline command, one
line split as ``sdssplitargs`` splits it (what redis-cli and telnet send). A request that breaks the
protocol or the server's limits raises ``ProtocolViolationError`` carrying the error line Redis sends before it
drops such a client.

No sockets, no Spark. Replies are ``StreamStore.execute`` values framed for the wire: ``Status`` as ``+``,
other ``str`` as bulk strings, ``int`` as ``:``, lists as arrays, errors as ``-``; under RESP3 the replies
Redis sends as maps are ``%`` maps (``as_resp3``) and nil is ``_``. ``execute`` returns both of Redis' nil kinds as
None; ``encode_reply`` frames each as Redis does for that command (docs/SERVER.md, "Replies").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hiredis

from streamclaim_spark.core.replies import Status
from streamclaim_spark.errors import (
    INVALID_BULK_LENGTH,
    INVALID_MULTIBULK_LENGTH,
    TOO_BIG_INLINE,
    TOO_BIG_MBULK_COUNT,
    UNBALANCED_QUOTES,
    ArgumentTypeError,
    InvalidArgumentError,
    ProtocolViolationError,
    protocol_expected_bulk,
)

# Redis' PROTO_INLINE_MAX_SIZE: the longest inline command, and the longest multibulk header line.
INLINE_MAX_BYTES = 64 * 1024
# A bulk header ("$<len>\r\n") and the CRLF after its payload, at most.
_BULK_OVERHEAD = 24
NULL_BULK = b"$-1\r\n"
NULL_ARRAY = b"*-1\r\n"


@dataclass(frozen=True)
class RequestLimits:
    """Per-request limits: the longest argument (Redis' proto-max-bulk-len) and the most arguments."""

    max_bulk_bytes: int = 64 * 1024 * 1024
    max_arguments: int = 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_bulk_bytes < 1:
            raise InvalidArgumentError(f"max_bulk_bytes={self.max_bulk_bytes}: give a positive number of bytes")
        if self.max_arguments < 1:
            raise InvalidArgumentError(f"max_arguments={self.max_arguments}: give a positive number of arguments")


class RequestReader:
    """Turns the bytes a client sends into commands (lists of byte strings), one at a time.

    ``feed`` adds bytes; ``next_request`` returns the next complete command, None when more bytes are
    needed, or raises ``ProtocolViolationError``. Multibulk frames go to hiredis line by line, so a frame's end
    is always where hiredis' buffer ends and the next request may be inline again, as Redis allows.
    """

    def __init__(self, limits: RequestLimits | None = None) -> None:
        self.limits = limits or RequestLimits()
        self._buffer = bytearray()
        self._reader = hiredis.Reader()
        self._in_frame = False
        self._frame_bytes = 0
        self._frame_budget = 0

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_request(self) -> list[bytes] | None:
        while True:
            if self._in_frame:
                frame = self._continue_frame()
                if frame is None:
                    return None
                return self._checked(frame)
            if not self._buffer:
                return None
            if self._buffer[0] == ord("*"):
                if not self._start_frame():
                    return None
                continue
            request = self._inline()
            if request is None:
                return None
            if request:
                return request
            # An empty line is skipped without a reply, as Redis does.

    def _start_frame(self) -> bool:
        """Checks a multibulk header against the limits; False when it is not all here yet."""
        end = self._buffer.find(b"\r")
        if end < 0:
            if len(self._buffer) > INLINE_MAX_BYTES:
                raise ProtocolViolationError(TOO_BIG_MBULK_COUNT)
            return False
        try:
            count = int(bytes(self._buffer[1:end]).decode("ascii"), 10)
        except (UnicodeDecodeError, ValueError):
            raise ProtocolViolationError(INVALID_MULTIBULK_LENGTH) from None
        if count > self.limits.max_arguments or not bytes(self._buffer[1:end]).lstrip(b"-").isdigit():
            raise ProtocolViolationError(INVALID_MULTIBULK_LENGTH)
        if count <= 0:
            # "*0" and "*-1" are no command at all: Redis skips them without a reply.
            newline = self._buffer.find(b"\n", end)
            if newline < 0:
                return False
            del self._buffer[: newline + 1]
            return True
        self._in_frame = True
        self._frame_bytes = 0
        self._frame_budget = end + 2 + count * (self.limits.max_bulk_bytes + _BULK_OVERHEAD)
        return True

    def _continue_frame(self) -> Any:
        """Feeds hiredis up to the next newline at a time; the frame, or None when more bytes are needed."""
        while True:
            if self._reader.has_data():
                frame = self._gets()
                if frame is not False:
                    self._in_frame = self._reader.has_data()
                    return frame
            if not self._buffer:
                return None
            newline = self._buffer.find(b"\n")
            size = len(self._buffer) if newline < 0 else newline + 1
            self._frame_bytes += size
            if self._frame_bytes > self._frame_budget:
                # Some argument is longer than max_bulk_bytes: refuse before buffering all of it.
                raise ProtocolViolationError(INVALID_BULK_LENGTH)
            self._reader.feed(bytes(self._buffer[:size]))
            del self._buffer[:size]
            frame = self._gets()
            if frame is not False:
                self._in_frame = self._reader.has_data()
                return frame

    def _gets(self) -> Any:
        try:
            return self._reader.gets()
        except hiredis.ProtocolError as error:
            raise ProtocolViolationError(_redis_protocol_error(str(error))) from None

    def _checked(self, frame: Any) -> list[bytes]:
        """A request is an array of bulk strings, each within max_bulk_bytes."""
        if not isinstance(frame, list):
            raise ProtocolViolationError(INVALID_MULTIBULK_LENGTH)
        for item in frame:
            if item is None:
                raise ProtocolViolationError(INVALID_BULK_LENGTH)
            if not isinstance(item, bytes):
                raise ProtocolViolationError(protocol_expected_bulk(_type_byte(item)))
            if len(item) > self.limits.max_bulk_bytes:
                raise ProtocolViolationError(INVALID_BULK_LENGTH)
        return frame

    def _inline(self) -> list[bytes] | None:
        newline = self._buffer.find(b"\n")
        if newline < 0:
            if len(self._buffer) > INLINE_MAX_BYTES:
                raise ProtocolViolationError(TOO_BIG_INLINE)
            return None
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        if line.endswith(b"\r"):
            line = line[:-1]
        args = split_inline(line)
        if len(args) > self.limits.max_arguments:
            raise ProtocolViolationError(INVALID_MULTIBULK_LENGTH)
        return args


def _type_byte(item: object) -> str:
    if isinstance(item, int):
        return ":"
    if isinstance(item, list):
        return "*"
    if isinstance(item, dict):
        return "%"
    if isinstance(item, hiredis.ReplyError):
        return "-"
    return "?"


def _redis_protocol_error(hiredis_message: str) -> str:
    """hiredis' parse error as the error line Redis gives for the same bytes."""
    marker = 'got "'
    if marker in hiredis_message:
        got = hiredis_message.split(marker, 1)[1][:1]
        return protocol_expected_bulk(got)
    return INVALID_BULK_LENGTH


_HEX = "0123456789abcdefABCDEF"
_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("a"): b"\a"}
_SPACE = b" \t\n\v\f\r"
_TOKEN_END = b" \n\r\t\0"


def split_inline(line: bytes) -> list[bytes]:
    """Splits an inline command line exactly as Redis' ``sdssplitargs`` does.

    Words are separated by whitespace; ``"..."`` takes ``\\n \\r \\t \\b \\a \\xHH`` and ``\\<c>`` escapes,
    ``'...'`` takes ``\\'``; a closing quote must end the word. A NUL ends the line, as in C.
    """
    line = line.split(b"\0", 1)[0]
    args: list[bytes] = []
    at = 0
    size = len(line)
    while True:
        while at < size and line[at] in _SPACE:
            at += 1
        if at >= size:
            return args
        word = bytearray()
        in_double = in_single = False
        while True:
            char = line[at] if at < size else 0
            if in_double:
                if char == ord("\\") and at + 3 < size and _is_hex_escape(line, at):
                    word.append(int(line[at + 2 : at + 4], 16))
                    at += 3
                elif char == ord("\\") and at + 1 < size:
                    at += 1
                    word += _ESCAPES.get(line[at], bytes([line[at]]))
                elif char == ord('"'):
                    at = _after_closing_quote(line, at)
                    break
                elif at >= size:
                    raise ProtocolViolationError(UNBALANCED_QUOTES)
                else:
                    word.append(char)
            elif in_single:
                if char == ord("\\") and at + 1 < size and line[at + 1] == ord("'"):
                    at += 1
                    word.append(ord("'"))
                elif char == ord("'"):
                    at = _after_closing_quote(line, at)
                    break
                elif at >= size:
                    raise ProtocolViolationError(UNBALANCED_QUOTES)
                else:
                    word.append(char)
            elif at >= size or char in _TOKEN_END:
                break
            elif char == ord('"'):
                in_double = True
            elif char == ord("'"):
                in_single = True
            else:
                word.append(char)
            at += 1
        args.append(bytes(word))


def _after_closing_quote(line: bytes, at: int) -> int:
    """Where the word goes on after the quote at ``at``, which must end the word (as in sdssplitargs)."""
    if at + 1 < len(line) and line[at + 1] not in _SPACE:
        raise ProtocolViolationError(UNBALANCED_QUOTES)
    return at + 1


def _is_hex_escape(line: bytes, at: int) -> bool:
    return line[at + 1] == ord("x") and chr(line[at + 2]) in _HEX and chr(line[at + 3]) in _HEX


# --- replies -------------------------------------------------------------------------------------------------

# Where a nil is Redis' null *array* (``*-1``) rather than its null bulk (``$-1``), by command and position
# in the reply (a position matches any index where it holds None). Everything else nil is a null bulk.
_NULL_ARRAY_AT: dict[str, tuple[tuple[int | None, ...], ...]] = {
    "xread": ((), (None, 1, None, 1)),
    "xreadgroup": ((), (None, 1, None, 1)),
    "xrange": ((),),
    "xrevrange": ((),),
    "xpending": ((3,),),
}


@dataclass(frozen=True)
class Map:
    """A reply Redis sends as a map: ``%n`` pairs in RESP3, a flat ``[k1, v1, k2, v2 ...]`` array in RESP2."""

    pairs: tuple[tuple[Any, Any], ...]

    @classmethod
    def from_flat(cls, flat: list[Any]) -> Map:
        return cls(tuple(zip(flat[::2], flat[1::2], strict=True)))


def encode_reply(reply: Any, command: str = "", protocol: int = 2) -> bytes:
    """``execute``'s reply as RESP bytes; ``command`` (lowercase) picks each RESP2 nil's kind."""
    parts: list[bytes] = []
    _encode(reply, parts, _null_array_test(command.lower()), (), protocol == 3)
    return b"".join(parts)


def as_resp3(reply: Any, argv: list[str]) -> Any:
    """Marks the parts of ``execute``'s reply that RESP3 sends as maps (Redis' addReplyMapLen sites).

    XREAD/XREADGROUP: stream name -> entries; XINFO STREAM/GROUPS/CONSUMERS: each record (and, with
    FULL, each group and consumer inside it). RESP2 frames a ``Map`` as the flat array it was.
    """
    name = argv[0].lower() if argv else ""
    if name in ("xread", "xreadgroup") and isinstance(reply, list):
        return Map(tuple((key, entries) for key, entries in reply))
    if name != "xinfo" or len(argv) < 2 or not isinstance(reply, list):
        return reply
    sub = argv[1].lower()
    if sub in ("groups", "consumers"):
        return [Map.from_flat(record) for record in reply]
    if sub != "stream":
        return reply
    return Map(tuple((key, _full_stream_part(key, value)) for key, value in Map.from_flat(reply).pairs))


def _full_stream_part(key: Any, value: Any) -> Any:
    """Inside XINFO STREAM FULL: each group is a map, and so is each consumer inside a group."""
    if key != "groups" or not isinstance(value, list):
        return value
    return [
        Map(
            tuple(
                (k, [Map.from_flat(c) for c in v] if k == "consumers" and isinstance(v, list) else v)
                for k, v in Map.from_flat(group).pairs
            )
        )
        for group in value
    ]


def encode_error(line: str) -> bytes:
    """An error reply; newlines in the text become spaces, as Redis sanitizes them."""
    return b"-" + line.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace") + b"\r\n"


_PathTest = Callable[[tuple[int, ...]], bool]


def _null_array_test(command: str) -> _PathTest:
    patterns = _NULL_ARRAY_AT.get(command, ())

    def is_null_array(path: tuple[int, ...]) -> bool:
        return any(
            len(pattern) == len(path) and all(p is None or p == i for p, i in zip(pattern, path, strict=True))
            for pattern in patterns
        )

    return is_null_array


def _encode(value: Any, parts: list[bytes], is_null_array: _PathTest, path: tuple[int, ...], resp3: bool) -> None:
    if value is None:
        parts.append(b"_\r\n" if resp3 else NULL_ARRAY if is_null_array(path) else NULL_BULK)
    elif isinstance(value, Map):
        parts.append((b"%%%d\r\n" % len(value.pairs)) if resp3 else (b"*%d\r\n" % (2 * len(value.pairs))))
        for index, (key, item) in enumerate(value.pairs):
            _encode(key, parts, is_null_array, (*path, 2 * index), resp3)
            _encode(item, parts, is_null_array, (*path, 2 * index + 1), resp3)
    elif isinstance(value, int):
        parts.append(b":%d\r\n" % value)
    elif isinstance(value, Status):
        parts.append(b"+" + value.replace("\r", " ").replace("\n", " ").encode("utf-8") + b"\r\n")
    elif isinstance(value, str):
        data = value.encode("utf-8")
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    elif isinstance(value, bytes | bytearray):
        parts.append(b"$%d\r\n%s\r\n" % (len(value), bytes(value)))
    elif isinstance(value, list | tuple):
        parts.append(b"*%d\r\n" % len(value))
        for index, item in enumerate(value):
            _encode(item, parts, is_null_array, (*path, index), resp3)
    else:
        raise ArgumentTypeError(f"cannot frame a {type(value).__name__} reply as RESP")

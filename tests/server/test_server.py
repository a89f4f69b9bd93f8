"""streamclaim-server against a real redis-server: the same bytes on the wire, the same redis-py results."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import redis

from streamclaim_spark.server import StreamClaimServer
from tests.parity.harness import DEFAULT_TOLERANCE_MS
from tests.redis_server import RedisServer
from tests.server.conftest import STORE_WRITES, RawConnection, encode, variants_per_step

pytestmark = pytest.mark.spark

# Every reply here is deterministic (explicit IDs, no idle times), so both servers must send the same bytes.
FRAMING_SCRIPT: list[tuple[str | bytes, ...]] = [
    ("FLUSHALL",),
    ("PING",),
    ("PING", "hello"),
    ("PING", "a", "b"),
    ("ECHO", "x y"),
    ("XADD", "s", "1-1", "f", "v1"),
    ("XADD", "s", "1-2", "f", "v2", "g", "w"),
    ("XADD", "s", "1-3", "f", "v3"),
    ("XADD", "nokey", "NOMKSTREAM", "*", "f", "v"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "s", "empty", "$"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"),
    ("XDEL", "s", "1-1"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    ("XRANGE", "s", "-", "+", "COUNT", "0"),
    ("XRANGE", "nokey", "-", "+", "COUNT", "0"),
    ("XPENDING", "s", "empty"),
    ("XPENDING", "s", "g"),
    ("XINFO", "STREAM", "s"),
    ("XINFO", "GROUPS", "s"),
    ("XGROUP", "HELP"),
    ("XSETID", "s", "1-5"),
    ("XLEN", "s"),
    ("TYPE", "s"),
    ("TYPE", "nokey"),
    ("EXISTS", "s", "nokey", "s"),
    ("DBSIZE",),
    ("SELECT", "0"),
    ("SELECT", "x"),
    ("CLIENT", "SETNAME", "has space"),
    ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", "svc-1"),
    ("CLIENT", "GETNAME"),
    ("CLIENT", "NOPE"),
    ("AUTH", "pw"),
    # Redis' own test suite starts with FUNCTION FLUSH: answered as a server with no functions loaded.
    ("FUNCTION", "FLUSH"),
    ("FUNCTION", "FLUSH", "ASYNC"),
    ("FUNCTION", "FLUSH", "X"),
    ("FUNCTION", "LIST"),
    ("FUNCTION", "STATS"),
    ("FUNCTION", "DELETE", "lib"),
    ("FUNCTION", "KILL"),
    ("FUNCTION", "NOPE"),
    ("FUNCTION",),
    ("FOO", "a" * 100, "b" * 100, "c"),
    ("XADD", "s"),
    # Binary payloads: every byte value, empty and repeated fields, bytes that are not UTF-8.
    ("XADD", "bin", "1-1", bytes(range(256)), b"\x00\xff", b"", b"", b"dup", b"\xc3\x28", b"dup", b"\x80"),
    ("XADD", "bin", "1-2", b"\xfe", b""),
    ("XGROUP", "CREATE", "bin", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "bin", ">"),
    ("XCLAIM", "bin", "g", "c2", "0", "1-1"),
    ("XAUTOCLAIM", "bin", "g", "c3", "0", "0"),
    ("XREAD", "STREAMS", "bin", "0"),
    ("XREVRANGE", "bin", "+", "-"),
    ("XINFO", "STREAM", "bin"),
    ("DEL", "bin"),
    ("DEL", "s", "nokey"),
    ("EXISTS", "s"),
]


# A write runs once, on one protocol, each command's occurrences alternating between RESP3 and RESP2 (the
# redis-py test starts with RESP2), so both protocols see every write's reply across the two tests while
# each commit is paid once; everything else runs on both (variants_per_step).


def test_a_script_runs_each_write_once_alternating_variants_and_everything_else_in_both() -> None:
    steps = ["XADD", "XRANGE", "XADD", "XCLAIM", "XADD", "PING"]
    assert variants_per_step(steps, STORE_WRITES, (3, 2)) == [(3,), (3, 2), (2,), (3,), (3,), (3, 2)]


def test_replies_are_the_bytes_redis_server_sends_for_the_same_script_in_resp2_and_resp3(
    served: StreamClaimServer, redis_server: RedisServer
) -> None:
    with (
        RawConnection(served.port) as ours2,
        RawConnection(redis_server.port) as theirs2,
        RawConnection(served.port) as ours3,
        RawConnection(redis_server.port) as theirs3,
    ):
        ours3.call("HELLO", "3")
        theirs3.call("HELLO", "3")
        pairs = {2: (ours2, theirs2), 3: (ours3, theirs3)}
        plan = variants_per_step([str(argv[0]).upper() for argv in FRAMING_SCRIPT], STORE_WRITES, (3, 2))
        for argv, protocols in zip(FRAMING_SCRIPT, plan, strict=True):
            for protocol in protocols:
                ours, theirs = pairs[protocol]
                assert ours.call(*argv) == theirs.call(*argv), f"RESP{protocol} reply to {argv!r:.80}"
        inline = b"ECHO \"a\\x41b\" 'c d'\r\nPING\r\n\r\n  PING   x  \n"
        for ours, theirs in pairs.values():
            assert ours.send(inline, replies=3) == theirs.send(inline, replies=3)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"*1\r\nfoo\r\n",
        b"*abc\r\n",
        b"*1\r\n$abc\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n:5\r\n",
        b'ECHO "unterminated\r\n',
        b"PING\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\nx\r\n",
    ],
    ids=["no-bulk-header", "bad-count", "bad-bulk-length", "negative-bulk-length", "integer-arg", "quotes", "after"],
)
def test_malformed_requests_get_the_protocol_error_redis_sends_then_the_connection_closes(
    served: StreamClaimServer, redis_server: RedisServer, request_bytes: bytes
) -> None:
    replies = []
    for port in (served.port, redis_server.port):
        with RawConnection(port, timeout=10) as connection:
            connection.sock.sendall(request_bytes)
            replies.append(connection.until_closed())
    assert replies[0] == replies[1]
    assert b"Protocol error" in replies[0]


class _ClockValue:
    """A clock-dependent value (ms) that equals another within the parity harness's tolerance: the served
    store's clock stands still (tests/server/conftest.py), Redis' moves by the milliseconds the script takes."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ClockValue) and abs(self.ms - other.ms) <= DEFAULT_TOLERANCE_MS

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<clock {self.ms} ms, ±{DEFAULT_TOLERANCE_MS}>"


def _normalized(value: Any) -> Any:
    """redis-py's parsed replies with clock values (idle, delivery times) compared within the tolerance.

    XINFO CONSUMERS' ``inactive`` (Redis 7.2, which the store also returns; the reference is 7.0) is dropped.
    """
    clock_keys = {"idle", "time_since_delivered", "seen-time", "active-time"}
    if isinstance(value, dict):
        return {
            k: (_ClockValue(v) if k in clock_keys and isinstance(v, int) else _normalized(v))
            for k, v in value.items()
            if k != "inactive"
        }
    if isinstance(value, list | tuple):
        return type(value)(_normalized(v) for v in value)
    return value


# redis-py's stream methods, each a (method, call) pair; writes are the methods that change the stores.
REDIS_PY_WRITES = frozenset(
    {"flushall", "xadd", "xgroup_create", "xreadgroup", "xclaim", "xautoclaim", "xack", "xdel", "xtrim"}
    | {"xgroup_delconsumer", "xgroup_destroy", "delete"}
)
REDIS_PY_SCRIPT: list[tuple[str, Callable[[redis.Redis], Any]]] = [
    ("flushall", lambda c: c.flushall()),
    ("xadd", lambda c: c.xadd("orders", {"item": "a"}, id="1-1")),
    ("xadd", lambda c: c.xadd("orders", {"item": "b", "qty": "2"}, id="1-2")),
    ("xadd", lambda c: c.xadd("orders", {"item": "c"}, id="2-1")),
    ("xadd", lambda c: c.xadd("orders", {"item": "d"}, id="1-0")),
    ("xgroup_create", lambda c: c.xgroup_create("orders", "billing", id="0")),
    ("xgroup_create", lambda c: c.xgroup_create("missing", "billing", id="0")),
    ("xgroup_create", lambda c: c.xgroup_create("fresh", "billing", id="$", mkstream=True)),
    ("xreadgroup", lambda c: c.xreadgroup("billing", "alice", {"orders": ">"}, count=2)),
    ("xreadgroup", lambda c: c.xreadgroup("billing", "bob", {"orders": ">"})),
    ("xreadgroup", lambda c: c.xreadgroup("billing", "bob", {"orders": ">"}, block=50)),
    ("xreadgroup", lambda c: c.xreadgroup("nogroup", "bob", {"orders": ">"})),
    ("xpending", lambda c: c.xpending("orders", "billing")),
    ("xpending_range", lambda c: c.xpending_range("orders", "billing", min="-", max="+", count=10)),
    ("xpending_range", lambda c: c.xpending_range("orders", "billing", min="-", max="+", count=10, consumername="bob")),
    ("xclaim", lambda c: c.xclaim("orders", "billing", "carol", min_idle_time=0, message_ids=["1-1"])),
    ("xclaim", lambda c: c.xclaim("orders", "billing", "carol", min_idle_time=0, message_ids=["1-2"], justid=True)),
    ("xclaim", lambda c: c.xclaim("orders", "billing", "carol", min_idle_time=3_600_000, message_ids=["2-1"])),
    ("xautoclaim", lambda c: c.xautoclaim("orders", "billing", "dave", min_idle_time=0, start_id="0-0", count=1)),
    ("xautoclaim", lambda c: c.xautoclaim("orders", "billing", "dave", min_idle_time=0, start_id="2-0", justid=True)),
    ("xack", lambda c: c.xack("orders", "billing", "1-1", "9-9")),
    ("xinfo_stream", lambda c: c.xinfo_stream("orders")),
    ("xinfo_groups", lambda c: c.xinfo_groups("orders")),
    ("xinfo_consumers", lambda c: c.xinfo_consumers("orders", "billing")),
    ("xrange", lambda c: c.xrange("orders", min="1-2", max="+")),
    ("xrevrange", lambda c: c.xrevrange("orders", max="+", min="-", count=2)),
    ("xdel", lambda c: c.xdel("orders", "1-2")),
    ("xtrim", lambda c: c.xtrim("orders", maxlen=1, approximate=False)),
    ("xlen", lambda c: c.xlen("orders")),
    ("xgroup_delconsumer", lambda c: c.xgroup_delconsumer("orders", "billing", "dave")),
    ("xgroup_destroy", lambda c: c.xgroup_destroy("orders", "billing")),
    ("exists", lambda c: c.exists("orders", "fresh", "missing")),
    ("type", lambda c: c.type("orders")),
    ("delete", lambda c: c.delete("orders", "fresh")),
    ("dbsize", lambda c: c.dbsize()),
]


def _redis_py_outcomes(clients: dict[int, redis.Redis]) -> list[Any]:
    """Each step's outcome on each protocol it runs on (``variants_per_step``, writes starting on RESP2)."""
    plan = variants_per_step([method for method, _ in REDIS_PY_SCRIPT], REDIS_PY_WRITES, (2, 3))
    outcomes: list[Any] = []
    for (method, call), protocols in zip(REDIS_PY_SCRIPT, plan, strict=True):
        for protocol in protocols:
            try:
                outcomes.append((method, protocol, _normalized(call(clients[protocol]))))
            except redis.ResponseError as error:
                outcomes.append((method, protocol, f"error: {error}"))
    return outcomes


def test_redis_py_stream_methods_give_what_they_give_against_redis_server_in_resp2_and_resp3(
    served: StreamClaimServer, redis_server: RedisServer
) -> None:
    theirs = {p: redis.Redis(port=redis_server.port, decode_responses=True, protocol=p) for p in (2, 3)}
    ours = {p: redis.Redis(port=served.port, decode_responses=True, protocol=p, socket_timeout=120) for p in (2, 3)}
    try:
        expected = _redis_py_outcomes(theirs)
        actual = _redis_py_outcomes(ours)
    finally:
        for client in (*theirs.values(), *ours.values()):
            client.close()
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        assert got == want, f"step {index}"


def test_auth_is_required_as_redis_requires_it_when_a_password_is_set(
    served: StreamClaimServer, redis_server: RedisServer
) -> None:
    guarded = StreamClaimServer(served.store, _with_password(served, "s3cret")).start()
    with RawConnection(redis_server.port) as admin:
        admin.call("CONFIG", "SET", "requirepass", "s3cret")
    try:
        script: list[tuple[str, ...]] = [
            ("PING",),
            ("XLEN", "s"),
            ("XLEN",),
            ("FOO",),
            ("HELLO", "2"),
            ("AUTH", "wrong"),
            ("AUTH", "bob", "s3cret"),
            ("AUTH", "a", "b", "c"),
            ("HELLO", "2", "AUTH", "default", "wrong"),
            ("AUTH", "s3cret"),
            ("PING",),
            ("XLEN", "s"),
        ]
        with RawConnection(guarded.port) as ours, RawConnection(redis_server.port) as theirs:
            for argv in script:
                assert ours.call(*argv) == theirs.call(*argv), f"reply to {' '.join(argv)}"
        with RawConnection(guarded.port) as ours:
            assert ours.call("AUTH", "default", "s3cret") == b"+OK\r\n"
            assert ours.call("HELLO", "4") == b"-NOPROTO unsupported protocol version\r\n"
            hello = ours.call("HELLO", "3", "SETNAME", "svc")
            assert hello.startswith(b"%7\r\n") and b"$6\r\n7.0.15\r\n" in hello and b"$5\r\nproto\r\n:3\r\n" in hello
            assert ours.call("CLIENT", "GETNAME") == b"$3\r\nsvc\r\n"
            # One store is one database (docs/SERVER.md).
            assert ours.call("SELECT", "1") == b"-ERR DB index is out of range\r\n"
    finally:
        guarded.stop(grace_s=5)
        with RawConnection(redis_server.port) as admin:
            admin.call("AUTH", "s3cret")
            admin.call("CONFIG", "SET", "requirepass", "")


def _with_password(server: StreamClaimServer, password: str) -> Any:
    return replace(server.config, port=0, requirepass=password)


def test_fifty_clients_on_one_stream_and_group_share_commits_and_every_entry_is_delivered_once(
    served: StreamClaimServer,
) -> None:
    """50 connections at once on one stream and one group, two rounds each of XADD, XREADGROUP and
    XACK of what they got: group commit gathers their commands into shared commits (before it, each
    command was a commit of its own and the writers retried against each other for minutes). Every
    entry is delivered to exactly one consumer, every reply reaches its client, and the PEL ends empty.
    """
    clients, rounds = 50, 2
    served.store.execute("XGROUP", "CREATE", "shared", "workers", "$", "MKSTREAM")
    before = _batch_stats(served)
    added: dict[int, list[str]] = {}
    delivered: dict[int, list[str]] = {}
    failures: list[BaseException] = []
    start = threading.Barrier(clients)

    def work(worker: int) -> None:
        try:
            with redis.Redis(port=served.port, decode_responses=True, socket_timeout=600) as client:
                client.ping()
                start.wait()
                added[worker], delivered[worker] = [], []
                for _ in range(rounds):
                    added[worker].append(client.xadd("shared", {"worker": str(worker)}))
                    got = client.xreadgroup("workers", f"c{worker}", {"shared": ">"}, count=10)
                    ids = [entry_id for _, entries in got for entry_id, _ in entries]
                    delivered[worker] += ids
                    if ids:
                        assert client.xack("shared", "workers", *ids) == len(ids)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with redis.Redis(port=served.port, decode_responses=True) as admin:
        rest = [i for _, entries in admin.xreadgroup("workers", "drain", {"shared": ">"}) for i, _ in entries]
        if rest:
            admin.xack("shared", "workers", *rest)
        everything_added = sorted(i for ids in added.values() for i in ids)
        everything_delivered = sorted([*rest, *(i for ids in delivered.values() for i in ids)])
        assert len(everything_added) == clients * rounds == admin.xlen("shared")
        assert everything_delivered == everything_added  # each entry to exactly one consumer
        assert admin.xpending("shared", "workers")["pending"] == 0
    after = _batch_stats(served)
    commands = after["batched_commands"] - before["batched_commands"]
    batches = after["batches"] - before["batches"]
    assert commands >= clients * rounds * 2
    assert batches < commands / 2, f"{commands} commands took {batches} commits: group commit did not gather them"


def _batch_stats(server: StreamClaimServer) -> dict[str, float]:
    with redis.Redis(port=server.port, decode_responses=True) as client:
        return {key: float(value) for key, value in client.info("batches").items()}


def test_random_bytes_and_broken_frames_neither_crash_nor_hang_the_server(served: StreamClaimServer) -> None:
    rng = random.Random(20261123)
    valid = [encode(("PING",)), encode(("ECHO", "hello")), b"PING\r\n", encode(("CLIENT", "SETNAME", "x"))]
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(60)]
    for _ in range(60):
        frame = bytearray(rng.choice(valid))
        for _ in range(rng.randrange(1, 4)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        samples.append(bytes(frame[: rng.randrange(1, len(frame) + 1)]))
    with RawConnection(served.port) as bystander:
        for sample in samples:
            with RawConnection(served.port, timeout=10) as connection:
                connection.sock.sendall(sample)
                connection.sock.shutdown(1)  # EOF: a truncated frame must not keep the server waiting
                connection.until_closed()
        assert bystander.call("PING") == b"+PONG\r\n"
        assert bystander.call("ECHO", "still here") == b"$10\r\nstill here\r\n"
    deadline = time.monotonic() + 10
    while served.clients() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.clients() == [], "connection threads outlived their clients"


def test_a_client_over_max_clients_gets_redis_error_and_the_others_are_served(served: StreamClaimServer) -> None:
    limited = StreamClaimServer(served.store, replace(served.config, port=0, max_clients=2)).start()
    try:
        with RawConnection(limited.port) as first, RawConnection(limited.port) as second:
            assert first.call("PING") == second.call("PING") == b"+PONG\r\n"
            with RawConnection(limited.port, timeout=10) as third:
                assert third.until_closed() == b"-ERR max number of clients reached\r\n"
            assert first.call("ECHO", "served") == b"$6\r\nserved\r\n"
        deadline = time.monotonic() + 10
        while limited.clients() and time.monotonic() < deadline:
            time.sleep(0.05)
        with RawConnection(limited.port) as later:
            assert later.call("PING") == b"+PONG\r\n"
    finally:
        limited.stop(grace_s=5)


def test_info_server_names_the_store_and_its_writer_mode(served: StreamClaimServer) -> None:
    with RawConnection(served.port) as connection:
        reply = connection.call("INFO", "server").decode()
    assert f"\r\nstore_path:{served.store.path}\r\nstore_writer_mode:multi-writer\r\n" in reply
    assert reply.startswith("$") and "\r\ntcp_port:" in reply


def test_the_server_maintains_its_store_in_the_background_and_info_shows_the_last_run(
    served: StreamClaimServer,
) -> None:
    config = replace(served.config, port=0, maintain_every_ms=1000, maintain_after_batches=1)
    maintained = StreamClaimServer(served.store, config).start()
    try:
        with redis.Redis(port=maintained.port, decode_responses=True, socket_timeout=600) as client:
            assert client.info("maintenance")["maintenance_runs"] == 0
            client.xadd("maintained", {"f": "v"})
            deadline = time.monotonic() + 300
            while client.info("maintenance")["maintenance_last_status"] == "none" and time.monotonic() < deadline:
                time.sleep(0.2)
            info = client.info("maintenance")
    finally:
        maintained.stop(grace_s=10)
    assert {key: info[key] for key in ("maintenance_enabled", "maintenance_every", "maintenance_runs")} == {
        "maintenance_enabled": 1,
        "maintenance_every": "1s",
        "maintenance_runs": 1,
    }
    assert (info["maintenance_last_status"], info["maintenance_history_retention"]) == ("ok", "tables")
    assert info["maintenance_last_started_unix"] > 0 and info["maintenance_failed"] == 0


# (connection, argv): connection 1 is a second client, e.g. one that changes a key another one WATCHes.
TRANSACTION_SCRIPT: list[tuple[int, tuple[str, ...]]] = [
    (0, ("FLUSHALL",)),
    (0, ("EXEC",)),
    (0, ("DISCARD",)),
    (0, ("UNWATCH",)),
    (0, ("MULTI",)),
    (0, ("MULTI",)),
    (0, ("XADD", "s", "5-0", "f", "v")),
    (0, ("XADD", "s", "1-0", "f", "v")),
    (0, ("XLEN", "s")),
    (0, ("PING",)),
    (0, ("ECHO", "e")),
    (0, ("SELECT", "x")),
    (0, ("EXEC",)),
    # Refused while queuing: the whole transaction is discarded.
    (0, ("MULTI",)),
    (0, ("XADD", "s", "6-0", "f", "v")),
    (0, ("FOO", "bar")),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("XLEN", "s")),
    (0, ("MULTI",)),
    (0, ("XADD", "s")),
    (0, ("EXEC",)),
    (0, ("MULTI",)),
    (0, ("XGROUP", "NOPE", "s")),
    (0, ("EXEC",)),
    (0, ("MULTI",)),
    (0, ("XGROUP", "CREATE", "s")),
    (0, ("EXEC",)),
    (0, ("MULTI",)),
    (0, ("CLIENT", "NOPE")),
    (0, ("EXEC",)),
    (0, ("MULTI",)),
    (0, ("XADD", "s", "7-0", "f", "v")),
    (0, ("DISCARD",)),
    (0, ("XLEN", "s")),
    (0, ("MULTI",)),
    (0, ("WATCH", "s")),
    (0, ("EXEC",)),
    # Blocking reads inside MULTI answer at once; runtime errors stay in their place.
    (0, ("MULTI",)),
    (0, ("XGROUP", "CREATE", "s", "g", "0")),
    (0, ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "1000", "STREAMS", "s", ">")),
    (0, ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")),
    (0, ("XREAD", "BLOCK", "0", "STREAMS", "s", "$")),
    (0, ("XACK", "s", "g", "1-0")),
    (0, ("XPENDING", "s", "g")),
    (0, ("XCLAIM", "s", "g", "c2", "0", "5-0", "JUSTID")),
    (0, ("XGROUP", "CREATE", "s", "g", "0")),
    (0, ("XREADGROUP", "GROUP", "nogroup", "c", "STREAMS", "s", ">")),
    (0, ("XINFO", "GROUPS", "s")),
    (0, ("EXEC",)),
    # WATCH: a change to the entries of a watched stream, by anyone, makes EXEC reply nil.
    (0, ("WATCH", "s", "t")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (0, ("XADD", "s", "8-0", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XADD", "s", "9-0", "f", "v")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (1, ("XADD", "s", "9-0", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (1, ("XDEL", "s", "1-1")),
    (1, ("XGROUP", "SETID", "s", "g", "0")),
    (1, ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")),
    (1, ("XSETID", "s", "10-0")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (1, ("XDEL", "s", "9-0")),
    (0, ("MULTI",)),
    (0, ("EXEC",)),
    (0, ("WATCH", "nokey")),
    (1, ("XADD", "nokey", "1-1", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XLEN", "nokey")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (0, ("UNWATCH",)),
    (1, ("XADD", "s", "11-0", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (0, ("MULTI",)),
    (0, ("DISCARD",)),
    (1, ("XADD", "s", "12-0", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (1, ("DEL", "s")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
]


# RESP3 frames differently only nil (EXEC's null array is `_`) and maps (XREADGROUP, XINFO): its script is
# the steps with those replies; every other reply is framed as in RESP2.
RESP3_TRANSACTION_SCRIPT = [
    (0, ("FLUSHALL",)),
    (0, ("MULTI",)),
    (0, ("XADD", "s", "1-0", "f", "v")),
    (0, ("XGROUP", "CREATE", "s", "g", "0")),
    (0, ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")),
    (0, ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")),
    (0, ("XINFO", "GROUPS", "s")),
    (0, ("XADD", "s", "1-0", "f", "v")),
    (0, ("EXEC",)),
    (0, ("WATCH", "s")),
    (1, ("XADD", "s", "2-0", "f", "v")),
    (0, ("MULTI",)),
    (0, ("XLEN", "s")),
    (0, ("EXEC",)),
]


@pytest.mark.parametrize("protocol", [2, 3])
def test_transactions_get_the_bytes_redis_server_sends(
    served: StreamClaimServer, redis_server: RedisServer, protocol: int
) -> None:
    with (
        RawConnection(served.port) as ours,
        RawConnection(served.port) as ours_other,
        RawConnection(redis_server.port) as theirs,
        RawConnection(redis_server.port) as theirs_other,
    ):
        if protocol == 3:
            ours.call("HELLO", "3")
            theirs.call("HELLO", "3")
        pairs = ((ours, theirs), (ours_other, theirs_other))
        script = TRANSACTION_SCRIPT if protocol == 2 else RESP3_TRANSACTION_SCRIPT
        for step, (connection, argv) in enumerate(script):
            mine, reference = pairs[connection]
            assert mine.call(*argv) == reference.call(*argv), f"step {step}: reply to {argv!r:.80}"


def _info(connection: RawConnection, section: str) -> dict[str, str]:
    """INFO ``section``'s fields, as the server sent them."""
    lines = connection.call("INFO", section).decode().split("\r\n")
    return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("$"))


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Returns once ``condition()`` holds; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout_s:g} s")
        time.sleep(0.02)


def _batched_commands(connection: RawConnection) -> int:
    """How many commands streamclaim-server's group commits have run (INFO batches)."""
    return int(_info(connection, "batches")["batched_commands"])


def _wait_until_blocked(server_port: int, other: RawConnection, readers: int, batched_before: int | None) -> None:
    """Waits until ``readers`` clients are blocked in a read: on redis-server, INFO clients' ``blocked_clients``;
    on streamclaim-server (``batched_before`` given), each reader's first pass has run in a group commit (its
    client then polls the store, and anything committed later, a DEL or an XADD, is what it sees), and
    CLIENT LIST shows the readers in their command."""
    if batched_before is None:
        _wait_until(lambda: int(_info(other, "clients")["blocked_clients"]) == readers, f"{readers} client(s) blocked")
        return

    def blocked() -> bool:
        reading = other.call("CLIENT", "LIST").count(b" cmd=xreadgroup\n")
        return reading == readers and _batched_commands(other) - batched_before >= readers

    _wait_until(blocked, f"{readers} reader(s) past their first pass on port {server_port}")


@pytest.mark.parametrize("removal", [("DEL", "s"), ("XGROUP", "DESTROY", "s", "g")], ids=["del", "destroy"])
def test_a_blocked_xreadgroup_whose_stream_or_group_goes_away_gets_redis_unblocking_error(
    served: StreamClaimServer, redis_server: RedisServer, removal: tuple[str, ...]
) -> None:
    replies = []
    for port in (served.port, redis_server.port):
        with RawConnection(port) as blocked, RawConnection(port) as other:
            other.call("FLUSHALL")
            other.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
            before = _batched_commands(other) if port == served.port else None
            blocked.sock.sendall(encode(("XREADGROUP", "GROUP", "g", "c", "BLOCK", "60000", "STREAMS", "s", ">")))
            _wait_until_blocked(port, other, 1, before)
            other.call(*removal)
            replies.append(blocked.send(b"", replies=1)[0])
    assert replies[0] == replies[1]


def test_blocked_readers_of_one_group_are_served_in_shared_batches_when_entries_arrive(
    served: StreamClaimServer,
) -> None:
    readers = 6
    served.store.execute("XGROUP", "CREATE", "blocked", "g", "$", "MKSTREAM")
    before = _batch_stats(served)
    got: dict[int, Any] = {}

    def read(n: int) -> None:
        with redis.Redis(port=served.port, decode_responses=True, socket_timeout=600) as client:
            got[n] = client.xreadgroup("g", f"c{n}", {"blocked": ">"}, count=1, block=120_000)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(readers)]
    for thread in threads:
        thread.start()
    with RawConnection(served.port) as other:
        _wait_until_blocked(served.port, other, readers, int(before["batched_commands"]))
    with redis.Redis(port=served.port, decode_responses=True, socket_timeout=600) as writer:
        pipe = writer.pipeline(transaction=False)
        for n in range(readers):
            pipe.xadd("blocked", {"n": str(n)})
        added = pipe.execute()
    for thread in threads:
        thread.join()

    delivered = sorted(entries[0][0] for reply in got.values() for _, entries in reply)
    assert delivered == sorted(added)  # each entry to exactly one blocked reader
    after = _batch_stats(served)
    # The readers' first passes, the writer's pipeline and the reads after it: fewer batches than passes.
    assert after["batched_commands"] - before["batched_commands"] >= 2 * readers + 1
    assert after["batches"] - before["batches"] < 2 * readers + 1

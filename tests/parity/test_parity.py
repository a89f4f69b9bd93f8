"""Every scripted scenario, run on a real redis-server and on the store: the outcomes must be equal.

redis-server runs every step of every scenario. The store starts each scenario from a copy of the
template store that already ran its longest shared prefix (``fixtures.shared_prefixes``; the template's
own outcomes stand in for those steps and are compared like the rest), so ~300 of the ~1,160 store steps
and every table creation run once instead of per scenario.

Templates and copies run on one clock reading, ``START_MS``, that stands still (``ManualClock``; a ``Pause``
moves it): redis-server runs a scenario in milliseconds, so its idle times are ~0, and a store command takes
a second or two of Spark work, so on the wall clock the store's would grow by that much per step (the 30 s
tolerance these tests once needed). Standing still, they are exactly what the store's logic makes of them,
and are compared at the harness's tolerance (1.5 s, DEFAULT_TOLERANCE_MS).

``SHAPE_ONLY_SCENARIOS`` add entries with ``*``: the IDs each side generates from its own clock cannot be
equal, so each is replaced, on each side, by its rank among the IDs that side generated (``<id 0>``,
``<id 1>``, ...); everything else, and which ID stands where, must still be equal.

The store returns Redis 7.2's extra consumer fields (XINFO CONSUMERS ``inactive``, XINFO STREAM FULL
``active-time``) beside 7.0's; against a 7.0 server they are dropped before comparing. XINFO STREAM's
``radix-tree-*`` sizes describe Redis' memory encoding and are taken from the server's reply.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from streamclaim_spark import StreamStore
from streamclaim_spark.core.placement import Force, placed
from streamclaim_spark.store import wall_clock_ms
from tests.clock import ManualClock
from tests.conftest import StoreFactory
from tests.fixtures import PrefixTemplates, TemplateStores, shared_prefixes
from tests.parity.harness import Outcome, Pause, Step, assert_same_outcomes, run_on
from tests.parity.scenarios import SCENARIOS, SHAPE_ONLY_SCENARIOS
from tests.resp import RespClient

RADIX_FIELDS = ("radix-tree-keys", "radix-tree-nodes")

EXACT_SCENARIOS = sorted(SCENARIOS)


def _pairs(record: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(record[0::2], record[1::2], strict=True))


def _drop_fields(record: Any, names: tuple[str, ...]) -> Any:
    if not isinstance(record, list) or len(record) % 2:
        return record
    return [item for key, value in _pairs(record) if key not in names for item in (key, value)]


def _like_server(step: Step, expected: Outcome, actual: Outcome) -> Outcome:
    """Reshapes the store's reply where it legitimately differs from a 7.0 server's (module docstring)."""
    if not isinstance(step, tuple) or len(step) < 2 or actual.error is not None or expected.error is not None:
        return actual
    command, sub = step[0].lower(), step[1].lower()
    reply, server = actual.reply, expected.reply
    if command != "xinfo" or not isinstance(reply, list) or not isinstance(server, list):
        return actual
    if sub == "consumers":
        reply = [_drop_fields(record, ("inactive",)) for record in reply]
    elif sub == "stream":
        server_fields = dict(_pairs(server)) if len(server) % 2 == 0 else {}
        fields: list[Any] = []
        for key, value in _pairs(reply):
            if key in RADIX_FIELDS and key in server_fields:
                value = server_fields[key]
            if key == "groups" and isinstance(value, list):
                value = [_without_active_time(group) for group in value]
            fields.extend((key, value))
        reply = fields
    return Outcome(reply, None, actual.started_ms, actual.finished_ms)


def _without_active_time(group: Any) -> Any:
    if not isinstance(group, list) or len(group) % 2:
        return group
    fields: list[Any] = []
    for key, value in _pairs(group):
        if key == "consumers" and isinstance(value, list):
            value = [_drop_fields(consumer, ("active-time",)) for consumer in value]
        fields.extend((key, value))
    return fields


Prefix = tuple[Step, ...]


def _templatable(step: Step) -> bool:
    """A pause times the run itself, so it never enters a template."""
    return not isinstance(step, Pause)


PREFIXES: dict[Prefix, Prefix] = shared_prefixes(SCENARIOS, templatable=_templatable)


def _run_on_store(store: StreamStore, _: object, steps: Sequence[Step]) -> list[Outcome]:
    return run_on(store, steps)


# Where every store clock of the module stands (templates' and copies'): prefixes hold no pause, so the state
# after any prefix was made at this moment, and a copy's scenario continues from it.
START_MS = wall_clock_ms()


@pytest.fixture(scope="module")
def prefix_stores(templates: TemplateStores) -> PrefixTemplates[Step, Outcome]:
    return PrefixTemplates(templates, PREFIXES, "parity", _run_on_store, clock_after=lambda _: ManualClock(START_MS))


# Each scenario runs with each form of the store's work forced (core/placement.py): on the driver
# (pyarrow, transactions of files), the form every store takes, and in Spark (queries, Spark writes,
# MERGEs), the form Spark Connect and big work take. Both must answer as redis-server does. The Spark
# form costs ~5x the driver's (a MERGE per write, a query per read): every scenario on both forms keeps one
# process on this file ~11 minutes, so the test command runs it on every SPARK_FORM_EVERY-th scenario (and
# test_batches.py every scenario, batched) and
# STREAMCLAIM_PARITY_SPARK=all on every one (docs/TESTING.md, "Both forms").
FORMS = ("driver", "spark")
SPARK_FORM_EVERY = 6


def with_forms(names: Sequence[str]) -> list[Any]:
    """(name, form) for every name with the driver form, and the Spark form for the slice it runs on."""
    every = 1 if os.environ.get("STREAMCLAIM_PARITY_SPARK") == "all" else SPARK_FORM_EVERY
    return [
        pytest.param(name, form, id=f"{name}-{form}")
        for index, name in enumerate(names)
        for form in FORMS
        if form == "driver" or index % every == 0
    ]


@pytest.mark.spark
@pytest.mark.parametrize(("name", "form"), with_forms(EXACT_SCENARIOS))
def test_store_replies_like_redis(
    name: str, form: Force, redis: RespClient, prefix_stores: PrefixTemplates[Step, Outcome]
) -> None:
    steps = SCENARIOS[name]
    expected = run_on(redis, steps)
    with placed(force=form):
        actual = prefix_stores.run(steps)
    actual = [_like_server(step, e, a) for step, e, a in zip(steps, expected, actual, strict=True)]
    assert_same_outcomes(steps, expected, actual)


_ID = re.compile(r"(\d+)-(\d+)")
_DAY_MS = 86_400_000


def _generated_ids_ranked(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes with every ID generated from the clock (its time part within a day of the step) as
    ``<id n>``, n its rank among all such IDs of the run (module docstring)."""

    def near(ms: int, outcome: Outcome) -> bool:
        return abs(ms - outcome.started_ms) < _DAY_MS

    def walk(value: object, outcome: Outcome) -> Iterator[str]:
        if isinstance(value, list):
            for item in value:
                yield from walk(item, outcome)
        elif isinstance(value, str) and (found := _ID.fullmatch(value)) and near(int(found[1]), outcome):
            yield value

    ids = {found for outcome in outcomes for found in walk(outcome.reply, outcome)}
    in_order = sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    rank = {found: f"<id {n}>" for n, found in enumerate(in_order)}

    def ranked(value: object) -> object:
        if isinstance(value, list):
            return [ranked(item) for item in value]
        return rank.get(value, value) if isinstance(value, str) else value

    return [Outcome(ranked(o.reply), o.error, o.started_ms, o.finished_ms) for o in outcomes]


@pytest.mark.spark
@pytest.mark.parametrize(("name", "form"), with_forms(sorted(SHAPE_ONLY_SCENARIOS)))
def test_store_replies_like_redis_up_to_generated_ids(
    name: str, form: Force, redis: RespClient, prefix_stores: PrefixTemplates[Step, Outcome]
) -> None:
    steps = SHAPE_ONLY_SCENARIOS[name]
    expected = run_on(redis, steps)
    with placed(force=form):
        actual = prefix_stores.run(steps)
    actual = [_like_server(step, e, a) for step, e, a in zip(steps, expected, actual, strict=True)]
    assert_same_outcomes(steps, _generated_ids_ranked(expected), _generated_ids_ranked(actual))


# Binary payloads sent as bytes, as a client library sends them: every byte value, empty and repeated
# fields, bytes that are not UTF-8, and the errors that still come first.
BINARY_STEPS: list[Step] = [
    ("XADD", "bin", "1-1", bytes(range(256)), b"\x00\xff", b"", b"", b"dup", b"\xc3\x28", b"dup", b"\x80"),
    ("XADD", "bin", "1-2", "caf\u00e9".encode(), b"\xf0\x9f\x98\x80", b"\xff", b"v"),
    ("XADD", "bin", "1-3", b"\xff"),
    ("XADD", "bin", b"\xff", b"f", b"v"),
    ("XADD", "bin", "1-1", b"\xfe", b"v"),
    ("XGROUP", "CREATE", "bin", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "bin", ">"),
    ("XCLAIM", "bin", "g", "c2", "0", "1-1", "1-2"),
    ("XAUTOCLAIM", "bin", "g", "c3", "0", "0", "COUNT", "1"),
    ("XRANGE", "bin", "-", "+"),
    ("XINFO", "STREAM", "bin"),
]


class _AsRespClientSees:
    """The store with bytes replies, shaped as the raw RESP client shapes bulk strings: ``str`` when
    they are UTF-8, ``bytes`` when not (tests/resp.py)."""

    def __init__(self, store: StreamStore) -> None:
        self.store = store
        self.clock = store.clock  # the harness times the store on its own clock

    def execute(self, *argv: str | bytes) -> object:
        return self._shaped(self.store.resp_reply(*argv))

    def _shaped(self, reply: Any) -> Any:
        if isinstance(reply, list):
            return [self._shaped(item) for item in reply]
        if isinstance(reply, bytes):
            try:
                return reply.decode("utf-8")
            except UnicodeDecodeError:
                return reply
        return reply


@pytest.mark.spark
def test_binary_payloads_come_back_as_redis_server_sends_them(redis: RespClient, make_store: StoreFactory) -> None:
    store = make_store(clock=ManualClock(wall_clock_ms()))
    expected = run_on(redis, BINARY_STEPS)
    actual = run_on(_AsRespClientSees(store), BINARY_STEPS)
    actual = [_like_server(step, e, a) for step, e, a in zip(BINARY_STEPS, expected, actual, strict=True)]
    assert_same_outcomes(BINARY_STEPS, expected, actual)

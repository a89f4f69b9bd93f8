"""Redis 8's recovery commands against the reference's worked examples (reference/redis8-recovery-commands.md).

No Redis 8 server installs here, so the expected replies are the reference's, which it took from Redis'
own tests (T) or, where it says so, from the C source. ``ref L<n>`` beside an expected reply (or a
scenario, when one citation covers all of it) is the line of ../shared/reference/redis8-recovery-commands.md
(the shared folder beside the project's) it comes from; "derived" marks a reply that follows from the
cited rule rather than being written out there. ``{s}`` in a script is the stream's key, and
``["+ms", "N"]`` moves the store's clock N ms on, so every idle time in a reply is exact. Each scenario
runs on a store of its own on a clock of its own, copied from the template of the longest prefix it
shares with another scenario (tests/fixtures.py); the template's replies to those steps are checked
against the scenario's expectations like the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import RefPolicy, ReplyError, StreamStore, sql
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.engine.runner import Clock
from streamclaim_spark.fleet.recovery import recover_stale
from tests.clock import ManualClock
from tests.fixtures import EMPTY, PrefixTemplates, TemplateStores, shared_prefixes
from tests.spark.pel import current_version

Script = list[tuple[list[str], Any]]


T0 = 1_700_000_000_000
CLOCK = ManualClock(T0)


@pytest.fixture(scope="module")
def store(templates: TemplateStores, tmp_path_factory: pytest.TempPathFactory) -> StreamStore:
    """One store for the tests below the scenarios, each on keys of its own, on the module's clock."""
    return templates.copy(EMPTY, tmp_path_factory.mktemp("redis8") / "store", clock=CLOCK)


def run_script(store: StreamStore, key: str, script: Script) -> None:
    for argv, expected in script:
        if argv[0] == "+ms":
            CLOCK.now += int(argv[1])
            continue
        command = [token.format(s=key) for token in argv]
        assert (command, store.execute(*command)) == (command, _with_key(expected, key, CLOCK.now))


class _Now:
    """Stands for the store clock's reading when the command runs: the idle time Redis reports for an
    XNACKed entry claimed by XREADGROUP CLAIM is ``now - 0`` (reference §1.8)."""


NOW = _Now()


def _with_key(value: Any, key: str, now: int) -> Any:
    if value is NOW:
        return now
    if isinstance(value, str):
        return value.format(s=key)
    if isinstance(value, list):
        return [_with_key(item, key, now) for item in value]
    return value


def _entries(*ids: str) -> list[list[Any]]:
    return [[entry_id, ["f", "v"]] for entry_id in ids]


# Two entries, each read by g1's c1 and by g2's c2 (X1-X3's setup; ref L354-355).
TWO_GROUPS_READ_BOTH: Script = [
    (["XADD", "{s}", "1-0", "f", "v"], "1-0"),
    (["XADD", "{s}", "2-0", "f", "v"], "2-0"),
    (["XGROUP", "CREATE", "{s}", "g1", "0"], "OK"),
    (["XGROUP", "CREATE", "{s}", "g2", "0"], "OK"),
    (["XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "{s}", ">"], [["{s}", _entries("1-0", "2-0")]]),
    (["XREADGROUP", "GROUP", "g2", "c2", "STREAMS", "{s}", ">"], [["{s}", _entries("1-0", "2-0")]]),
]
NOTHING_PENDING = [0, None, None, None]

# Entries 1-0..3-0 with fields f=v1..v3, and group g at 0 (the CLAIM scenarios' setup; ref L149-151, L161).
V1, V2, V3 = (["1-0", ["f", "v1"]], ["2-0", ["f", "v2"]], ["3-0", ["f", "v3"]])
THREE_ENTRIES: Script = [
    (["XADD", "{s}", "1-0", "f", "v1"], "1-0"),
    (["XADD", "{s}", "2-0", "f", "v2"], "2-0"),
    (["XGROUP", "CREATE", "{s}", "g", "0"], "OK"),
    (["XADD", "{s}", "3-0", "f", "v3"], "3-0"),
]
C2_HOLDS_BOTH = [2, "1-0", "2-0", [["c2", "2"]]]

SCENARIOS: dict[str, Script] = {
    # X1: ACKED deletes only what no group references any more (ref L353-359, every reply).
    "xackdel-acked": [
        *TWO_GROUPS_READ_BOTH,
        (["XACKDEL", "{s}", "g1", "ACKED", "IDS", "2", "1-0", "2-0"], [2, 2]),  # ref L356
        (["XLEN", "{s}"], 2),  # ref L356
        (["XPENDING", "{s}", "g1"], NOTHING_PENDING),  # ref L357
        (["XPENDING", "{s}", "g2"], C2_HOLDS_BOTH),  # ref L358
        (["XACKDEL", "{s}", "g2", "ACKED", "IDS", "2", "1-0", "2-0"], [1, 1]),  # ref L359
        (["XLEN", "{s}"], 0),  # ref L359
    ],
    # X2: KEEPREF deletes and leaves g2's references dangling; acking them later still answers 1.
    "xackdel-keepref": [
        *TWO_GROUPS_READ_BOTH,
        (["XACKDEL", "{s}", "g1", "KEEPREF", "IDS", "2", "1-0", "2-0"], [1, 1]),  # ref L362
        (["XLEN", "{s}"], 0),  # ref L362
        (["XPENDING", "{s}", "g2"], C2_HOLDS_BOTH),  # ref L363
        (["XACKDEL", "{s}", "g2", "KEEPREF", "IDS", "2", "1-0", "2-0"], [1, 1]),  # ref L364
        (["XPENDING", "{s}", "g2"], NOTHING_PENDING),  # derived: ref L330-331 (acknowledged in the group first)
    ],
    # X3: DELREF removes the IDs from every group's PEL.
    "xackdel-delref": [
        *TWO_GROUPS_READ_BOTH,
        (["XACKDEL", "{s}", "g1", "DELREF", "IDS", "2", "1-0", "2-0"], [1, 1]),  # ref L367
        (["XPENDING", "{s}", "g2"], NOTHING_PENDING),  # ref L367
        (["XACKDEL", "{s}", "g2", "DELREF", "IDS", "2", "1-0", "2-0"], [-1, -1]),  # ref L368
        (["XLEN", "{s}"], 0),  # derived: ref L322 (DELREF deletes the entry), L333 (length--)
    ],
    # X4: a missing key or group answers -1 per ID, before the IDs are parsed.
    "xackdel-missing": [
        (["XADD", "{s}", "1-1", "f", "v"], "1-1"),
        (["XGROUP", "CREATE", "{s}", "g", "0"], "OK"),
        (["XACKDEL", "{s}-nokey", "g", "IDS", "2", "1-1", "2-2"], [-1, -1]),  # ref L371
        (["XACKDEL", "{s}", "nogroup", "IDS", "2", "1-1", "2-2"], [-1, -1]),  # ref L372
        (["XACKDEL", "{s}-nokey", "g", "IDS", "1", "garbage"], [-1]),  # ref L299-300
        (["XDELEX", "{s}-nokey", "DELREF", "IDS", "1", "garbage"], [-1]),  # derived: ref L297-298, L312-313
    ],
    # X5: XDELEX; ACKED answers 2 while g still holds the entry, then deletes once it is acked.
    "xdelex": [
        (["XADD", "{s}", "1-0", "a", "1"], "1-0"),
        (["XADD", "{s}", "2-0", "a", "2"], "2-0"),
        (["XGROUP", "CREATE", "{s}", "g", "0"], "OK"),
        (
            ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{s}", ">"],
            [["{s}", [["1-0", ["a", "1"]], ["2-0", ["a", "2"]]]]],
        ),
        (["XDELEX", "{s}", "ACKED", "IDS", "1", "1-0"], [2]),  # ref L378
        (["XACK", "{s}", "g", "1-0"], 1),  # ref L378
        (["XDELEX", "{s}", "ACKED", "IDS", "1", "1-0"], [1]),  # ref L379
        (["XDELEX", "{s}", "IDS", "2", "2-0", "9-0"], [1, -1]),  # ref L380
        (["XPENDING", "{s}", "g"], [1, "2-0", "2-0", [["c", "1"]]]),  # ref L380
        (["XDELEX", "{s}", "DELREF", "IDS", "1", "2-0"], [-1]),  # ref L381
        (["XPENDING", "{s}", "g"], NOTHING_PENDING),  # ref L381
        (["XLEN", "{s}"], 0),  # derived: 1-0 and 2-0 deleted at ref L379-380
    ],
    # Code-derived edges: an ID no group has read is referenced even when it does not exist; a
    # repeated ID is answered once per occurrence; deletion moves the head like XDEL.
    "xdelex-edges": [
        (["XADD", "{s}", "1-0", "f", "v"], "1-0"),
        (["XADD", "{s}", "2-0", "f", "v"], "2-0"),
        (["XADD", "{s}", "3-0", "f", "v"], "3-0"),
        (["XGROUP", "CREATE", "{s}", "g", "1-0"], "OK"),
        # 1-0 read by g and not pending: deleted (ref L325-327); 9-0 absent but above g's last-delivered-id:
        # 2 (ref L328-329); 1-0 again: already gone, -1 (ref L312-313).
        (["XDELEX", "{s}", "ACKED", "IDS", "3", "1-0", "9-0", "1-0"], [1, 2, -1]),
        (["XDELEX", "{s}", "KEEPREF", "IDS", "2", "2-0", "2-0"], [1, -1]),  # ref L320-321, L312-313
        (["XRANGE", "{s}", "-", "+"], [["3-0", ["f", "v"]]]),  # derived: ref L333
        (["XLEN", "{s}"], 1),  # derived: ref L333
    ],
    # XTRIM/XADD ACKED (code-derived): the walk skips entries pending in a group or not yet read by one,
    # and keeps going, so newer entries go while older ones stay; the head's first entry follows.
    # Every reply here derived from ref L341-345 (ACKED checks each entry, keeps scanning; with ~ it
    # ignores nodes, LIMIT caps the work), L325-327 (what "referenced" is) and L349 (the replies' forms).
    "trim-acked": [
        *[(["XADD", "{s}", f"{n}-0", "f", "v"], f"{n}-0") for n in range(1, 6)],
        (["XGROUP", "CREATE", "{s}", "g", "0"], "OK"),
        (
            ["XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "{s}", ">"],
            [["{s}", _entries("1-0", "2-0", "3-0")]],
        ),
        (["XACK", "{s}", "g", "2-0"], 1),
        (["XTRIM", "{s}", "MAXLEN", "0", "ACKED"], 1),
        (["XRANGE", "{s}", "-", "+"], _entries("1-0", "3-0", "4-0", "5-0")),
        (["XACK", "{s}", "g", "1-0", "3-0"], 2),
        (["XADD", "{s}", "ACKED", "MAXLEN", "2", "6-0", "f", "v"], "6-0"),
        (["XRANGE", "{s}", "-", "+"], _entries("4-0", "5-0", "6-0")),
        (["XTRIM", "{s}", "MINID", "9-0", "ACKED"], 0),
        (["XGROUP", "SETID", "{s}", "g", "$"], "OK"),
        (["XTRIM", "{s}", "MINID", "~", "9-0", "ACKED", "LIMIT", "2"], 2),
        (["XRANGE", "{s}", "-", "+"], _entries("6-0")),
    ],
    # XTRIM/XADD DELREF: the trimmed entries leave every group's PEL; KEEPREF leaves them dangling.
    # Derived from ref L341-343 (DELREF checks each entry, ~ ignored for nodes, LIMIT caps; it removes the
    # PEL references), L340 and L320-321 (KEEPREF: 7.0 trimming, references left) and L349 (replies).
    "trim-delref-keepref": [
        *[(["XADD", "{s}", f"{n}-0", "f", "v"], f"{n}-0") for n in range(1, 5)],
        (["XGROUP", "CREATE", "{s}", "g1", "0"], "OK"),
        (["XGROUP", "CREATE", "{s}", "g2", "0"], "OK"),
        (["XREADGROUP", "GROUP", "g1", "c1", "COUNT", "2", "STREAMS", "{s}", ">"], [["{s}", _entries("1-0", "2-0")]]),
        (
            ["XREADGROUP", "GROUP", "g2", "c2", "STREAMS", "{s}", ">"],
            [["{s}", _entries("1-0", "2-0", "3-0", "4-0")]],
        ),
        (["XTRIM", "{s}", "MINID", "~", "4-0", "DELREF", "LIMIT", "2"], 2),
        (["XPENDING", "{s}", "g1"], NOTHING_PENDING),
        (["XPENDING", "{s}", "g2"], [2, "3-0", "4-0", [["c2", "2"]]]),
        (["XADD", "{s}", "DELREF", "MAXLEN", "1", "5-0", "f", "v"], "5-0"),
        (["XPENDING", "{s}", "g2"], NOTHING_PENDING),
        (["XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "{s}", ">"], [["{s}", _entries("5-0")]]),
        (["XTRIM", "{s}", "MAXLEN", "0", "KEEPREF"], 1),
        (["XPENDING", "{s}", "g1"], [1, "5-0", "5-0", [["c1", "1"]]]),
        (["XLEN", "{s}"], 0),
    ],
    # E1: CLAIM 0 claims what is pending, then serves what is new; new entries carry idle 0, count 0.
    # E1 has two entries (ref L148-154); the third, added after the group, is new like the second.
    "claim-and-new": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "{s}", ">"], [["{s}", [V1]]]),  # ref L152
        (["+ms", "5"], None),
        (  # ref L153 (idle "≥0": the 5 ms the clock moved), L94-95 (new entries: idle 0, count 0)
            ["XREADGROUP", "GROUP", "g", "c2", "CLAIM", "0", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, 5, 1], [*V2, 0, 0], [*V3, 0, 0]]]],
        ),
        # ref L154 (idle "≥0": 0, the clock stood still)
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "c2", 0, 2], ["2-0", "c2", 0, 1], ["3-0", "c2", 0, 1]]),
    ],
    # E2, E3, E4: nothing idle enough and nothing new is nil; COUNT covers claimed and new together;
    # a history read ignores CLAIM.
    "claim-threshold-count-history": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2, V3]]]),  # ref L162
        (["+ms", "50"], None),
        (["XREADGROUP", "GROUP", "g", "c2", "CLAIM", "100", "STREAMS", "{s}", ">"], None),  # ref L158
        (["+ms", "50"], None),
        (  # ref L163-164 (idle "≥50": the 100 ms the clock moved)
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "2", "CLAIM", "50", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, 100, 1], [*V2, 100, 1]]]],
        ),
        # derived: ref L164 ("3-0 stays with c1"), L141 (claimed entries move to the reader)
        (["XPENDING", "{s}", "g"], [3, "1-0", "3-0", [["c1", "1"], ["c2", "2"]]]),
        # ref L166-168, L72-73 (a history read ignores CLAIM; 2-element entries); c1 holds only 3-0 now
        (["XREADGROUP", "GROUP", "g", "c1", "CLAIM", "0", "STREAMS", "{s}", "0"], [["{s}", [V3]]]),
    ],
    # Oldest delivery first, whatever the IDs; a deleted entry is skipped, not counted, and stays pending.
    # Derived from ref L83-86 (walk oldest delivery first, deleted entries skipped and left pending),
    # L98-100 (order), L87 and L133 (idle, then the count before), L89-90 (count + 1, delivered now).
    "claim-order-and-deleted": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2, V3]]]),
        (["XCLAIM", "{s}", "g", "c1", "0", "3-0", "IDLE", "300", "JUSTID"], ["3-0"]),
        (["XCLAIM", "{s}", "g", "c1", "0", "1-0", "IDLE", "200", "JUSTID"], ["1-0"]),
        (["XDEL", "{s}", "3-0"], 1),
        (
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "CLAIM", "100", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, 200, 1]]]],
        ),
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "c2", 0, 2], ["2-0", "c1", 0, 1], ["3-0", "c1", 300, 1]]),
    ],
    # NOACK leaves new entries out of the PEL, but a claimed entry is still moved and counted
    # (ref L105-107; the reply's new entry: L94-95; the claimed one: L87, L133; the summary: L105-107).
    "claim-noack": [
        *THREE_ENTRIES[:-1],
        (["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "{s}", ">"], [["{s}", [V1]]]),
        (["+ms", "10"], None),
        (
            ["XREADGROUP", "GROUP", "g", "c2", "CLAIM", "5", "NOACK", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, 10, 1], [*V2, 0, 0]]]],
        ),
        (["XPENDING", "{s}", "g"], [1, "1-0", "1-0", [["c2", "1"]]]),
    ],
    # After XGROUP SETID moves the cursor back, an ID can be claimed and delivered again as new in one
    # reply; the new delivery wins (count 1). Ref L110-113 (the reply's 4 entries, L113; the PEL, L111-112).
    "claim-after-setid": [
        *THREE_ENTRIES[:-1],
        (["XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "{s}", ">"], [["{s}", [V1, V2]]]),
        (["+ms", "10"], None),
        (["XGROUP", "SETID", "{s}", "g", "0"], "OK"),
        (
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "4", "CLAIM", "5", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, 10, 1], [*V2, 10, 1], [*V1, 0, 0], [*V2, 0, 0]]]],
        ),
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "c2", 0, 1], ["2-0", "c2", 0, 1]]),
    ],
    # N1, N2: each mode's count; the entry loses its owner (XPENDING: "", idle -1); the summary counts
    # it in the total under no consumer (code-derived: an empty consumer list).
    "xnack-modes": [
        *THREE_ENTRIES[:-1],
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2]]]),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "1", "1-0"], 1),  # ref L251
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "", -1, 1], ["2-0", "c1", 0, 1]]),  # ref L252
        (["XNACK", "{s}", "g", "SILENT", "IDS", "1", "1-0"], 1),  # ref L255
        (["XPENDING", "{s}", "g", "-", "+", "10", "c1"], [["2-0", "c1", 0, 1]]),  # ref L229 (no unowned)
        (["XNACK", "{s}", "g", "FATAL", "IDS", "1", "1-0"], 1),  # ref L256
        # ref L256 (the count), L228-229 (IDLE filters owned entries only)
        (["XPENDING", "{s}", "g", "IDLE", "1000", "-", "+", "10"], [["1-0", "", -1, 9223372036854775807]]),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "2", "1-0", "2-0", "RETRYCOUNT", "99"], 2),  # ref L257, L224
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "", -1, 99], ["2-0", "", -1, 99]]),  # ref L257
        (["XPENDING", "{s}", "g"], [2, "1-0", "2-0", []]),  # ref L230 (code-derived)
    ],
    # N3, N4: IDs not pending are not counted, repeats are; FORCE makes an owner-less entry with count 0
    # for an entry that exists, and nothing for one that does not.
    "xnack-count-and-force": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2, V3]]]),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "1", "9-9"], 0),  # ref L260
        (["XNACK", "{s}", "g", "FAIL", "IDS", "5", "1-0", "9-9", "2-0", "8-8", "3-0"], 3),  # ref L261
        (["XNACK", "{s}", "g", "SILENT", "IDS", "2", "1-0", "1-0"], 2),  # ref L220 (each repeat counted)
        (["XPENDING", "{s}", "g", "-", "+", "1"], [["1-0", "", -1, 0]]),  # ref L209 (SILENT: 1 -> 0, floor 0)
        (["XGROUP", "CREATE", "{s}", "fresh", "$"], "OK"),
        (["XNACK", "{s}", "fresh", "FAIL", "IDS", "1", "1-0", "FORCE"], 1),  # ref L265
        (["XNACK", "{s}", "fresh", "FAIL", "IDS", "1", "9-9", "FORCE"], 0),  # ref L266
        (["XPENDING", "{s}", "fresh", "-", "+", "10"], [["1-0", "", -1, 0]]),  # ref L265
        (["XLEN", "{s}"], 3),  # derived: ref L215-218 (FORCE adds a PEL entry, not a stream entry)
    ],
    # N5: the NACK zone is first-NACKed-first, a re-NACK moves an entry to its end, and XREADGROUP
    # CLAIM serves it before anything else, reporting idle = now (delivery time 0).
    "xnack-zone-order": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2, V3]]]),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "3", "1-0", "2-0", "3-0"], 3),  # ref L269
        (["XNACK", "{s}", "g", "FAIL", "IDS", "1", "1-0"], 1),  # ref L270
        # ref L271 (2-0, then 3-0, then 1-0), L114-115 (idle = now, code-derived), L133 (the count before)
        (
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "CLAIM", "5", "STREAMS", "{s}", ">"],
            [["{s}", [[*V2, NOW, 1]]]],
        ),
        (
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "CLAIM", "5", "STREAMS", "{s}", ">"],
            [["{s}", [[*V3, NOW, 1]]]],
        ),
        (
            ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "CLAIM", "5", "STREAMS", "{s}", ">"],
            [["{s}", [[*V1, NOW, 1]]]],
        ),
        # derived: ref L141 (owner -> reader, delivered now, count + 1)
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "c2", 0, 2], ["2-0", "c2", 0, 2], ["3-0", "c2", 0, 2]]),
    ],
    # An owner-less entry is claimable with any min-idle-time; XGROUP DELCONSUMER removes only the
    # consumer's own entries; a history read leaves owner-less entries out; XACK removes them.
    "xnack-and-other-commands": [
        *THREE_ENTRIES,
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2, V3]]]),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "2", "1-0", "2-0"], 2),  # ref L224
        (["XCLAIM", "{s}", "g", "c2", "99999", "1-0"], [V1]),  # ref L235-236
        (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", "0"], [["{s}", [V3]]]),  # ref L240-241
        (["XGROUP", "DELCONSUMER", "{s}", "g", "c1"], 1),  # ref L243-244 (c1's own: 3-0)
        # ref L243-244 (2-0 survives, L227-228 its form); 1-0: 7.0 XCLAIM (count + 1, delivered now)
        (["XPENDING", "{s}", "g", "-", "+", "10"], [["1-0", "c2", 0, 2], ["2-0", "", -1, 1]]),
        (["XACK", "{s}", "g", "2-0"], 1),  # ref L242
        (["XPENDING", "{s}", "g"], [1, "1-0", "1-0", [["c2", "1"]]]),  # derived: ref L242, L230
    ],
}


Argv = tuple[str, ...]
SCENARIO_KEY = "s"


def _argvs(script: Script) -> list[Argv]:
    return [tuple(argv) for argv, _ in script]


PREFIXES = shared_prefixes({name: _argvs(script) for name, script in SCENARIOS.items()})


def _clock_after(steps: Sequence[Argv]) -> int:
    """The scenario clock's reading after ``steps``: T0 plus every ``+ms`` among them."""
    return T0 + sum(int(argv[1]) for argv in steps if argv[0] == "+ms")


def _run_steps(store: StreamStore, clock: Clock | None, steps: Sequence[Argv]) -> list[Any]:
    """The store's replies to ``steps`` (None for a clock move), moving ``clock`` as they say."""
    assert isinstance(clock, ManualClock), "the scenarios run on hand-moved clocks"
    replies: list[Any] = []
    for argv in steps:
        if argv[0] == "+ms":
            clock.now += int(argv[1])
            replies.append(None)
            continue
        replies.append(store.execute(*(token.format(s=SCENARIO_KEY) for token in argv)))
    return replies


@pytest.fixture(scope="module")
def scenario_stores(templates: TemplateStores) -> PrefixTemplates[Argv, Any]:
    """Each scenario runs on a copy of its deepest shared prefix's template, on a clock of its own."""
    return PrefixTemplates(
        templates, PREFIXES, "redis8", _run_steps, clock_after=lambda p: ManualClock(_clock_after(p))
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_reference_examples_get_the_reference_replies(
    scenario_stores: PrefixTemplates[Argv, Any], scenario: str
) -> None:
    script = SCENARIOS[scenario]
    replies = scenario_stores.run(_argvs(script))
    now = T0
    for (argv, expected), reply in zip(script, replies, strict=True):
        if argv[0] == "+ms":
            now += int(argv[1])
            continue
        command = [token.format(s=SCENARIO_KEY) for token in argv]
        assert (command, reply) == (command, _with_key(expected, SCENARIO_KEY, now))


INVALID_ID = "ERR Invalid stream ID specified as stream command argument"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (  # ref L373, L305
            ["XACKDEL", "{s}", "g", "IDS", "3", "1-1", "2-2"],
            "ERR The `numids` parameter must match the number of arguments",
        ),
        (["XACKDEL", "{s}", "g", "KEEPREF", "DELREF", "IDS", "1", "1-1"], "ERR syntax error"),  # ref L374, L307
        (["XACKDEL", "{s}", "g", "IDS", "1", "bad"], INVALID_ID),  # ref L309
        # ref L286, L19 (arity -6; the text is 7.0's arity error, as XNACK's at ref L191)
        (["XACKDEL", "{s}", "g", "IDS"], "ERR wrong number of arguments for 'xackdel' command"),
        (["XDELEX", "{s}", "ACKED", "FOO", "BAR"], "ERR syntax error"),  # ref L306-307 (an unknown option)
        (["XDELEX", "{s}", "IDS", "2", "1-1", "bad"], INVALID_ID),  # ref L309
        # ref L287, L19 (arity -5)
        (["XDELEX", "{s}", "IDS", "1"], "ERR wrong number of arguments for 'xdelex' command"),
        (  # ref L193, L274
            ["XNACK", "{s}-nokey", "g", "SILENT", "IDS", "1", "1-1"],
            "NOGROUP No such key '{s}-nokey' or consumer group 'g'",
        ),
        (  # ref L193-194 (before the mode)
            ["XNACK", "{s}", "nogroup", "BADMODE", "IDS", "1", "1-1"],
            "NOGROUP No such key '{s}' or consumer group 'nogroup'",
        ),
        # ref L195, L275 and L33-39 (the doubled ERR: code-derived, unconfirmed against a live server)
        (["XNACK", "{s}", "g", "BADMODE", "IDS", "1", "1-1"], "ERR ERR mode must be SILENT, FAIL, or FATAL"),
        (["XNACK", "{s}", "g", "FAIL", "IDS", "2", "1-1", "bad"], INVALID_ID),  # ref L204
        (["XNACK", "{s}", "g", "SILENT", "IDS", "1"], "ERR wrong number of arguments for 'xnack' command"),  # ref L191
    ],
    ids=[
        *("numids-mismatch", "two-policies", "bad-id", "xackdel-arity", "unknown-option", "xdelex-bad-id"),
        *("xdelex-arity", "xnack-missing-key", "xnack-nogroup-before-mode", "xnack-mode", "xnack-bad-id"),
        "xnack-arity",
    ],
)
def test_bad_arguments_get_the_redis_error_and_commit_nothing(store: StreamStore, argv: list[str], error: str) -> None:
    key = "validation"
    if store.execute("EXISTS", key) == 0:
        run_script(
            store, key, [(["XADD", "{s}", "1-1", "f", "v"], "1-1"), (["XGROUP", "CREATE", "{s}", "g", "0"], "OK")]
        )
        run_script(
            store, key, [(["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{s}", ">"], [["{s}", [["1-1", ["f", "v"]]]]])]
        )
    version = current_version(store)
    with pytest.raises(ReplyError) as raised:
        store.execute(*[token.format(s=key) for token in argv])
    assert str(raised.value) == error.format(s=key)
    assert current_version(store) == version
    assert store.execute("XPENDING", key, "g") == [1, "1-1", "1-1", [["c", "1"]]]


def test_two_consumers_reading_with_claim_at_once_claim_each_stale_entry_exactly_once(
    spark: SparkSession, store: StreamStore
) -> None:
    key = "claim-race"
    store.append(key, spark.range(60).selectExpr("CAST(id AS STRING) AS n"))
    store.execute("XGROUP", "CREATE", key, "g", "0")
    store.deliver(key, "g", "dead")
    CLOCK.now += 1_000
    start = threading.Barrier(2)
    replies: dict[str, Any] = {}

    def read(consumer: str) -> None:
        start.wait()
        replies[consumer] = store.execute(
            "XREADGROUP", "GROUP", "g", consumer, "COUNT", "40", "CLAIM", "500", "STREAMS", key, ">"
        )

    readers = [threading.Thread(target=read, args=(consumer,)) for consumer in ("a", "b")]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()

    # The store's own race; each claimed item as ref L87, L133 (idle, count before), the PEL as L141.
    claimed = {consumer: [item[0] for item in reply[0][1]] for consumer, reply in replies.items()}
    assert sorted(len(ids) for ids in claimed.values()) == [20, 40]  # the loser re-ran and took the rest
    assert not set(claimed["a"]) & set(claimed["b"])
    every_id = [row[0] for row in store.execute("XRANGE", key, "-", "+")]
    assert sorted(claimed["a"] + claimed["b"], key=every_id.index) == every_id
    assert all(item[2:] == [1_000, 1] for reply in replies.values() for item in reply[0][1])
    pel = store.execute("XPENDING", key, "g", "-", "+", "100")
    assert [(row[0], row[1], row[3]) for row in pel] == [
        (entry_id, "a" if entry_id in claimed["a"] else "b", 2) for entry_id in every_id
    ]


def test_an_entry_nacked_fatal_is_dead_lettered_by_the_recovery_job_and_sql_shows_nacked_entries_ownerless(
    spark: SparkSession, store: StreamStore
) -> None:
    key = "nack-recovery"
    run_script(
        store,
        key,
        [
            *THREE_ENTRIES[:-1],
            (["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"], [["{s}", [V1, V2]]]),
            (["XNACK", "{s}", "g", "FATAL", "IDS", "1", "1-0"], 1),  # ref L224, L209 (count 2^63-1)
            (["XNACK", "{s}", "g", "FAIL", "IDS", "1", "2-0"], 1),  # ref L224, L209 (count kept)
        ],
    )
    sql.register(spark, store.path, database="streamclaim_redis8")
    pending = spark.sql(
        "SELECT id, owner, delivery_count, delivery_time_ms, delivered_at, idle_ms FROM streamclaim_redis8.pending "
        f"WHERE stream = '{key}' ORDER BY id"
    ).collect()
    assert [tuple(row) for row in pending] == [
        ("1-0", None, 2**63 - 1, 0, None, None),
        ("2-0", None, 1, 0, None, None),
    ]

    # Owner-less entries are claimable whatever the min-idle-time (ref L235-236); FATAL's count is past
    # any limit. The recovery job and the SQL views are the store's own, not Redis'.
    report = recover_stale(store, RecoveryOptions(min_idle_ms=3_600_000, streams=(key,), max_deliveries=5))

    assert (report.totals["claimed"], report.totals["dead_lettered"]) == (1, 1)
    assert store.execute("XPENDING", key, "g", "-", "+", "10") == [["2-0", "recovery", 0, 2]]
    letters = spark.sql(
        f"SELECT id, owner, delivery_count FROM streamclaim_redis8.dead_letters WHERE stream = '{key}'"
    ).collect()
    assert [tuple(row) for row in letters] == [("1-0", None, 2**63 - 1)]


def test_bulk_xackdel_acknowledges_every_id_and_deletes_under_each_policy_in_one_commit_each(
    spark: SparkSession, store: StreamStore
) -> None:
    key = "bulk-ackdel"
    e = [f"{CLOCK.now}-{i}" for i in range(6)]
    store.append(key, spark.range(6).selectExpr("CAST(id AS STRING) AS n"))
    store.create_groups([(key, "g1", "0"), (key, "g2", "0")])
    store.deliver(key, "g1", "c1")
    store.deliver(key, "g2", "c2", count=3)  # g2 has read e0..e2 only
    assert store.execute("XACK", key, "g2", e[0]) == 1

    def ids(*chosen: str) -> Any:
        return spark.createDataFrame([(i,) for i in chosen], "id string")

    def head() -> dict[str, Any]:
        info = store.execute("XINFO", "STREAM", key)
        fields = dict(zip(info[0::2], info[1::2], strict=True))
        return {name: fields[name] for name in ("length", "recorded-first-entry-id", "max-deleted-entry-id")}

    # The bulk API is the store's; its outcomes follow the policies of ref L319-333: ACKED L325-327,
    # DELREF L322, KEEPREF L320, acknowledged in the named group first L330, the head's fields L333.
    # ACKED: e0 goes (acknowledged by g2); e1 is pending in g2 and e4 unread by it, so they stay.
    before = current_version(store)
    done = store.acknowledge_and_delete(key, "g1", ids(e[0], e[1], e[4], "1-1"), RefPolicy.ACKED)
    assert (done.acknowledged, done.deleted, done.still_referenced, done.version) == (3, 1, 2, before + 1)
    assert head() == {"length": 5, "recorded-first-entry-id": e[1], "max-deleted-entry-id": e[0]}
    # DELREF over the rest of g1's PEL: e2 also leaves g2's PEL.
    done = store.acknowledge_and_delete(key, "g1", None, RefPolicy.DELREF)
    assert (done.acknowledged, done.deleted, done.still_referenced) == (3, 3, 0)
    assert store.execute("XPENDING", key, "g2") == [1, e[1], e[1], [["c2", "1"]]]
    assert [row[0] for row in store.execute("XRANGE", key, "-", "+")] == [e[1], e[4]]
    # KEEPREF (the default) deletes what it acknowledges; an ID not pending is left alone.
    done = store.acknowledge_and_delete(key, "g2", ids(e[1], e[4]))
    assert (done.acknowledged, done.deleted, done.still_referenced) == (1, 1, 0)
    assert head() == {"length": 1, "recorded-first-entry-id": e[4], "max-deleted-entry-id": e[5]}
    with pytest.raises(ReplyError, match=r"^NOGROUP"):
        store.acknowledge_and_delete(key, "nogroup", None)

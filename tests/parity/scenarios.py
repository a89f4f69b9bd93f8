"""Parity scenarios: scripted command sequences run on a real redis-server 7.0.15 and on the store.

Every scenario starts from an empty database; its replies are compared step by step. Each scenario was run on
a live redis-server 7.0.15 (started like the harness does, ``--stream-node-max-bytes 0``) and its replies were
checked by eye, so a scenario does what its name says there (an error step really fails with the intended
text, a claim really claims, a 7.0-specific behaviour really shows).

Notes for the harness:

* ``SCENARIOS`` are deterministic: explicit entry IDs only; min-idle-times are 0 (always idle enough) or
  3600000 (certainly not idle enough, unless the entry was given an old delivery time with XCLAIM IDLE/TIME).
  Entries given a fixed past time with ``XCLAIM ... TIME 1000`` / ``TIME 0`` are only observed through claim
  outcomes, never through an idle value or an absolute delivery time (those grow with the wall clock).
* XINFO STREAM replies (plain and FULL) contain ``radix-tree-keys`` and ``radix-tree-nodes``, which the store
  cannot reproduce exactly: the harness masks those two fields.
* Clock-dependent values (XPENDING extended ``idle``, XINFO CONSUMERS ``idle``, XINFO STREAM FULL
  ``seen-time`` and delivery times) are compared with a tolerance. Where cheap, scenarios read them right
  after the command that set them. 7.0 XINFO CONSUMERS records are ``name, pending, idle`` only, and 7.0 FULL
  consumer records have no ``active-time``.
* ``SHAPE_ONLY_SCENARIOS`` use ``*`` IDs: test_parity compares them with each generated ID replaced by its
  rank among the IDs that side generated, everything else exactly.
* There are no WRONGTYPE scenarios: the store holds only stream keys and has no command that makes another
  kind (no SET), so WRONGTYPE can never occur on it (docs/DESIGN.md). The three that were kept here unused
  began with ``SET`` and could never run on the store; they were removed.
* Behaviour where the live 7.0 server differs from the (7.4/8.x-based) reference text is marked ``7_0`` in the
  scenario name and explained in a comment.
"""

from __future__ import annotations

Step = tuple[str, ...]

MAX_ID = "18446744073709551615-18446744073709551615"
_U64 = "18446744073709551615"

# Reusable setups (plain data).
_A3: list[Step] = [
    ("XADD", "s", "1-0", "f", "1"),
    ("XADD", "s", "2-0", "f", "2"),
    ("XADD", "s", "3-0", "f", "3"),
]
"""Stream s with 1-0, 2-0, 3-0."""
_A3G: list[Step] = [*_A3, ("XGROUP", "CREATE", "s", "g", "0")]
"""As _A3, with group g at 0-0."""
_A3G_ALICE: list[Step] = [*_A3G, ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")]
"""As _A3G, with all three entries delivered to alice (each pending once)."""
_A5: list[Step] = [("XADD", "x", f"{i}-0", "data", c) for i, c in zip(range(1, 6), "abcde", strict=True)]
"""Stream x with 1-0 .. 5-0 (the reference test suite's lag tests)."""
_A_MS5: list[Step] = [
    ("XADD", "s", "5-0", "f", "a"),
    ("XADD", "s", "5-1", "f", "b"),
    ("XADD", "s", f"5-{_U64}", "f", "c"),
    ("XADD", "s", "6-0", "f", "d"),
]
"""Stream s with 5-0, 5-1, 5-max, 6-0 (incomplete and exclusive range bounds)."""


SCENARIOS: dict[str, list[Step]] = {
    # =========================================================================================================
    # Arity, dispatch, case-insensitivity
    # =========================================================================================================
    "arity_errors_name_the_lowercase_command": [
        ("XADD", "s", "1-0", "f"),
        ("XRANGE", "s", "-"),
        ("XREVRANGE", "s", "+"),
        ("XLEN",),
        ("XDEL", "s"),
        ("XTRIM", "s", "MAXLEN"),
        ("xread", "STREAMS", "s"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
        ("XACK", "s", "g"),
        ("XPENDING", "s"),
        ("XCLAIM", "s", "g", "c", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0"),
        ("XSETID", "s"),
    ],
    "arity_errors_for_container_subcommands_use_the_pipe_name": [
        ("XGROUP",),
        ("XGROUP", "CREATE", "s", "g"),
        ("XGROUP", "SETID", "s", "g"),
        ("XGROUP", "DESTROY", "s"),
        ("XGROUP", "DESTROY", "s", "g", "extra"),
        ("XGROUP", "CREATECONSUMER", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", "c", "extra"),
        ("XGROUP", "HELP", "extra"),
        ("XINFO",),
        ("XINFO", "STREAM"),
        ("XINFO", "GROUPS", "s", "extra"),
        ("XINFO", "CONSUMERS", "s"),
        ("XINFO", "HELP", "extra"),
    ],
    "unknown_container_subcommand_echoes_the_name_as_typed": [
        ("XGROUP", "FOO"),
        ("XGROUP", "foo", "s", "g"),
        ("XINFO", "BAR", "s"),
        ("XINFO", "bar"),
    ],
    # The store's help texts are 7.0.15's, word for word.
    "xgroup_and_xinfo_help_list_the_subcommands": [
        ("XGROUP", "HELP"),
        ("xinfo", "help"),
    ],
    "command_and_subcommand_names_are_case_insensitive": [
        ("xadd", "s", "1-0", "f", "1"),
        ("XaDd", "s", "2-0", "f", "2"),
        ("xlen", "s"),
        ("xrange", "s", "-", "+"),
        ("xgroup", "create", "s", "g", "0"),
        ("xreadgroup", "group", "g", "alice", "count", "1", "streams", "s", ">"),
        ("xpending", "s", "g"),
        ("xack", "s", "g", "1-0"),
        ("xinfo", "groups", "s"),
    ],
    # =========================================================================================================
    # XADD
    # =========================================================================================================
    "xadd_explicit_ids_must_increase": [
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "1-2", "f", "v"),
        ("XADD", "s", "2", "f", "v"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_zero_id_is_rejected_and_creates_no_key": [
        ("XADD", "s", "0-0", "f", "v"),
        ("XADD", "s", "0", "f", "v"),
        ("EXISTS", "s"),
        ("XADD", "s", "0-1", "f", "v"),
    ],
    "xadd_ms_star_generates_the_sequence_number": [
        ("XADD", "s", "0-*", "f", "v"),
        ("XADD", "s", "0-*", "f", "v"),
        ("XADD", "s", "5-*", "f", "v"),
        ("XADD", "s", "5-*", "f", "v"),
        ("XADD", "s", "3-*", "f", "v"),
        ("XADD", "s", "5-1", "f", "v"),
        ("XRANGE", "s", "-", "+"),
    ],
    # 7.0: "ms-*" when the last sequence is already the maximum fails with "Elements are too large to be stored"
    # (the reference says "equal or smaller than the target stream top item").
    "xadd_ms_star_with_exhausted_sequence_fails_7_0": [
        ("XADD", "s", f"1-{_U64}", "f", "v"),
        ("XADD", "s", "1-*", "f", "v"),
        ("XADD", "s", "2-*", "f", "v"),
    ],
    "xadd_after_the_maximum_id_reports_an_exhausted_stream": [
        ("XADD", "s", MAX_ID, "f", "v"),
        ("XADD", "s", MAX_ID, "f", "v"),
        ("XADD", "s", f"{_U64}-*", "f", "v"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XLEN", "s"),
    ],
    "xadd_invalid_ids_are_rejected": [
        ("XADD", "s", "abc", "f", "v"),
        ("XADD", "s", "-10", "f", "v"),
        ("XADD", "s", "11-", "f", "v"),
        ("XADD", "s", "1-2-3", "f", "v"),
        ("XADD", "s", "-", "f", "v"),
        ("XADD", "s", "+", "f", "v"),
        ("XADD", "s", "", "f", "v"),
        ("XADD", "s", "18446744073709551616-0", "f", "v"),
        ("EXISTS", "s"),
    ],
    "xadd_id_number_parts_are_parsed_leniently": [
        ("XADD", "s", "05-1", "f", "v"),
        ("XADD", "s", "+6-1", "f", "v"),
        ("XADD", "s", " 7-1", "f", "v"),
        ("XADD", "s", "8", "f", "v"),
        ("XADD", "s", "9-05", "f", "v"),
        ("XADD", "s", "10--01", "f", "v"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_odd_field_value_count_is_an_arity_error": [
        ("XADD", "s", "1-0", "f", "v", "f2"),
        ("XADD", "s", "MAXLEN", "1", "1-0", "f"),
        ("XADD", "s", "NOMKSTREAM", "1-0", "f", "v", "x"),
        ("EXISTS", "s"),
    ],
    "xadd_keeps_duplicate_fields_order_and_binary_values": [
        ("XADD", "s", "1-0", "b", "1", "a", "2", "b", "3"),
        ("XADD", "s", "2-0", "", ""),
        ("XADD", "s", "3-0", "sp ace", "line\nbreak", "\u00e9", "\t"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_nomkstream_on_a_missing_key_returns_nil_and_creates_nothing": [
        ("XADD", "s", "NOMKSTREAM", "1-0", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "MAXLEN", "0", "1-0", "f", "v"),
        ("EXISTS", "s"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "nomkstream", "2-0", "f", "v"),
        ("XLEN", "s"),
    ],
    "xadd_maxlen_trims_oldest_entries_after_appending": [
        *_A3,
        ("XADD", "s", "MAXLEN", "2", "4-0", "f", "4"),
        ("XINFO", "STREAM", "s"),
        ("XADD", "s", "MAXLEN", "=", "1", "5-0", "f", "5"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_trimming_can_remove_the_new_entry_itself": [
        ("XADD", "s", "MAXLEN", "0", "1-0", "f", "v"),
        ("XADD", "s", "MINID", "10", "5-0", "f", "v"),
        ("XLEN", "s"),
        ("EXISTS", "s"),
        ("XINFO", "STREAM", "s"),
        ("XADD", "s", "5-0", "f", "v"),
    ],
    "xadd_minid_trims_entries_below_the_threshold": [
        *_A3,
        ("XADD", "s", "MINID", "3", "4-0", "f", "4"),
        ("XRANGE", "s", "-", "+"),
        ("XADD", "s", "MINID", "=", "4-0", "5-0", "f", "5"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_options_are_case_insensitive": [
        ("XADD", "s", "1-0", "f", "1"),
        ("xadd", "s", "nomkstream", "maxlen", "=", "1", "2-0", "f", "2"),
        ("XADD", "s", "MinId", "3", "3-0", "f", "3"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_maxlen_and_minid_option_errors": [
        ("XADD", "s", "MAXLEN", "-1", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "abc", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "007", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "abc", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "1", "MINID", "1", "1-0", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "NOMKSTREAM", "MAXLEN", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "NOMKSTREAM", "NOMKSTREAM", "MAXLEN"),
        ("XADD", "s", "MINID", "abc", "1-0", "f", "v"),
        ("XADD", "s", "MINID", "-", "1-0", "f", "v"),
        ("XADD", "s", "MINID", "1-*", "1-0", "f", "v"),
        ("EXISTS", "s"),
    ],
    "xadd_limit_option_errors": [
        ("XADD", "s", "LIMIT", "5", "1-0", "f", "v"),
        ("XADD", "s", "LIMIT", "0", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "5", "LIMIT", "0", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "=", "5", "LIMIT", "10", "1-0", "f", "v"),
        ("XADD", "s", "MINID", "1", "LIMIT", "10", "1-0", "f", "v"),
        ("XADD", "s", "LIMIT", "-1", "1-0", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "5", "LIMIT", "abc", "1-0", "f", "v"),
        ("EXISTS", "s"),
    ],
    # Node-based `~` trimming (a node of up to 100 entries is only ever removed whole). Verified live.
    "xadd_approx_trimming_cannot_remove_part_of_a_node": [
        *_A3,
        ("XADD", "s", "MAXLEN", "~", "1", "4-0", "f", "4"),
        ("XADD", "s", "MAXLEN", "~", "2", "LIMIT", "10", "5-0", "f", "5"),
        ("XADD", "s", "MINID", "~", "5", "6-0", "f", "6"),
        ("XLEN", "s"),
    ],
    "xadd_approx_maxlen_zero_removes_the_whole_single_node": [
        *_A3,
        ("XADD", "s", "MAXLEN", "~", "0", "4-0", "f", "4"),
        ("XLEN", "s"),
        ("XINFO", "STREAM", "s"),
    ],
    # =========================================================================================================
    # XRANGE / XREVRANGE
    # =========================================================================================================
    "xrange_inclusive_exclusive_and_incomplete_bounds": [
        *_A_MS5,
        ("XRANGE", "s", "-", "+"),
        ("XRANGE", "s", "5", "5"),
        ("XRANGE", "s", "5-1", "6"),
        ("XRANGE", "s", "+5", "+5-1"),
        ("XRANGE", "s", "(5", "+"),
        ("XRANGE", "s", "-", "(5"),
        ("XRANGE", "s", "(5-0", "(6-0"),
        ("XRANGE", "s", f"(5-{_U64}", "+"),
        ("XRANGE", "s", "-", "(6-0"),
        ("XREVRANGE", "s", "(6-0", "(5-0"),
    ],
    "xrevrange_takes_end_first_and_an_empty_interval_gives_an_empty_array": [
        *_A3,
        ("XREVRANGE", "s", "+", "-"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "2"),
        ("XREVRANGE", "s", "3", "2"),
        ("XREVRANGE", "s", "1", "3"),
        ("XRANGE", "s", "3", "1"),
        ("XRANGE", "s", "(2-0", "(2-0"),
    ],
    "xrange_count_limits_and_zero_or_negative_gives_a_null_array": [
        *_A3,
        ("XRANGE", "s", "-", "+", "COUNT", "2"),
        ("XRANGE", "s", "-", "+", "COUNT", "5", "COUNT", "1"),
        ("XRANGE", "s", "2", "+", "count", "1"),
        ("XRANGE", "s", "-", "+", "COUNT", "0"),
        ("XRANGE", "s", "-", "+", "COUNT", "-1"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "0"),
    ],
    "xrange_missing_key_returns_an_empty_array_even_with_count_zero": [
        ("XRANGE", "s", "-", "+"),
        ("XRANGE", "s", "-", "+", "COUNT", "0"),
        ("XREVRANGE", "s", "+", "-"),
    ],
    "xrange_skips_deleted_entries": [
        *_A3,
        ("XDEL", "s", "2-0"),
        ("XRANGE", "s", "-", "+"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "1"),
        ("XRANGE", "s", "2-0", "2-0"),
    ],
    "xrange_interval_errors_are_checked_before_the_key": [
        ("XRANGE", "s", "(-", "+"),
        ("XRANGE", "s", "-", "(+"),
        ("XRANGE", "s", f"({MAX_ID}", "+"),
        ("XRANGE", "s", "-", "(0-0"),
        ("XRANGE", "s", "(", "+"),
        ("XRANGE", "s", "abc", "+"),
        ("XRANGE", "s", "-", "1-x"),
        ("XREVRANGE", "s", "(0-0", "-"),
        ("XREVRANGE", "s", "+", f"({MAX_ID}"),
        ("XREVRANGE", "s", "+", "(-"),
    ],
    "xrange_count_option_errors": [
        ("XRANGE", "s", "-", "+", "COUNT"),
        ("XRANGE", "s", "-", "+", "COUNT", "abc"),
        ("XRANGE", "s", "-", "+", "LIMIT", "1"),
        ("XRANGE", "s", "-", "+", "COUNT", "1", "FOO"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "1.5"),
    ],
    # =========================================================================================================
    # DEL, EXISTS, XLEN
    # =========================================================================================================
    "del_removes_a_stream_with_its_groups_and_a_new_one_starts_fresh": [
        *_A3G_ALICE,
        ("DEL", "s"),
        ("EXISTS", "s"),
        ("XLEN", "s"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("DEL", "s"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XINFO", "STREAM", "s"),
    ],
    "exists_and_del_count_several_keys": [
        ("XADD", "s1", "1-0", "f", "v"),
        ("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"),
        ("EXISTS", "s1", "s2", "nokey", "s1"),
        ("DEL", "s1", "nokey", "s2"),
        ("EXISTS", "s1", "s2"),
    ],
    # =========================================================================================================
    # XDEL
    # =========================================================================================================
    "xdel_deletes_existing_ids_counts_duplicates_once_and_validates_all_ids_first": [
        *_A3,
        ("XDEL", "s", "1-0", "abc"),
        ("XDEL", "s", "+"),
        ("XDEL", "s", "1-0", "1-0", "3-0", "9-0"),
        ("XRANGE", "s", "-", "+"),
        ("XDEL", "s", "1-0"),
    ],
    "xdel_on_a_missing_key_returns_zero_without_validating_ids": [
        ("XDEL", "s", "abc"),
        ("XDEL", "s", "1-0"),
        ("EXISTS", "s"),
    ],
    "xdel_does_not_lower_the_last_id": [
        ("XADD", "s", "666-0", "f", "v"),
        ("XDEL", "s", "666-0"),
        ("XADD", "s", "665-0", "f", "v"),
        ("XADD", "s", "666-0", "f", "v"),
        ("XADD", "s", "666-*", "f", "v"),
        ("XINFO", "STREAM", "s"),
    ],
    "xdel_tracks_first_entry_and_max_deleted_id_and_keeps_an_empty_stream": [
        *_A3,
        ("XDEL", "s", "1-0"),
        ("XINFO", "STREAM", "s"),
        ("XDEL", "s", "3-0"),
        ("XINFO", "STREAM", "s"),
        ("XDEL", "s", "2-0"),
        ("EXISTS", "s"),
        ("XRANGE", "s", "-", "+", "COUNT", "0"),
        ("XINFO", "STREAM", "s"),
    ],
    # =========================================================================================================
    # XTRIM
    # =========================================================================================================
    "xtrim_maxlen_removes_the_oldest_entries_without_setting_max_deleted_id": [
        *_A3,
        ("XTRIM", "s", "MAXLEN", "1"),
        ("XINFO", "STREAM", "s"),
        ("XTRIM", "s", "MAXLEN", "5"),
        ("xtrim", "s", "maxlen", "=", "0"),
        ("XLEN", "s"),
    ],
    "xtrim_minid_removes_entries_below_the_threshold_and_keeps_an_empty_stream": [
        *_A3,
        ("XTRIM", "s", "MINID", "2-0"),
        ("XTRIM", "s", "MINID", "2"),
        ("XTRIM", "s", "MINID", "=", "3-1"),
        ("XLEN", "s"),
        ("EXISTS", "s"),
    ],
    "xtrim_on_a_missing_key_returns_zero_and_creates_nothing": [
        ("XTRIM", "s", "MAXLEN", "0"),
        ("XTRIM", "s", "MINID", "5"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "1", "LIMIT", "2"),
        ("EXISTS", "s"),
    ],
    "xtrim_strategy_errors": [
        ("XTRIM", "s", "FOO", "BAR"),
        ("XTRIM", "s", "MAXLEN", "1", "FOO"),
        ("XTRIM", "s", "=", "1"),
        ("XTRIM", "s", "NOMKSTREAM", "MAXLEN", "1"),
        ("XTRIM", "s", "LIMIT", "0"),
        ("XTRIM", "s", "MAXLEN", "-1"),
        ("XTRIM", "s", "MAXLEN", "abc"),
        ("XTRIM", "s", "MAXLEN", "~"),
        ("XTRIM", "s", "MINID", "abc"),
        ("XTRIM", "s", "MAXLEN", "1", "MINID", "1"),
    ],
    "xtrim_limit_errors": [
        ("XTRIM", "s", "LIMIT", "10"),
        ("XTRIM", "s", "MAXLEN", "1", "LIMIT", "10"),
        ("XTRIM", "s", "MAXLEN", "=", "1", "LIMIT", "10"),
        ("XTRIM", "s", "MINID", "1", "LIMIT", "0"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "-1"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "x"),
    ],
    # Node-based `~` trimming on small single-node streams. Verified live.
    "xtrim_approx_cannot_remove_part_of_a_node": [
        *_A3,
        ("XTRIM", "s", "MAXLEN", "~", "1"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "2"),
        ("XTRIM", "s", "MINID", "~", "3"),
        ("XLEN", "s"),
    ],
    "xtrim_approx_removes_a_whole_node_when_allowed": [
        *_A3,
        ("XTRIM", "s", "MINID", "~", "4"),
        ("XADD", "s", "4-0", "f", "4"),
        ("XADD", "s", "5-0", "f", "5"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "2"),
        ("XINFO", "STREAM", "s"),
    ],
    "xtrim_leaves_pending_entries_dangling": [
        *_A3G_ALICE,
        ("XTRIM", "s", "MAXLEN", "1"),
        ("XPENDING", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    ],
    # =========================================================================================================
    # XSETID
    # =========================================================================================================
    "xsetid_argument_errors_are_checked_before_the_key": [
        ("XSETID", "s", "1-0"),
        ("XSETID", "s", "abc"),
        ("XSETID", "s", "-"),
        ("XSETID", "s", "1-0", "ENTRIESADDED", "-1"),
        ("XSETID", "s", "1-0", "ENTRIESADDED", "abc"),
        ("XSETID", "s", "1-0", "MAXDELETEDID", "abc"),
        ("XSETID", "s", "1-0", "MAXDELETEDID", "2-0"),
        ("XSETID", "s", "1-0", "FOO"),
        ("XSETID", "s", "1-0", "ENTRIESADDED"),
        ("EXISTS", "s"),
    ],
    "xsetid_cannot_go_below_the_top_entry_but_may_lower_the_last_id": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XADD", "s", "5-0", "f", "5"),
        ("XSETID", "s", "4-0"),
        ("XSETID", "s", "10-0"),
        ("XADD", "s", "9-0", "f", "x"),
        ("XSETID", "s", "7-0"),
        ("XADD", "s", "7-0", "f", "x"),
        ("XADD", "s", "7-*", "f", "x"),
    ],
    "xsetid_sets_entries_added_and_max_deleted_entry_id": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XADD", "s", "5-0", "f", "5"),
        ("XSETID", "s", "10-0", "ENTRIESADDED", "1"),
        ("xsetid", "s", "10-0", "entriesadded", "100", "maxdeletedid", "8-0"),
        ("XINFO", "STREAM", "s"),
    ],
    "xsetid_on_an_empty_stream_may_go_below_the_previous_last_id": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XADD", "s", "5-0", "f", "5"),
        ("XTRIM", "s", "MAXLEN", "0"),
        ("XSETID", "s", "2-0"),
        ("XADD", "s", "3-0", "f", "x"),
        ("XINFO", "STREAM", "s"),
    ],
    # 7.0: no "smaller than current max_deleted_entry_id" check: the last ID may drop below max-deleted-entry-id
    # and an ID at or below a deleted one can be added again.
    "xsetid_does_not_check_the_current_max_deleted_entry_id_7_0": [
        ("XADD", "s", "5-0", "f", "v"),
        ("XDEL", "s", "5-0"),
        ("XSETID", "s", "3-0"),
        ("XADD", "s", "4-0", "f", "v"),
        ("XINFO", "STREAM", "s"),
    ],
    "xsetid_to_the_maximum_id_exhausts_the_stream": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XSETID", "s", MAX_ID),
        ("XADD", "s", "2-0", "f", "v"),
    ],
    # =========================================================================================================
    # XGROUP CREATE
    # =========================================================================================================
    "xgroup_create_duplicate_name_is_busygroup": [
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "5"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_create_on_a_missing_key_needs_mkstream": [
        ("XGROUP", "CREATE", "s", "g", "$"),
        ("EXISTS", "s"),
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XLEN", "s"),
        ("XINFO", "STREAM", "s"),
        ("XINFO", "STREAM", "s", "FULL"),
    ],
    "xgroup_create_invalid_id_fails_before_mkstream_creates_the_key": [
        ("XGROUP", "CREATE", "s", "g", "abc", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "-", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "+", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", ">", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "1-*", "MKSTREAM"),
        ("EXISTS", "s"),
    ],
    "xgroup_create_option_errors_are_checked_before_the_key": [
        ("XGROUP", "CREATE", "s", "g", "$", "FOO"),
        ("XGROUP", "create", "s", "g", "$", "ENTRIESREAD"),
        ("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "abc"),
        ("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "-3"),
        ("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "007"),
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "ENTRIESREAD", "1", "extra"),
        ("EXISTS", "s"),
    ],
    "xgroup_create_dollar_is_the_last_generated_id_even_if_deleted": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XADD", "s", "2-0", "f", "2"),
        ("XDEL", "s", "2-0"),
        ("XGROUP", "CREATE", "s", "g", "$"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    ],
    "xgroup_create_id_is_not_checked_against_the_stream": [
        *_A3,
        ("XGROUP", "CREATE", "s", "g", "100-0"),
        ("XINFO", "GROUPS", "s"),
        ("XADD", "s", "4-0", "f", "4"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XADD", "s", "100-1", "f", "x"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_create_with_entriesread_reports_it": [
        *_A3,
        ("XGROUP", "CREATE", "s", "g1", "0", "ENTRIESREAD", "0"),
        ("XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "3"),
        ("XGROUP", "CREATE", "s", "g3", "$", "ENTRIESREAD", "-1"),
        ("XGROUP", "CREATE", "s", "g4", "0", "ENTRIESREAD", "-3"),
        ("XINFO", "GROUPS", "s"),
    ],
    # 7.0: ENTRIESREAD is not capped at entries-added (8.x caps it), so the lag goes negative.
    "xgroup_entriesread_above_entries_added_is_not_capped_7_0": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "9999"),
        ("XGROUP", "CREATE", "s", "g2", "$"),
        ("XGROUP", "SETID", "s", "g2", "0", "ENTRIESREAD", "50"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_groups_are_listed_in_byte_order": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g2", "0"),
        ("XGROUP", "CREATE", "s", "G1", "0"),
        ("XGROUP", "CREATE", "s", "g10", "0"),
        ("XGROUP", "CREATE", "s", "", "$"),
        ("XINFO", "GROUPS", "s"),
        ("XINFO", "STREAM", "s"),
    ],
    # =========================================================================================================
    # XGROUP SETID
    # =========================================================================================================
    "xgroup_setid_backwards_redelivers_pending_entries_and_resets_their_count": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XPENDING", "s", "g"),
    ],
    "xgroup_setid_accepts_dash_plus_and_dollar": [
        *_A3G,
        ("XGROUP", "SETID", "s", "g", "+"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "-"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "3"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_setid_without_entriesread_makes_entries_read_unknown": [
        *_A3G_ALICE,
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "2-0"),
        ("XINFO", "GROUPS", "s"),
        ("xgroup", "setid", "s", "g", "2-0", "entriesread", "2"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_setid_errors": [
        ("XGROUP", "SETID", "s", "g", "$"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "SETID", "s", "nog", "$"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "SETID", "s", "g", "abc"),
        ("XGROUP", "SETID", "s", "g", "0", "MKSTREAM"),
        ("XGROUP", "setid", "s", "g", "0", "ENTRIESREAD"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-2"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "x"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "1", "extra"),
        ("XINFO", "GROUPS", "s"),
    ],
    # =========================================================================================================
    # XGROUP DESTROY / CREATECONSUMER / DELCONSUMER
    # =========================================================================================================
    "xgroup_destroy_returns_1_then_0_and_drops_the_pel": [
        *_A3G_ALICE,
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XINFO", "GROUPS", "s"),
        ("XPENDING", "s", "g"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XPENDING", "s", "g"),
    ],
    "xgroup_subcommands_on_a_missing_key_require_the_key": [
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
        ("XGROUP", "DELCONSUMER", "s", "g", "c"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("EXISTS", "s"),
    ],
    "xgroup_consumer_subcommands_need_the_group": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
        ("XGROUP", "DELCONSUMER", "s", "g", "c"),
        ("XGROUP", "DESTROY", "s", "g"),
    ],
    "xgroup_createconsumer_returns_1_when_created_and_0_when_existing": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "Alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "Alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "Bob"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "Bob"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_delconsumer_drops_its_pending_entries": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"),
        ("XPENDING", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xgroup_consumers_are_listed_in_byte_order": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "\u00e9", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "B", "COUNT", "1", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
    ],
    # =========================================================================================================
    # XREADGROUP: delivery
    # =========================================================================================================
    "xreadgroup_gt_returns_only_entries_after_the_group_position": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XADD", "s", "2-0", "f", "2"),
        ("XGROUP", "CREATE", "s", "g", "$"),
        ("XADD", "s", "3-0", "f", "3"),
        ("XADD", "s", "4-0", "f", "4"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
    ],
    "xreadgroup_count_limits_new_entries_and_zero_or_negative_means_all": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "0", "STREAMS", "s", ">"),
        ("XADD", "s", "4-0", "f", "4"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "-5", "STREAMS", "s", ">"),
    ],
    "xreadgroup_history_returns_only_the_callers_own_pending_entries": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"),
        ("XPENDING", "s", "g"),
    ],
    "xreadgroup_history_is_exclusive_and_a_missing_sequence_means_zero": [
        ("XADD", "s", "5-0", "f", "a"),
        ("XADD", "s", "5-1", "f", "b"),
        ("XADD", "s", "6-0", "f", "c"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "5"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "5-1"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "6-0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "0-0"),
    ],
    "xreadgroup_history_read_bumps_delivery_count_but_not_the_group": [
        *_A3G_ALICE,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "1-0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xreadgroup_history_shows_deleted_entries_with_a_nil_body": [
        *_A3G_ALICE,
        ("XDEL", "s", "2-0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XPENDING", "s", "g"),
    ],
    "xreadgroup_gt_does_not_serve_a_stream_whose_newer_entries_were_deleted": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XDEL", "s", "3-0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XADD", "s", "3-0", "f", "3"),
        ("XADD", "s", "4-0", "f", "4"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    ],
    # 7.0: a `>` read that serves nothing (without BLOCK) does not create the consumer; a history read does.
    # (The reference says every XREADGROUP creates the consumer.)
    "xreadgroup_unserved_gt_read_creates_no_consumer_but_a_history_read_does_7_0": [
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0"),
        ("XINFO", "CONSUMERS", "s", "g"),
    ],
    "xreadgroup_noack_advances_the_group_without_pending_entries": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "NOACK", "STREAMS", "s", ">"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xreadgroup_noack_leaves_an_existing_pending_entry_untouched": [
        *_A3G_ALICE,
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "NOACK", "COUNT", "2", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xreadgroup_reads_several_streams_and_omits_unserved_ones": [
        ("XADD", "s1", "1-0", "f", "a"),
        ("XADD", "s2", "1-0", "f", "b"),
        ("XGROUP", "CREATE", "s1", "g", "$"),
        ("XGROUP", "CREATE", "s2", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "s2", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "s2", "0", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s2", "s1", "0", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "s2", ">", ">"),
    ],
    "xreadgroup_count_applies_to_each_stream": [
        ("XADD", "s1", "1-0", "f", "a"),
        ("XADD", "s1", "2-0", "f", "b"),
        ("XADD", "s2", "1-0", "f", "c"),
        ("XADD", "s2", "2-0", "f", "d"),
        ("XGROUP", "CREATE", "s1", "g", "0"),
        ("XGROUP", "CREATE", "s2", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s1", "s2", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s2", "s1", "0", "0"),
    ],
    "xreadgroup_failure_on_a_later_stream_changes_nothing": [
        ("XADD", "s1", "1-0", "f", "a"),
        ("XGROUP", "CREATE", "s1", "g", "0"),
        ("XADD", "s2", "1-0", "f", "b"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s1", "s2", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s1", "s1", ">", "abc"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s1", "nokey", ">", ">"),
        ("XINFO", "CONSUMERS", "s1", "g"),
        ("XINFO", "GROUPS", "s1"),
    ],
    # 7.0: no "timeout is out of range" check for a huge BLOCK value.
    "xreadgroup_block_with_an_explicit_id_returns_at_once": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "100", "COUNT", "1", "STREAMS", "s", "1-0"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "9223372036854775807", "STREAMS", "s", "0-0"),
    ],
    "xreadgroup_maximum_id_behaves_like_gt": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", MAX_ID),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xreadgroup_options_repeat_with_the_last_winning_and_names_are_case_sensitive": [
        *_A3G,
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "COUNT", "1", "GROUP", "g", "Alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "x", "y", "GROUP", "g", "carol", "NOACK", "NOACK", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    # =========================================================================================================
    # XREADGROUP: errors
    # =========================================================================================================
    "xreadgroup_parse_errors": [
        ("XREADGROUP", "COUNT", "1", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUPS", "g", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAM", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "FOO", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "NOACK"),
        ("XREADGROUP", "NOACK", "NOACK", "NOACK", "NOACK", "GROUP", "g"),
        ("XREADGROUP", "NOACK", "NOACK", "NOACK", "GROUP", "g", "c"),
    ],
    # 7.0: the unbalanced-streams error is the XREAD text for XREADGROUP too.
    "xreadgroup_unbalanced_streams_error_7_0": [
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s2", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "s2", "s3", ">", ">"),
    ],
    "xreadgroup_count_and_block_value_errors": [
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "abc", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1.5", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "18446744073709551616", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "abc", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "1.5", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "18446744073709551616", "STREAMS", "s", ">"),
    ],
    "xreadgroup_invalid_stream_ids": [
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "invalid-id"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "123-"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "-123"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "--"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "123-abc"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "-"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ""),
        ("XINFO", "CONSUMERS", "s", "g"),
    ],
    # 7.0: `+` is just an invalid ID for XREADGROUP (no "The + ID is meaningless" error).
    "xreadgroup_dollar_is_meaningless_and_plus_is_invalid_7_0": [
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"),
    ],
    "xreadgroup_nogroup_errors": [
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "0"),
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "G", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "nokey", ">", "0"),
    ],
    # =========================================================================================================
    # XREAD (non-blocking)
    # =========================================================================================================
    "xread_returns_entries_after_the_given_ids_and_dollar_gives_null": [
        *_A3,
        ("XREAD", "STREAMS", "s", "0"),
        ("XREAD", "STREAMS", "s", "1-0"),
        ("XREAD", "STREAMS", "s", "2"),
        ("XREAD", "COUNT", "1", "STREAMS", "s", "0-0"),
        ("XREAD", "STREAMS", "s", "3-0"),
        ("XREAD", "STREAMS", "s", "$"),
        ("XREAD", "STREAMS", "nokey", "$"),
        ("XREAD", "STREAMS", "s", "nokey", "$", "0"),
    ],
    "xread_skips_missing_keys_and_returns_null_when_nothing_is_found": [
        ("XREAD", "STREAMS", "nokey", "0"),
        ("XADD", "s1", "1-0", "f", "a"),
        ("XADD", "s2", "1-0", "f", "b"),
        ("XADD", "s2", "2-0", "f", "c"),
        ("XREAD", "STREAMS", "nokey", "s1", "0", "0"),
        ("XREAD", "COUNT", "1", "STREAMS", "s2", "s1", "0", "0"),
        ("XREAD", "STREAMS", "s1", "s2", "1-0", "1-0"),
    ],
    # 7.0: XREAD has no `+` ID (added in 7.4); it is an invalid ID.
    "xread_skips_deleted_entries_and_plus_is_invalid_7_0": [
        *_A3,
        ("XDEL", "s", "2-0"),
        ("xread", "count", "5", "streams", "s", "0-0"),
        ("XREAD", "BLOCK", "0", "STREAMS", "s", "1-0"),
        ("XREAD", "STREAMS", "s", "+"),
        ("XREAD", "STREAMS", "s", "-"),
    ],
    # 7.0: the unbalanced text is "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be
    # specified." (the reference quotes the 7.4 text mentioning '+').
    "xread_errors": [
        ("XREAD", "STREAMS", "s", ">"),
        ("XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"),
        ("XREAD", "NOACK", "STREAMS", "s", "0"),
        ("XREAD", "STREAMS", "s", "s2", "0"),
        ("XREAD", "COUNT", "abc", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "-1", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "abc", "STREAMS", "s", "0"),
        ("XREAD", "FOO", "STREAMS", "s", "0"),
        ("XREAD", "COUNT", "1", "COUNT", "2"),
        ("XREAD", "STREAMS", "s", "abc"),
    ],
    # =========================================================================================================
    # XACK
    # =========================================================================================================
    "xack_removes_entries_from_the_pel_even_if_deleted_from_the_stream": [
        *_A3G_ALICE,
        ("XACK", "s", "g", "1-0"),
        ("XDEL", "s", "2-0"),
        ("XACK", "s", "g", "2-0"),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xack_counts_each_pending_id_once_and_validates_all_ids_first": [
        *_A3G_ALICE,
        ("XACK", "s", "g", "1-0", "abc"),
        ("XACK", "s", "g", "+"),
        ("XPENDING", "s", "g"),
        ("XACK", "s", "g", "1-0", "1-0", "2-0", "9-0"),
        ("XACK", "s", "g", "1-0"),
        ("XPENDING", "s", "g"),
    ],
    "xack_on_a_missing_key_or_group_returns_zero_without_validating_ids": [
        ("XACK", "s", "g", "1-0"),
        ("XACK", "s", "g", "abc"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XACK", "s", "nog", "abc"),
    ],
    # =========================================================================================================
    # XPENDING
    # =========================================================================================================
    "xpending_summary_of_an_empty_pel": [
        ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10"),
    ],
    "xpending_summary_and_extended_forms_with_consumer_filter": [
        *_A3G,
        ("XGROUP", "CREATECONSUMER", "s", "g", "Zed"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g", "-", "+", "10", "Alice"),
        ("XPENDING", "s", "g", "2", "+", "1"),
        ("XPENDING", "s", "g", "(1-0", "+", "10"),
        ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10", "nobody"),
        ("XPENDING", "s", "g", "-", "+", "10", "Zed"),
    ],
    "xpending_idle_filter_keeps_entries_idle_at_least_that_long_before_count": [
        *_A3G_ALICE,
        ("XPENDING", "s", "g", "IDLE", "0", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "-5", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "10"),
        ("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "7200000", "JUSTID"),
        ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "1"),
        ("XPENDING", "s", "g", "idle", "3600000", "-", "+", "10", "alice"),
        ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "10", "bob"),
    ],
    "xpending_exclusive_and_incomplete_range_bounds": [
        *_A3G_ALICE,
        ("XPENDING", "s", "g", "(1-0", "(3-0", "10"),
        ("XPENDING", "s", "g", "(1", "+", "10"),
        ("XPENDING", "s", "g", "-", "(3", "10"),
        ("XPENDING", "s", "g", "(3-0", "+", "10"),
    ],
    "xpending_ignores_arguments_after_the_consumer_and_count_zero_or_negative_is_empty": [
        *_A3G_ALICE,
        ("XPENDING", "s", "g", "-", "+", "10", "alice", "junk"),
        ("XPENDING", "s", "g", "-", "+", "10", "alice", "junk", "more"),
        ("XPENDING", "s", "g", "IDLE", "0", "-", "+", "10", "alice", "junk"),
        ("XPENDING", "s", "g", "-", "+", "0"),
        ("XPENDING", "s", "g", "-", "+", "-5"),
    ],
    "xpending_argument_errors_come_before_the_key_lookup": [
        ("XPENDING", "s", "g", "-"),
        ("XPENDING", "s", "g", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "abc", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "10", "-", "+"),
        ("XPENDING", "s", "g", "-", "+", "abc"),
        ("XPENDING", "s", "g", "abc", "+", "xyz"),
        ("XPENDING", "s", "g", "abc", "(0-0", "10"),
        ("XPENDING", "s", "g", "(-", "+", "10"),
        ("XPENDING", "s", "g", f"({MAX_ID}", "+", "10"),
        ("XPENDING", "s", "g", "-", "(0-0", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "c", "junk", "more", "extra"),
    ],
    "xpending_nogroup_errors": [
        ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XPENDING", "s", "nog"),
        ("XPENDING", "s", "nog", "-", "+", "10", "c"),
    ],
    # =========================================================================================================
    # XCLAIM
    # =========================================================================================================
    "xclaim_moves_a_pending_entry_and_justid_keeps_the_delivery_count": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "bob", "0", "1-0"),
        ("XPENDING", "s", "g", "1-0", "1-0", "10"),
        ("XCLAIM", "s", "g", "carol", "0", "1-0", "JUSTID"),
        ("XPENDING", "s", "g", "1-0", "1-0", "10"),
        ("XPENDING", "s", "g"),
    ],
    "xclaim_reply_follows_argument_order_and_the_owner_may_reclaim": [
        *_A3G_ALICE,
        ("xclaim", "s", "g", "bob", "0", "3-0", "1-0", "justid", "retrycount", "5"),
        ("XCLAIM", "s", "g", "alice", "0", "2-0"),
        ("XPENDING", "s", "g", "2-0", "2-0", "10"),
        ("XPENDING", "s", "g"),
    ],
    "xclaim_duplicate_ids_are_claimed_twice": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "bob", "0", "3-0", "1-0", "1-0"),
        ("XPENDING", "s", "g", "-", "+", "10", "bob"),
    ],
    # 7.0: XCLAIM creates the consumer only when it claims something (the reference says always).
    "xclaim_that_claims_nothing_creates_no_consumer_7_0": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "2-0", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "FORCE"),
        ("XCLAIM", "s", "g", "carol", "0", "9-0"),
        ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xclaim_idle_sets_an_older_delivery_time_and_min_idle_is_inclusive": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "alice", "0", "1-0", "IDLE", "3600000", "JUSTID"),
        ("XPENDING", "s", "g", "1-0", "1-0", "10"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "2-0", "JUSTID"),
        ("XCLAIM", "s", "g", "bob", "-100", "3-0", "JUSTID"),
        ("XPENDING", "s", "g"),
    ],
    # XCLAIM sets the delivery time to now, JUSTID or not (IDLE/TIME aside): the entries made an hour old
    # are fresh again, so XPENDING's idle times are ~0 and XAUTOCLAIM finds nothing an hour idle.
    "xclaim_resets_the_idle_time_with_or_without_justid": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "alice", "0", "1-0", "2-0", "IDLE", "3600000", "JUSTID"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "JUSTID"),
        ("XCLAIM", "s", "g", "bob", "0", "2-0"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XAUTOCLAIM", "s", "g", "carol", "3600000", "0", "JUSTID"),
    ],
    "xclaim_ids_are_read_until_the_first_non_id": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "JUSTID", "2-0"),
        ("XCLAIM", "s", "g", "bob", "0", "abc"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "-"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "+"),
        ("XPENDING", "s", "g"),
    ],
    "xclaim_silently_purges_deleted_and_trimmed_entries_even_when_not_idle_enough": [
        *_A3G_ALICE,
        ("XDEL", "s", "2-0"),
        ("XCLAIM", "s", "g", "bob", "3600000", "2-0"),
        ("XPENDING", "s", "g"),
        ("XTRIM", "s", "MAXLEN", "1"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "2-0", "3-0"),
        ("XPENDING", "s", "g"),
    ],
    "xclaim_force_creates_a_pending_entry_for_an_undelivered_entry": [
        *_A3G,
        ("XCLAIM", "s", "g", "bob", "0", "3-0"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "9-0", "FORCE"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xclaim_force_justid_starts_at_count_1_and_ignores_min_idle_only_for_a_new_entry": [
        ("XADD", "s", "1-0", "f", "1"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "FORCE", "JUSTID"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "FORCE", "JUSTID"),
        ("XPENDING", "s", "g"),
    ],
    "xclaim_retrycount_sets_the_delivery_count_even_with_justid": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "bob", "0", "3-0", "RETRYCOUNT", "-1"),
        ("XPENDING", "s", "g", "3-0", "3-0", "10"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0", "2-0", "RETRYCOUNT", "7", "JUSTID"),
        ("XPENDING", "s", "g", "-", "2", "10"),
    ],
    "xclaim_time_sets_an_absolute_delivery_time_and_the_last_of_idle_or_time_wins": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "alice", "0", "1-0", "TIME", "1000", "JUSTID"),
        ("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "0", "TIME", "0", "JUSTID"),
        ("XCLAIM", "s", "g", "alice", "0", "3-0", "TIME", "1000", "IDLE", "0", "JUSTID"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "2-0", "3-0", "JUSTID"),
    ],
    "xclaim_out_of_range_idle_or_time_collapse_to_now": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "alice", "0", "1-0", "IDLE", "-5", "JUSTID"),
        ("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "99999999999999", "JUSTID"),
        ("XCLAIM", "s", "g", "alice", "0", "3-0", "TIME", "99999999999999", "JUSTID"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-0", "2-0", "3-0", "JUSTID"),
    ],
    "xclaim_lastid_moves_the_group_forward_only": [
        *_A3G,
        ("XCLAIM", "s", "g", "bob", "0", "9-0", "LASTID", "2-0"),
        ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "bob", "0", "lastid", "1-0"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xclaim_option_errors": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XCLAIM", "s", "g", "c", "abc", "1-0"),
        ("XCLAIM", "s", "g", "c", "0.5", "1-0"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "abc"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "1.5"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "TIME", "abc"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "RETRYCOUNT", "abc"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "LASTID", "abc"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "LASTID", "-"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "FOO"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "IDLE"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "TIME"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "RETRYCOUNT"),
        ("XCLAIM", "s", "g", "c", "0", "1-0", "LASTID"),
    ],
    "xclaim_checks_key_and_group_before_min_idle": [
        ("XCLAIM", "s", "g", "c", "abc", "1-0"),
        ("XADD", "s", "1-0", "f", "v"),
        ("XCLAIM", "s", "nog", "c", "abc", "1-0"),
        ("XCLAIM", "s", "nog", "c", "0", "1-0", "FOO"),
    ],
    # =========================================================================================================
    # XAUTOCLAIM
    # =========================================================================================================
    "xautoclaim_cursor_is_the_next_unexamined_id_and_zero_at_the_end": [
        *_A3G_ALICE,
        ("XAUTOCLAIM", "s", "g", "bob", "0", "3-0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "0-0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "2-0", "COUNT", "5"),
        ("XPENDING", "s", "g", "(1-0", "+", "10"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "4-0", "COUNT", "1"),
        ("XPENDING", "s", "g"),
    ],
    "xautoclaim_as_an_iterator": [
        *_A3,
        ("XADD", "s", "4-0", "f", "4"),
        ("XADD", "s", "5-0", "f", "5"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "-", "COUNT", "2", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "3-0", "COUNT", "2", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "5-0", "COUNT", "1", "JUSTID"),
    ],
    # The worked example of the reference (§11.2): deleted IDs fill the 3rd element and consume COUNT.
    "xautoclaim_deleted_entries_fill_the_third_element_and_consume_count": [
        *_A3G_ALICE,
        ("XDEL", "s", "1-0", "2-0"),
        ("XAUTOCLAIM", "s", "g", "Bob", "0", "0-0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "Bob", "0", "2-0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "Bob", "0", "3-0", "COUNT", "1"),
        ("XPENDING", "s", "g"),
    ],
    "xautoclaim_reports_deleted_and_trimmed_ids": [
        *_A3G_ALICE,
        ("XDEL", "s", "2-0"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "0-0", "COUNT", "1"),
        ("XTRIM", "s", "MAXLEN", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "0-0", "JUSTID"),
        ("XPENDING", "s", "g", "-", "+", "10"),
    ],
    "xautoclaim_justid_returns_ids_without_incrementing_the_count": [
        *_A3G_ALICE,
        ("XAUTOCLAIM", "s", "g", "bob", "-1", "-", "JUSTID"),
        ("XPENDING", "s", "g", "-", "+", "10"),
    ],
    "xautoclaim_start_is_inclusive_and_accepts_exclusive_and_special_bounds": [
        *_A3G_ALICE,
        ("XAUTOCLAIM", "s", "g", "bob", "0", "(1-0", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "+"),
        ("XAUTOCLAIM", "s", "g", "carol", "0", "2", "COUNT", "1", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "carol", "0", "(2", "COUNT", "1", "JUSTID"),
        ("XPENDING", "s", "g"),
    ],
    # Ten attempts per COUNT: with COUNT 1 only 10 not-idle-enough entries are examined.
    "xautoclaim_skipped_entries_consume_ten_attempts_per_count": [
        *[("XADD", "s", f"{i}-0", "f", str(i)) for i in range(1, 12)],
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XAUTOCLAIM", "s", "g", "bob", "3600000", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "3600000", "11-0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "3600000", "0", "COUNT", "2"),
    ],
    "xautoclaim_claims_entries_made_old_with_xclaim_idle": [
        *_A3G_ALICE,
        ("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "7200000", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "bob", "3600000", "-"),
        ("XPENDING", "s", "g", "2-0", "2-0", "10"),
        ("XPENDING", "s", "g"),
    ],
    # 7.0: XAUTOCLAIM creates the consumer only when it claims something (the reference says always).
    "xautoclaim_that_claims_nothing_creates_no_consumer_7_0": [
        *_A3G,
        ("XAUTOCLAIM", "s", "g", "carol", "0", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XAUTOCLAIM", "s", "g", "dave", "3600000", "0"),
        ("XDEL", "s", "1-0"),
        ("XAUTOCLAIM", "s", "g", "erin", "0", "0"),
        ("XINFO", "GROUPS", "s"),
    ],
    "xautoclaim_arguments_are_validated_before_the_key": [
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "-1"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "abc"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "576460752303423488"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "8070450532247928833"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "FOO"),
        ("XAUTOCLAIM", "s", "g", "c", "abc", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "abc"),
        ("XAUTOCLAIM", "s", "g", "c", "0", f"({MAX_ID}"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "(-"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0"),
    ],
    "xautoclaim_nogroup_and_case_insensitive_options": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XAUTOCLAIM", "s", "nog", "c", "0", "0"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("xautoclaim", "s", "g", "bob", "0", "0", "count", "1", "justid"),
    ],
    # =========================================================================================================
    # XINFO
    # =========================================================================================================
    # 7.0: FULL consumer records are name, seen-time, pel-count, pending (no active-time).
    "xinfo_stream_full_lists_entries_groups_pel_and_consumers_7_0": [
        *_A3,
        ("XDEL", "s", "2-0"),
        ("XGROUP", "CREATE", "s", "g0", "$"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XINFO", "STREAM", "s", "FULL"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "1"),
        ("xinfo", "stream", "s", "full", "count", "0"),
    ],
    "xinfo_stream_full_count_defaults_to_ten_and_negative_means_ten": [
        *[("XADD", "s", f"{i}-0", "f", str(i)) for i in range(1, 12)],
        ("XINFO", "STREAM", "s", "FULL"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "-1"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "0"),
    ],
    "xinfo_missing_key_errors_come_first": [
        ("XINFO", "STREAM", "s"),
        ("XINFO", "GROUPS", "s"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XINFO", "STREAM", "s", "FOO"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "abc"),
    ],
    "xinfo_option_and_group_errors": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XINFO", "STREAM", "s", "FOO"),
        ("XINFO", "STREAM", "s", "FULL", "FOO"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "abc"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "1", "extra"),
        ("xinfo", "stream", "s", "COUNT", "1"),
        ("XINFO", "CONSUMERS", "s", "nog"),
        ("XINFO", "GROUPS", "s"),
    ],
    # =========================================================================================================
    # entries-read and lag (the 7.0 algorithm; see the 7_0 scenarios for where it differs from the reference)
    # =========================================================================================================
    "lag_in_an_empty_stream_is_zero_with_unknown_entries_read": [
        ("XGROUP", "CREATE", "x", "g1", "0", "MKSTREAM"),
        ("XINFO", "GROUPS", "x"),
        ("XADD", "x", "1-0", "data", "a"),
        ("XDEL", "x", "1-0"),
        ("XINFO", "GROUPS", "x"),
        ("XINFO", "STREAM", "x"),
    ],
    "lag_and_entries_read_progress_with_reads": [
        *_A5,
        ("XGROUP", "CREATE", "x", "g1", "0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c12", "COUNT", "10", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XADD", "x", "6-0", "data", "f"),
        ("XINFO", "GROUPS", "x"),
    ],
    "lag_is_unknown_while_a_tombstone_lies_ahead_of_the_group": [
        *_A5,
        ("XDEL", "x", "3-0"),
        ("XGROUP", "CREATE", "x", "g1", "0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "2", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
    ],
    "lag_after_trimming_away_the_tombstone": [
        *_A5,
        ("XDEL", "x", "3-0"),
        ("XGROUP", "CREATE", "x", "g1", "5-0", "ENTRIESREAD", "5"),
        ("XGROUP", "CREATE", "x", "g2", "0"),
        ("XADD", "x", "6-0", "data", "f"),
        ("XTRIM", "x", "MINID", "=", "3-0"),
        ("XINFO", "GROUPS", "x"),
        ("XTRIM", "x", "MINID", "5-0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g2", "c", "COUNT", "10", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
    ],
    # 7.0: once the last tombstone is before the first entry, tombstones are ignored: lag 2 (reference: 1,
    # the remaining length), then entries-read 2 / lag 1 (reference: 3 / 0) after reading the survivor.
    "lag_with_a_tombstone_after_the_group_position_7_0": [
        ("XGROUP", "CREATE", "x", "g1", "$", "MKSTREAM"),
        ("XADD", "x", "1-0", "data", "a"),
        ("XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "x", ">"),
        ("XADD", "x", "2-0", "data", "c"),
        ("XADD", "x", "3-0", "data", "d"),
        ("XDEL", "x", "2-0"),
        ("XINFO", "GROUPS", "x"),
        ("XDEL", "x", "1-0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
    ],
    # 7.0 (pre-8.0): after trimming past the group, lag stays entries-added minus entries-read (4; reference:
    # 1), and reading the survivor just increments entries-read (2 / lag 3; reference 8.0: 5 / 0).
    "lag_after_xtrim_past_the_group_keeps_counting_7_0": [
        ("XGROUP", "CREATE", "x", "mygroup", "$", "MKSTREAM"),
        *_A5,
        ("XREADGROUP", "GROUP", "mygroup", "alice", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XTRIM", "x", "MAXLEN", "1"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "mygroup", "alice", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
    ],
    # 7.0: on delivery the tombstone check looks at the delivered ID, not at the group's previous position, so
    # reading past a tombstone keeps incrementing: 3 / 2, then 4 / 1 (reference: nil / nil, then 5 / 0).
    "entries_read_increments_past_an_earlier_tombstone_7_0": [
        *_A5,
        ("XGROUP", "CREATE", "x", "g", "2-0", "ENTRIESREAD", "2"),
        ("XDEL", "x", "3-0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
    ],
}


# =============================================================================================================
# Shape-only scenarios: `*` IDs (values differ between runs): compared with generated IDs ranked (test_parity).
# =============================================================================================================
SHAPE_ONLY_SCENARIOS: dict[str, list[Step]] = {
    "xadd_auto_id_returns_a_new_increasing_id": [
        ("XADD", "s", "*", "f", "v"),
        ("XADD", "s", "*", "f", "v"),
        ("XLEN", "s"),
        ("XRANGE", "s", "-", "+"),
    ],
    "xadd_auto_id_after_an_explicit_future_id_increments_the_sequence": [
        ("XADD", "s", "99999999999999-5", "f", "v"),
        ("XADD", "s", "*", "f", "v"),
    ],
    "xadd_auto_id_on_an_exhausted_stream_fails": [
        ("XADD", "s", MAX_ID, "f", "v"),
        ("XADD", "s", "*", "f", "v"),
    ],
    "xadd_auto_id_with_approx_trimming": [
        ("XADD", "s", "MAXLEN", "~", "1", "*", "f", "1"),
        ("XADD", "s", "MAXLEN", "~", "1", "*", "f", "2"),
        ("XADD", "s", "MAXLEN", "~", "1", "LIMIT", "5", "*", "f", "3"),
        ("XTRIM", "s", "MAXLEN", "~", "1"),
        ("XLEN", "s"),
    ],
    "xreadgroup_and_xinfo_on_auto_ids": [
        ("XADD", "s", "*", "f", "1"),
        ("XADD", "s", "*", "f", "2"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
        ("XINFO", "STREAM", "s"),
        ("XINFO", "GROUPS", "s"),
    ],
}

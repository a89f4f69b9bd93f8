"""Argument parsers of every command: Redis' validation order and exact error texts, no Spark."""

from __future__ import annotations

import pytest

from streamclaim_spark.commands.claim import XClaim, delivery_time, parse_xautoclaim, parse_xclaim
from streamclaim_spark.commands.nack import NackMode, XNack, nacked_count, parse_xnack_tail
from streamclaim_spark.commands.pending import parse_xpending
from streamclaim_spark.commands.reading import parse_read
from streamclaim_spark.commands.references import AckDel, parse_ackdel_tail
from streamclaim_spark.commands.streams import parse_xadd, parse_xrange, parse_xsetid
from streamclaim_spark.commands.trimming import parse_xtrim
from streamclaim_spark.core.ids import StreamId
from streamclaim_spark.core.model import RefPolicy
from streamclaim_spark.errors import ReplyError


def error_of(call: object, *args: object) -> str:
    with pytest.raises(ReplyError) as caught:
        call(*args)  # type: ignore[operator]
    return str(caught.value)


class TestXadd:
    def test_auto_id_with_fields_parses_pairs_in_order_keeping_duplicates(self) -> None:
        request = parse_xadd(["XADD", "s", "*", "f", "1", "f", "2"])
        assert request.id is None
        assert request.fields == ((b"f", b"1"), (b"f", b"2"))

    def test_ms_star_is_an_id_with_a_generated_sequence(self) -> None:
        request = parse_xadd(["XADD", "s", "5-*", "f", "v"])
        assert (request.id, request.seq_given) == (StreamId(5, 0), False)

    def test_odd_field_count_is_an_arity_error(self) -> None:
        assert error_of(parse_xadd, ["XADD", "s", "*", "f"]) == "ERR wrong number of arguments for 'xadd' command"

    def test_maxlen_and_minid_together_are_refused(self) -> None:
        argv = ["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"]
        assert error_of(parse_xadd, argv) == (
            "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
        )

    def test_limit_needs_the_tilde(self) -> None:
        argv = ["XADD", "s", "MAXLEN", "1", "LIMIT", "5", "*", "f", "v"]
        assert error_of(parse_xadd, argv) == "ERR syntax error, LIMIT cannot be used without the special ~ option"

    def test_negative_maxlen_is_refused(self) -> None:
        assert error_of(parse_xadd, ["XADD", "s", "MAXLEN", "-1", "*", "f", "v"]) == (
            "ERR The MAXLEN argument must be >= 0."
        )

    def test_an_unknown_word_is_taken_as_an_invalid_id(self) -> None:
        assert error_of(parse_xadd, ["XADD", "s", "NOPE", "f", "v"]) == (
            "ERR Invalid stream ID specified as stream command argument"
        )

    def test_approximate_trim_without_limit_gets_redis_default_cap(self) -> None:
        trim = parse_xadd(["XADD", "s", "MAXLEN", "~", "10", "*", "f", "v"]).trim
        assert trim is not None
        assert (trim.approximate, trim.limit, trim.max_length) == (True, 10_000, 10)


class TestXtrimAndXsetid:
    def test_xtrim_without_strategy_is_refused(self) -> None:
        assert error_of(parse_xtrim, ["XTRIM", "s", "LIMIT", "5"]) == (
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
        )

    def test_xtrim_with_an_unknown_word_is_a_syntax_error(self) -> None:
        assert error_of(parse_xtrim, ["XTRIM", "s", "MAXLEN", "1", "junk"]) == "ERR syntax error"

    def test_xsetid_max_deleted_above_the_id_is_refused(self) -> None:
        assert error_of(parse_xsetid, ["XSETID", "s", "5-0", "MAXDELETEDID", "6-0"]) == (
            "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
        )

    def test_xsetid_negative_entries_added_is_refused(self) -> None:
        assert error_of(parse_xsetid, ["XSETID", "s", "5-0", "ENTRIESADDED", "-1"]) == (
            "ERR entries_added must be positive"
        )


class TestTrimPolicies:
    def test_policy_defaults_to_keepref_and_may_come_before_or_after_the_strategy(self) -> None:
        assert parse_xtrim(["XTRIM", "s", "MAXLEN", "1"]).policy is RefPolicy.KEEPREF
        assert parse_xtrim(["XTRIM", "s", "acked", "MINID", "5"]).policy is RefPolicy.ACKED
        trim = parse_xtrim(["XTRIM", "s", "MAXLEN", "~", "1", "DELREF", "LIMIT", "7"])
        assert (trim.policy, trim.approximate, trim.limit) == (RefPolicy.DELREF, True, 7)

    def test_xadd_takes_a_policy_among_its_options(self) -> None:
        request = parse_xadd(["XADD", "s", "NOMKSTREAM", "ACKED", "MAXLEN", "2", "*", "f", "v"])
        assert request.nomkstream and request.trim is not None and request.trim.policy is RefPolicy.ACKED

    def test_a_second_policy_is_a_syntax_error_in_xtrim_and_an_id_error_in_xadd(self) -> None:
        assert error_of(parse_xtrim, ["XTRIM", "s", "MAXLEN", "1", "KEEPREF", "ACKED"]) == "ERR syntax error"
        assert error_of(parse_xtrim, ["XTRIM", "s", "ACKED", "MAXLEN", "1", "ACKED"]) == "ERR syntax error"
        assert error_of(parse_xadd, ["XADD", "s", "KEEPREF", "DELREF", "*", "f", "v"]) == (
            "ERR Invalid stream ID specified as stream command argument"
        )


class TestRanges:
    def test_xrevrange_parses_its_start_from_the_last_argument(self) -> None:
        request = parse_xrange(["XREVRANGE", "s", "+", "(5"], reverse=True)
        assert (request.low, request.high) == (StreamId(5, 1), StreamId(2**64 - 1, 2**64 - 1))

    def test_negative_count_counts_as_zero(self) -> None:
        assert parse_xrange(["XRANGE", "s", "-", "+", "COUNT", "-3"], reverse=False).count == 0

    def test_count_without_value_is_a_syntax_error(self) -> None:
        assert error_of(parse_xrange, ["XRANGE", "s", "-", "+", "COUNT"], False) == "ERR syntax error"


class TestXpending:
    def test_summary_form_has_three_arguments(self) -> None:
        assert parse_xpending(["XPENDING", "s", "g"]).extended is False

    def test_four_arguments_are_a_syntax_error(self) -> None:
        assert error_of(parse_xpending, ["XPENDING", "s", "g", "-"]) == "ERR syntax error"

    def test_idle_needs_the_full_range(self) -> None:
        assert error_of(parse_xpending, ["XPENDING", "s", "g", "IDLE", "5", "-", "+"]) == "ERR syntax error"

    def test_count_is_parsed_before_the_range(self) -> None:
        assert error_of(parse_xpending, ["XPENDING", "s", "g", "bad", "+", "x"]) == (
            "ERR value is not an integer or out of range"
        )

    def test_trailing_arguments_after_the_consumer_are_ignored(self) -> None:
        request = parse_xpending(["XPENDING", "s", "g", "-", "+", "10", "alice", "junk"])
        assert (request.consumer, request.count) == ("alice", 10)


class TestXreadgroup:
    def test_missing_group_is_reported_after_streams(self) -> None:
        assert error_of(parse_read, ["XREADGROUP", "STREAMS", "s", ">"]) == "ERR Missing GROUP option for XREADGROUP"

    def test_an_odd_stream_list_uses_redis_7_0_text(self) -> None:
        assert error_of(parse_read, ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">"]) == (
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
        )

    def test_group_option_in_xread_is_refused(self) -> None:
        assert error_of(parse_read, ["XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"]) == (
            "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
        )

    def test_negative_block_is_refused(self) -> None:
        assert error_of(parse_read, ["XREAD", "BLOCK", "-1", "STREAMS", "s", "0"]) == "ERR timeout is negative"

    def test_options_repeat_and_the_last_wins(self) -> None:
        request = parse_read(["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "count", "7", "STREAMS", "s", ">"])
        assert (request.group, request.consumer, request.count, request.keys) == ("g", "c", 7, ("s",))


class TestClaims:
    def test_xclaim_takes_ids_until_the_first_non_id(self) -> None:
        request = parse_xclaim(["XCLAIM", "s", "g", "c", "10", "1-0", "2", "JUSTID", "FORCE"])
        assert request.ids == (StreamId(1, 0), StreamId(2, 0))
        assert (request.just_id, request.force) == (True, True)

    def test_an_id_after_an_option_is_an_unrecognized_option(self) -> None:
        argv = ["XCLAIM", "s", "g", "c", "10", "1-0", "JUSTID", "2-0"]
        assert error_of(parse_xclaim, argv) == "ERR Unrecognized XCLAIM option '2-0'"

    def test_bad_min_idle_names_xclaim(self) -> None:
        assert error_of(parse_xclaim, ["XCLAIM", "s", "g", "c", "x", "1-0"]) == (
            "ERR Invalid min-idle-time argument for XCLAIM"
        )

    def test_the_later_of_idle_and_time_wins_and_bogus_values_collapse_to_now(self) -> None:
        idle_then_time = parse_xclaim(["XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "5", "TIME", "1000"])
        time_then_idle = parse_xclaim(["XCLAIM", "s", "g", "c", "0", "1-0", "TIME", "1000", "IDLE", "5"])
        assert delivery_time(idle_then_time, now=10_000) == 1000
        assert delivery_time(time_then_idle, now=10_000) == 9995
        assert delivery_time(XClaim(0, (), time=99_999, delivery_from="time"), now=10_000) == 10_000
        assert delivery_time(XClaim(0, (), idle=-5, delivery_from="idle"), now=10_000) == 10_000

    def test_xautoclaim_count_zero_and_too_large_share_one_error(self) -> None:
        for count in ("0", "-1", "576460752303423488", "x"):
            assert error_of(parse_xautoclaim, ["XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", count]) == (
                "ERR COUNT must be > 0"
            )

    def test_xautoclaim_exclusive_start_moves_past_the_id(self) -> None:
        assert parse_xautoclaim(["XAUTOCLAIM", "s", "g", "c", "0", "(5-5"]).start == StreamId(5, 6)


class TestAckDelTail:
    """XACKDEL/XDELEX's ``[KEEPREF | DELREF | ACKED] IDS numids id ...`` (redis8 reference §3)."""

    def test_the_policy_defaults_to_keepref_and_may_follow_the_ids(self) -> None:
        assert parse_ackdel_tail(["IDS", "2", "1-0", "2-0"]) == AckDel(RefPolicy.KEEPREF, ("1-0", "2-0"))
        assert parse_ackdel_tail(["IDS", "1", "1-0", "acked"]) == AckDel(RefPolicy.ACKED, ("1-0",))
        assert parse_ackdel_tail(["DelRef", "IDS", "1", "1-0"]) == AckDel(RefPolicy.DELREF, ("1-0",))

    @pytest.mark.parametrize(
        ("tail", "error"),
        [
            (["IDS", "0", "1-0"], "ERR Number of IDs must be a positive integer"),
            (["IDS", "x", "1-0"], "ERR Number of IDs must be a positive integer"),
            (["IDS", "3", "1-1", "2-2"], "ERR The `numids` parameter must match the number of arguments"),
            (["IDS", "1", "1-1", "2-2"], "ERR syntax error"),
            (["KEEPREF", "DELREF", "IDS", "1", "1-1"], "ERR syntax error"),
            (["KEEPREF", "IDS"], "ERR syntax error"),
            (["KEEPREF"], "ERR IDS option is required"),
        ],
        ids=["zero", "not-a-number", "too-few-ids", "surplus-id", "two-policies", "ids-at-the-end", "no-ids"],
    )
    def test_bad_tails_get_redis_errors(self, tail: list[str], error: str) -> None:
        assert error_of(parse_ackdel_tail, tail) == error


class TestXreadgroupClaim:
    """``CLAIM min-idle-time`` (Redis 8.4; redis8 reference §1, examples E5)."""

    def test_claim_may_come_anywhere_before_streams_and_the_last_value_wins(self) -> None:
        argv = ["XREADGROUP", "CLAIM", "50", "GROUP", "g", "c", "COUNT", "1", "CLAIM", "60", "STREAMS", "s", ">"]
        request = parse_read(argv)
        assert (request.group, request.consumer, request.count, request.claim_min_idle) == ("g", "c", 1, 60)
        assert parse_read(["XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "s", ">"]).claim_min_idle == 0

    @pytest.mark.parametrize(
        ("argv", "error"),
        [
            (
                ["XREAD", "COUNT", "2", "CLAIM", "10", "STREAMS", "s", "0-0"],
                "ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.",
            ),
            (
                ["XREADGROUP", "GROUP", "g", "c", "CLAIM", "-10", "STREAMS", "s", ">"],
                "ERR min-idle-time must be a positive integer",
            ),
            *(
                (
                    ["XREADGROUP", "GROUP", "g", "c", "CLAIM", value, "STREAMS", "s", ">"],
                    "ERR min-idle-time is not an integer or out of range",
                )
                for value in ("5.5", "abc", "+10", "-0", "10e")
            ),
            (
                ["XREADGROUP", "GROUP", "g", "c", "CLAIM", "STREAMS", "s", ">"],
                "ERR min-idle-time is not an integer or out of range",
            ),
            (["XREADGROUP", "GROUP", "g", "CLAIM", "50", "c1", "STREAMS", "s", ">"], "ERR syntax error"),
            (
                ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", "CLAIM"],
                "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
            ),
        ],
        ids=[
            "xread",
            "negative",
            "decimal",
            "word",
            "plus",
            "minus-zero",
            "exponent",
            "keyword",
            "group-takes-claim",
            "after-streams",
        ],
    )
    def test_bad_claims_get_redis_errors(self, argv: list[str], error: str) -> None:
        assert error_of(parse_read, argv) == error


class TestXnack:
    """XNACK's tail after key and group (Redis 8.8; redis8 reference §2, N6). The doubled ``ERR`` is what
    Redis' source sends for these texts (docs/DESIGN.md, "Redis 8 commands")."""

    def test_options_come_in_any_order_around_the_ids(self) -> None:
        assert parse_xnack_tail(["fail", "FORCE", "IDS", "2", "1-0", "2-0", "RETRYCOUNT", "3"]) == XNack(
            NackMode.FAIL, ("1-0", "2-0"), 3, True
        )
        assert parse_xnack_tail(["SILENT", "RETRYCOUNT", "0", "IDS", "1", "1-0"]) == XNack(NackMode.SILENT, ("1-0",), 0)

    @pytest.mark.parametrize(
        ("tail", "error"),
        [
            (["BADMODE", "IDS", "1", "1-0"], "ERR ERR mode must be SILENT, FAIL, or FATAL"),
            (["SILENT", "IDS", "0", "1-0"], "ERR numids must be a positive integer"),
            (["SILENT", "IDS", "2147483648", "1-0"], "ERR numids must be a positive integer"),
            (["SILENT", "IDS", "x", "1-0"], "ERR numids must be a positive integer"),
            (["FAIL", "IDS", "3", "1-0", "2-0"], "ERR ERR number of IDs doesn't match numids"),
            (["FAIL", "FATAL", "IDS", "1", "1-0"], "ERR ERR Unrecognized XNACK option 'FATAL'"),
            (["FAIL", "IDS", "1", "1-0", "2-0"], "ERR ERR Unrecognized XNACK option '2-0'"),
            (["FAIL", "IDS", "1", "1-0", "RETRYCOUNT"], "ERR ERR Unrecognized XNACK option 'RETRYCOUNT'"),
            (["FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "x"], "ERR value is not an integer or out of range"),
            (["FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1"], "ERR ERR Invalid RETRYCOUNT value, must be >= 0"),
            (["FAIL", "FORCE", "RETRYCOUNT", "1"], "ERR ERR syntax error, expected IDS keyword"),
        ],
        ids=[
            "mode",
            "numids-zero",
            "numids-over-int-max",
            "numids-word",
            "too-few-ids",
            "second-mode",
            "surplus-id",
            "retrycount-at-the-end",
            "retrycount-word",
            "retrycount-negative",
            "no-ids",
        ],
    )
    def test_bad_tails_get_the_texts_redis_source_sends(self, tail: list[str], error: str) -> None:
        assert error_of(parse_xnack_tail, tail) == error

    def test_the_mode_sets_the_count_unless_retrycount_does(self) -> None:
        assert [nacked_count(mode, None, 3) for mode in NackMode] == [2, 3, 2**63 - 1]
        assert nacked_count(NackMode.SILENT, None, 0) == 0
        assert nacked_count(NackMode.FATAL, 7, 3) == 7

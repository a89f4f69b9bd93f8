"""The console scripts' flags as config overrides (no Spark is started)."""

from __future__ import annotations

import os

import pytest

from streamclaim_spark.cli import flags, maintain, recover, redrive
from streamclaim_spark.cli.serve import build_parser as server_parser
from streamclaim_spark.cli.serve import overrides_from as server_overrides
from streamclaim_spark.errors import ConfigError

JOB = ("jobs", "recover_stale")


def test_no_flags_override_nothing() -> None:
    assert flags.overrides_from(recover.build_parser().parse_args([])) == {}
    assert server_overrides(server_parser().parse_args([]), {}) == {}


def test_each_recovery_flag_overrides_its_key_and_is_named_in_errors() -> None:
    argv = ["--store", "rel/store", "--single-writer", "--streams", "a", "b*", "--groups", "g"]
    argv += ["--min-idle", "5m", "--assign", "live", "--consumer", "c", "--live-window", "1h", "--no-dead-letter"]
    argv += ["--max-deliveries", "3", "--dry-run", "--master", "local[1]", "--shuffle-partitions", "2"]
    argv += ["--driver-memory", "2g", "--spark-log-level", "ERROR", "--log-level", "debug"]
    argv += ["--spark-conf", "spark.a=1", "--spark-conf", " spark.b =x=y"]

    overrides = flags.overrides_from(recover.build_parser().parse_args(argv))

    assert overrides == {
        ("store", "path"): (os.path.abspath("rel/store"), "--store"),
        ("store", "single_writer"): (True, "--single-writer"),
        (*JOB, "streams"): (["a", "b*"], "--streams"),
        (*JOB, "groups"): (["g"], "--groups"),
        (*JOB, "min_idle"): ("5m", "--min-idle"),
        (*JOB, "assign"): ("live", "--assign"),
        (*JOB, "consumer"): ("c", "--consumer"),
        (*JOB, "live_window"): ("1h", "--live-window"),
        (*JOB, "dead_letter"): (False, "--dead-letter"),
        (*JOB, "max_deliveries"): (3, "--max-deliveries"),
        (*JOB, "dry_run"): (True, "--dry-run"),
        ("spark", "master"): ("local[1]", "--master"),
        ("spark", "shuffle_partitions"): (2, "--shuffle-partitions"),
        ("spark", "driver_memory"): ("2g", "--driver-memory"),
        ("spark", "log_level"): ("ERROR", "--spark-log-level"),
        ("spark", "conf", "spark.a"): ("1", "--spark-conf"),
        ("spark", "conf", "spark.b"): ("x=y", "--spark-conf"),
    }


def test_each_redrive_flag_overrides_its_key_in_jobs_redrive_only() -> None:
    argv = ["--streams", "orders-*", "--groups", "g", "--where", "reason = 'XNACK FATAL'", "--reset-count"]
    argv += ["--max-redrives", "3", "--limit", "1000", "--to-stream", "orders-redriven", "--dry-run"]

    overrides = flags.overrides_from(redrive.build_parser().parse_args(argv), ("jobs", "redrive"))

    job = ("jobs", "redrive")
    assert overrides == {
        (*job, "streams"): (["orders-*"], "--streams"),
        (*job, "groups"): (["g"], "--groups"),
        (*job, "where"): ("reason = 'XNACK FATAL'", "--where"),
        (*job, "reset_count"): (True, "--reset-count"),
        (*job, "max_redrives"): (3, "--max-redrives"),
        (*job, "limit"): (1000, "--limit"),
        (*job, "to_stream"): ("orders-redriven", "--to-stream"),
        (*job, "dry_run"): (True, "--dry-run"),
    }


@pytest.mark.parametrize("setting", ["spark.a", "=1"])
def test_a_spark_conf_flag_without_a_name_and_value_is_refused(setting: str) -> None:
    args = recover.build_parser().parse_args(["--spark-conf", setting])
    with pytest.raises(ConfigError, match=r"write it as KEY=VALUE"):
        flags.overrides_from(args)


def test_each_server_flag_overrides_its_key_and_the_password_flag_beats_the_environment() -> None:
    argv = ["--store", "s", "--single-writer", "--bind", "::1", "--port", "0", "--requirepass", "flag"]
    argv += ["--max-clients", "2", "--allow-flush", "--batch-max-commands", "3", "--master", "m", "--log-level", "x"]

    overrides = server_overrides(server_parser().parse_args(argv), {"STREAMCLAIM_REQUIREPASS": "env"})

    assert overrides == {
        ("store", "path"): (os.path.abspath("s"), "--store"),
        ("server", "requirepass"): ("flag", "--requirepass"),
        ("store", "single_writer"): (True, "--single-writer"),
        ("server", "bind"): ("::1", "--bind"),
        ("server", "port"): (0, "--port"),
        ("server", "max_clients"): (2, "--max-clients"),
        ("server", "allow_flush"): (True, "--allow-flush"),
        ("server", "batch_max_commands"): (3, "--batch-max-commands"),
        ("spark", "master"): ("m", "--master"),
    }
    from_env = server_overrides(server_parser().parse_args([]), {"STREAMCLAIM_REQUIREPASS": "e"})
    assert from_env == {("server", "requirepass"): ("e", "STREAMCLAIM_REQUIREPASS")}


@pytest.mark.parametrize("store", ["s3a://bucket/streams", "abfss://c@a.dfs.core.windows.net/s", "file:/tmp/s"])
def test_a_store_url_flag_is_kept_as_given_by_both_console_scripts(store: str) -> None:
    assert flags.overrides_from(recover.build_parser().parse_args(["--store", store]))[("store", "path")] == (
        store,
        "--store",
    )
    server_args = server_parser().parse_args(["--store", store])
    assert server_overrides(server_args, {})[("store", "path")] == (store, "--store")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--repair"], "--repair goes with --verify"),
        (["--verify", "--retain", "1h"], "--verify checks the kept counts instead of maintaining"),
        (["--verify", "--ignore-readers"], "--verify checks the kept counts instead of maintaining"),
    ],
)
def test_maintenance_flags_that_do_not_go_with_a_count_check_are_refused_before_spark_starts(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert maintain.main(["--store", "/nowhere", *argv]) == maintain.EXIT_CONFIG
    assert said in capsys.readouterr().err

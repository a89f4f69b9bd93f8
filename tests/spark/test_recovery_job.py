"""The recovery job as users run it: conf/ layering, the console script, and the real spark-submit.

The configuration tests are pure Python (no Spark). The end-to-end test builds a store in this process,
runs ``spark-submit jobs/recover_stale.py`` (pyspark's own launcher, a separate driver JVM) against it, and
checks the tables the job wrote. The store's clock is anchored to the wall clock because the job uses it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.cli import recover
from streamclaim_spark.core import constants as C
from streamclaim_spark.core.config import RecoveryOptions, ServerConfig, SparkConfig, StoreConfig
from streamclaim_spark.core.config_loader import load_config
from streamclaim_spark.errors import ConfigError, UnsafeObjectStoreError
from streamclaim_spark.state.columns import id_text
from streamclaim_spark.state.session import DELTA_PACKAGE
from streamclaim_spark.state.tables import table_path

REPO = Path(__file__).resolve().parents[2]
BASE_TOML = REPO / "conf" / "base.toml"
JOB = REPO / "jobs" / "recover_stale.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
CONSOLE_SCRIPT = Path(sys.executable).parent / "streamclaim-recover"
HOUR = 3_600_000


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    """A conf/ folder holding a copy of the committed base.toml and no local.toml."""
    folder = tmp_path / "project" / "conf"
    folder.mkdir(parents=True)
    shutil.copy(BASE_TOML, folder / "base.toml")
    return folder


def job_env() -> dict[str, str]:
    """The environment for a job process: Spark's Python is this venv's, whatever PATH says."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


# --- configuration (no Spark) -------------------------------------------------------------------------


def test_the_committed_base_toml_loads_with_its_documented_defaults() -> None:
    config = load_config(REPO / "conf", local=False)

    assert config.store == StoreConfig(path=str(REPO / "data" / "store"), database="streamclaim", single_writer=False)
    assert config.spark == SparkConfig(
        app_name="streamclaim-recover",
        master="local[*]",
        shuffle_partitions=4,
        driver_memory=None,
        log_level="WARN",
        conf={"spark.sql.session.timeZone": "UTC"},
    )
    assert config.recover_stale == RecoveryOptions(
        min_idle_ms=5 * 60_000, assign="consumer", consumer="recovery", live_window_ms=10 * 60_000, max_deliveries=10
    )
    assert config.server == ServerConfig(bind="127.0.0.1", port=6390, requirepass="", allow_flush=False)


def test_local_toml_overrides_base_key_by_key_and_flags_override_both(conf_dir: Path) -> None:
    (conf_dir / "local.toml").write_text(
        '[store]\npath = "/data/dev"\n\n'
        '[spark.conf]\n"spark.sql.adaptive.enabled" = false\n\n'
        '[jobs.recover_stale]\nmin_idle = "30s"\nassign = "live"\n'
    )
    flags: dict[tuple[str, ...], tuple[Any, str]] = {("jobs", "recover_stale", "assign"): ("consumer", "--assign")}

    config = load_config(conf_dir, flags)

    assert config.store.path == "/data/dev"
    assert config.spark.conf == {"spark.sql.session.timeZone": "UTC", "spark.sql.adaptive.enabled": "false"}
    assert (config.recover_stale.min_idle_ms, config.recover_stale.assign) == (30_000, "consumer")
    assert config.recover_stale.max_deliveries == 10  # untouched keys keep the base value
    assert config.sources == (str(conf_dir / "base.toml"), str(conf_dir / "local.toml"))


def test_a_relative_store_path_in_a_conf_file_is_relative_to_the_project_folder(conf_dir: Path) -> None:
    assert load_config(conf_dir).store.path == str(conf_dir.parent / "data" / "store")


@pytest.mark.parametrize(
    ("local_toml", "message"),
    [
        (
            '[jobs.recover_stale]\nmin_idel = "5m"\n',
            "local.toml: unknown key jobs.recover_stale.min_idel; did you mean jobs.recover_stale.min_idle?",
        ),
        (
            '[jobs.recover_stale]\nmin_idle = "five minutes"\n',
            "local.toml: jobs.recover_stale.min_idle = 'five minutes' is not a duration; write a whole number "
            'with a unit, e.g. "250ms", "90s", "5m"',
        ),
        ('[jobs.recover_stale]\nassign = "random"\n', "jobs.recover_stale.assign = 'random' must be \"consumer\""),
        ("[jobs.recover_stale]\nmax_deliveries = 0\n", "max_deliveries = 0 must be a whole number of 1 or more"),
        ('[spark]\nshuffle_partitions = "8"\n', "spark.shuffle_partitions = '8' must be a whole number"),
        ('[spark.conf]\n"spark.driver.memory" = "4g"\n', "set it through [spark] driver_memory instead"),
        ("[spark.conf]\nspark.sql.adaptive.enabled = true\n", 'quote the whole name, e.g. "spark.sql.adaptive'),
        ("[store\npath = 1\n", "local.toml: not valid TOML"),
    ],
)
def test_a_bad_conf_key_is_named_with_its_file_and_the_fix(conf_dir: Path, local_toml: str, message: str) -> None:
    (conf_dir / "local.toml").write_text(local_toml)

    with pytest.raises(ConfigError, match=None) as error:
        load_config(conf_dir)

    assert message in str(error.value)


def test_a_conf_dir_without_base_toml_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass --conf-dir"):
        load_config(tmp_path)


def test_the_console_script_exits_2_on_a_bad_flag_value_before_starting_spark(conf_dir: Path) -> None:
    started = subprocess.run(
        [str(CONSOLE_SCRIPT), "--conf-dir", str(conf_dir), "--min-idle", "soon"],
        capture_output=True,
        text=True,
        env=job_env(),
        timeout=300,
    )

    assert started.returncode == recover.EXIT_CONFIG
    assert "--min-idle: jobs.recover_stale.min_idle = 'soon' is not a duration" in started.stderr
    assert started.stdout == ""


# --- against a store --------------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_missing_store_exits_3_and_creates_nothing(
    spark: SparkSession, conf_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-store-here"
    config = load_config(conf_dir, {("store", "path"): (str(missing), "--store")})

    assert recover.run_job(config, spark=spark) == recover.EXIT_NO_STORE

    assert f"no store at {missing}" in capsys.readouterr().err
    assert not missing.exists()


@pytest.mark.spark
def test_s3_without_the_dynamodb_log_store_is_refused_before_anything_touches_the_bucket(
    spark: SparkSession, conf_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # This session has no S3A connector: any read or write of the path would fail with a missing class.
    config = load_config(conf_dir, {("store", "path"): ("s3a://bucket/streams", "--store")})

    assert recover.run_job(config, spark=spark) == recover.EXIT_CONFIG

    error = capsys.readouterr().err
    assert error.startswith("streamclaim-recover: path=s3a://bucket/streams: Delta commits to s3a:// through ")
    assert "spark.delta.logStore.s3a.impl=io.delta.storage.S3DynamoDBLogStore" in error
    with pytest.raises(UnsafeObjectStoreError, match=r"single_writer=True"):
        StreamStore.open("s3a://bucket/streams", spark=spark)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_submit_runs_the_job_and_its_maintenance_and_leaves_the_tables_as_the_summary_says(
    spark: SparkSession, conf_dir: Path, tmp_path: Path
) -> None:
    # The store: e0..e3 delivered to alice two hours ago; e0 delivered 5 times (poison for max_deliveries=3).
    clock = lambda: time.time_ns() // 1_000_000 - 2 * HOUR  # noqa: E731
    store = StreamStore.open(str(tmp_path / "store"), spark=spark, clock=clock)
    first = store.append("orders", spark.range(4).select(F.col("id").alias("n"))).first_id
    assert first is not None
    ids = [f"{first.ms}-{i}" for i in range(4)]
    assert store.execute("XGROUP", "CREATE", "orders", "billing", "0") == "OK"
    assert store.deliver("orders", "billing", "alice").count == 4
    assert store.execute("XCLAIM", "orders", "billing", "alice", "0", ids[0], "RETRYCOUNT", "5", "JUSTID") == ids[:1]
    (conf_dir / "local.toml").write_text('[jobs.recover_stale]\nmin_idle = "30m"\n\n[spark]\nlog_level = "ERROR"\n')
    command = [str(SPARK_SUBMIT), "--master", "local[1]", "--packages", DELTA_PACKAGE]
    command += ["--conf", "spark.ui.enabled=false", str(JOB), "--conf-dir", str(conf_dir)]
    command += ["--store", store.path, "--max-deliveries", "3", "--summary-file", str(tmp_path / "summary.json")]
    command += ["--maintain", "--backoff", "1m,1h"]  # e0 (5 deliveries) is idle past its 1-hour step
    command += ["--metrics-file", str(tmp_path / "recover.prom")]

    job = subprocess.run(command, capture_output=True, text=True, env=job_env(), cwd=tmp_path, timeout=900)

    assert job.returncode == recover.EXIT_OK, job.stderr[-5000:]
    # spark-submit merges the job's stderr into its stdout; the summary is the last JSON line.
    printed = [line for line in job.stdout.splitlines() if line.startswith("{")][-1]
    assert json.loads(printed) == json.loads((tmp_path / "summary.json").read_text())
    summary = json.loads(printed)
    assert (summary["status"], summary["dry_run"], summary["recorded"]) == ("succeeded", False, True)
    assert summary["options"]["min_idle_ms"] == 30 * 60_000  # from local.toml
    assert summary["options"]["backoff"] == "1m,1h"
    # --maintain: each of the store's tables maintained after the run, within Delta's 7 days of history.
    maintenance = summary["maintenance"]
    assert (maintenance["retention"], sorted(maintenance["tables"])) == (
        "7d",
        ["dead_letters", "recovery_runs", "state"],
    )
    # A few commands leave no bucket with 50 small files: nothing compacted, nothing old enough to remove.
    assert all(table["removed"]["data"]["files"] == 0 for table in maintenance["tables"].values())
    assert all(table["compaction"]["files_removed"] == 0 for table in maintenance["tables"].values())
    assert summary["totals"] == {
        "groups": 1,
        "scanned": 4,
        "stale": 4,
        "claimed": 3,
        "purged": 0,
        "dead_lettered": 1,
        "dead_letters_withdrawn": 0,
        "conflicts_retried": 0,
        "skipped": 0,
    }
    # Progress in the log: each step, then each group.
    assert "claim committed (state version" in job.stdout
    assert "orders/billing: 4 pending, 4 stale" in job.stdout
    pending = (
        store.snapshot()
        .frame()
        .where(F.col(C.ROW_KIND) == C.KIND_PENDING)
        .select(id_text(C.ID_MS, C.ID_SEQ).alias("id"), C.OWNER, C.DELIVERY_COUNT)
    )
    assert sorted(pending.collect()) == [(entry_id, "recovery", 2) for entry_id in ids[1:]]
    letters = spark.read.format("delta").load(table_path(store.path, C.DEAD_LETTER_TABLE_DIR))
    assert letters.select("run_id", "id", C.OWNER, C.DELIVERY_COUNT).collect() == [
        (summary["run_id"], ids[0], "alice", 5)
    ]
    runs = spark.read.format("delta").load(table_path(store.path, C.RECOVERY_RUNS_TABLE_DIR))
    assert runs.select("run_id", "status", "claimed", "dead_lettered").collect() == [
        (summary["run_id"], "succeeded", 3, 1)
    ]
    # --metrics-file: the group's numbers after the run and the run's own, parsed by the client library.
    metrics_file = str(tmp_path / "recover.prom")
    assert summary["metrics"] == {"file": metrics_file, "pushgateway": None, "error": None, "groups": 1}
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families((tmp_path / "recover.prom").read_text())
        for sample in family.samples
    }
    group = (("group", "billing"), ("stream", "orders"))
    oldest = samples.pop(("streamclaim_oldest_pending_idle_seconds", group))
    ended = samples.pop(("streamclaim_recovery_last_run_timestamp_seconds", ()))
    took = samples.pop(("streamclaim_recovery_last_run_duration_seconds", ()))
    assert samples == {
        ("streamclaim_pending_entries", group): 3,
        ("streamclaim_stale_entries", group): 0,  # just claimed; stale means idle 30 minutes (--min-idle)
        ("streamclaim_nacked_entries", group): 0,
        ("streamclaim_group_lag", group): 0,
        ("streamclaim_consumers", group): 2,  # alice, recovery
        ("streamclaim_max_delivery_count", group): 2,
        ("streamclaim_dead_letters_last_day", group): 1,
        ("streamclaim_stale_after_seconds", ()): 1800,
        ("streamclaim_recovery_last_run_success", ()): 1,
        ("streamclaim_recovery_last_run_entries", (("outcome", "claimed"),)): 3,
        ("streamclaim_recovery_last_run_entries", (("outcome", "purged"),)): 0,
        ("streamclaim_recovery_last_run_entries", (("outcome", "dead_lettered"),)): 1,
        ("streamclaim_recovery_last_run_skipped_groups", ()): 0,
    }
    assert 0 <= oldest < 600 and 0 <= took < 600
    assert abs(ended - time.time()) < 900


@pytest.mark.slow
def test_spark_submit_exits_2_on_bad_config_before_building_a_session(conf_dir: Path, tmp_path: Path) -> None:
    (conf_dir / "local.toml").write_text('[jobs.recover_stale]\nassign = "everyone"\n')
    command = [str(SPARK_SUBMIT), "--master", "local[1]", str(JOB), "--conf-dir", str(conf_dir)]

    job = subprocess.run(command, capture_output=True, text=True, env=job_env(), cwd=tmp_path, timeout=600)

    assert job.returncode == recover.EXIT_CONFIG
    output = job.stdout + job.stderr  # spark-submit passes the job's stderr on through its stdout
    assert "config error: " in output and "jobs.recover_stale.assign = 'everyone'" in output
    assert "SparkContext: Running Spark version" not in output

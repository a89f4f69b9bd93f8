"""conf/ loading without Spark: the key schema, its error texts, store paths and the flags' overrides."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from streamclaim_spark.core.backoff import Backoff
from streamclaim_spark.core.config import (
    AppConfig,
    RecoveryOptions,
    RedriveOptions,
    ServerConfig,
    SparkConfig,
    StoreConfig,
    resolve_store_path,
)
from streamclaim_spark.core.config_loader import known_keys, load_config
from streamclaim_spark.errors import ConfigError, StreamclaimError

REPO = Path(__file__).resolve().parents[2]
KEYS = [
    "store.path",
    "store.database",
    "store.single_writer",
    "store.history_retention",
    "store.placement.force",
    "store.placement.driver_bytes",
    "store.placement.apply_rows",
    "store.placement.recount_rows",
    "store.placement.prefetch_rows",
    "store.placement.decide_rows",
    "store.placement.remove_rows",
    "store.placement.rewrite_rows",
    "store.placement.count_rows",
    "store.placement.import_rows",
    "store.placement.ack_ids",
    "spark.app_name",
    "spark.master",
    "spark.shuffle_partitions",
    "spark.driver_memory",
    "spark.log_level",
    "spark.remote",
    "jobs.recover_stale.streams",
    "jobs.recover_stale.groups",
    "jobs.recover_stale.min_idle",
    "jobs.recover_stale.assign",
    "jobs.recover_stale.consumer",
    "jobs.recover_stale.live_window",
    "jobs.recover_stale.dead_letter",
    "jobs.recover_stale.max_deliveries",
    "jobs.recover_stale.dry_run",
    "jobs.recover_stale.backoff",
    "jobs.recover_stale.policies",
    "server.bind",
    "server.port",
    "server.requirepass",
    "server.max_clients",
    "server.max_bulk_bytes",
    "server.max_arguments",
    "server.allow_flush",
    "server.batch_max_commands",
    "server.batch_max_bytes",
    "server.maintain",
    "server.maintain_every",
    "server.maintain_after_batches",
    "jobs.redrive.streams",
    "jobs.redrive.groups",
    "jobs.redrive.where",
    "jobs.redrive.reset_count",
    "jobs.redrive.max_redrives",
    "jobs.redrive.limit",
    "jobs.redrive.to_stream",
    "jobs.redrive.dry_run",
    "spark.conf",
]


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    """A conf/ folder with a one-key base.toml."""
    folder = tmp_path / "project" / "conf"
    folder.mkdir(parents=True)
    (folder / "base.toml").write_text('[store]\npath = "/data/s"\n')
    return folder


def load_local(conf_dir: Path, local_toml: str) -> AppConfig:
    (conf_dir / "local.toml").write_text(local_toml)
    return load_config(conf_dir)


def test_the_files_may_set_these_keys() -> None:
    assert sorted(known_keys()) == sorted(KEYS)


def test_conf_readme_documents_every_key() -> None:
    keys_section = (REPO / "conf" / "README.md").read_text().split("## Keys", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_.]+)(?:\.\"spark\.\*\")?` \|", keys_section, re.MULTILINE))
    assert documented == set(KEYS)


def test_a_config_without_files_beyond_the_store_path_has_the_dataclass_defaults(conf_dir: Path) -> None:
    config = load_config(conf_dir)

    assert config == AppConfig(
        store=StoreConfig(path="/data/s"),
        spark=SparkConfig(),
        recover_stale=RecoveryOptions(),
        sources=(str(conf_dir / "base.toml"),),
        server=ServerConfig(),
    )


def test_every_key_is_parsed_into_its_field(conf_dir: Path) -> None:
    config = load_local(
        conf_dir,
        '[store]\ndatabase = "db_2"\nsingle_writer = true\nhistory_retention = "10m"\n'
        '[spark]\napp_name = "a"\nmaster = "local[1]"\nshuffle_partitions = 3\ndriver_memory = "2g"\n'
        'log_level = "error"\nremote = "sc://spark-connect:15002"\n'
        '[spark.conf]\n"spark.x" = 1\n"spark.y" = true\n'
        '[jobs.recover_stale]\nstreams = ["o-*"]\ngroups = ["g"]\nmin_idle = "90s"\nassign = "nack"\n'
        'consumer = "c"\nlive_window = 5\ndead_letter = false\nmax_deliveries = 2\ndry_run = true\n'
        'backoff = "1m,5m"\n'
        '[server]\nbind = "::1"\nport = 0\nrequirepass = "p"\nmax_clients = 2\nmax_bulk_bytes = 3\n'
        "max_arguments = 4\nallow_flush = true\nbatch_max_commands = 5\nbatch_max_bytes = 6\nmaintain = false\n"
        'maintain_every = "2m"\nmaintain_after_batches = 7\n'
        '[jobs.redrive]\nstreams = ["o-*"]\ngroups = ["g"]\nwhere = "reason = \'XNACK FATAL\'"\nreset_count = true\n'
        'max_redrives = 3\nlimit = 1000\nto_stream = "o-redriven"\ndry_run = true\n',
    )

    assert config.store == StoreConfig(
        path="/data/s", database="db_2", single_writer=True, history_retention_ms=600_000
    )
    assert config.spark == SparkConfig(
        "a", "local[1]", 3, "2g", "ERROR", {"spark.x": "1", "spark.y": "true"}, "sc://spark-connect:15002"
    )
    assert config.spark.settings() == {
        "spark.x": "1",
        "spark.y": "true",
        "spark.sql.shuffle.partitions": "3",
        "spark.log.level": "ERROR",
        "spark.driver.memory": "2g",
    }
    assert config.recover_stale == RecoveryOptions(
        90_000, ("o-*",), ("g",), "nack", "c", 5, False, 2, True, Backoff((60_000, 300_000), "1m,5m")
    )
    assert config.server == ServerConfig("::1", 0, "p", 2, 3, 4, True, 5, 6, False, 120_000, 7)
    assert config.redrive == RedriveOptions(
        ("o-*",), ("g",), "reason = 'XNACK FATAL'", True, 3, 1000, "o-redriven", True
    )


def test_spark_settings_leave_the_master_and_app_name_to_the_builder() -> None:
    assert SparkConfig().settings() == {"spark.sql.shuffle.partitions": "4", "spark.log.level": "WARN"}


P = "local.toml: "
BACKOFF = (
    'write the steps by delivery count, e.g. "1m,5m,30m,2h" (the last repeats), or a doubling range such as "10s..10m"'
)
DURATION = 'write a whole number with a unit, e.g. "250ms", "90s", "5m", "2h", "1d", or an integer of milliseconds'


@pytest.mark.parametrize(
    ("local_toml", "message"),
    [
        (
            "colour = 1\n",
            "unknown key colour; keys allowed in the top level: jobs, server, spark, store (see conf/README.md)",
        ),
        (
            "[store]\npaht = 1\n",
            "unknown key store.paht; did you mean store.path? keys allowed in [store]: database, history_retention, "
            "path, placement, single_writer (see conf/README.md)",
        ),
        (
            "[jobs.recover]\nx = 1\n",
            "unknown key jobs.recover; did you mean jobs.recover_stale? keys allowed in [jobs]: recover_stale, "
            "redrive (see conf/README.md)",
        ),
        ('store = "x"\n', "store must be a table; write it as [store]"),
        ('spark.conf = "x"\n', "spark.conf must be a table; write it as [spark.conf]"),
        ("[store]\npath = 1\n", "store.path = 1 must be a non-empty string"),
        (
            '[store.placement]\nforce = "gpu"\n',
            'store.placement.force = \'gpu\' must be "auto" (each piece of work where it runs best), "driver" or '
            '"spark" (that form wherever it can run)',
        ),
        (
            "[store.placement]\napply_rows = 0\n",
            "store.placement.apply_rows = 0 must be a whole number of 1 or more (no quotes)",
        ),
        ('[store]\npath = " "\n', "store.path = ' ' must be a non-empty string"),
        (
            '[store]\ndatabase = "1x"\n',
            "store.database = '1x' must be a SQL identifier: letters, digits and _, not starting with a digit",
        ),
        (
            '[store]\nsingle_writer = "yes"\n',
            "store.single_writer = 'yes' must be true or false (TOML booleans, no quotes)",
        ),
        (
            '[spark]\nremote = "http://host:15002"\n',
            "spark.remote = 'http://host:15002' must be a Spark Connect URL such as \"sc://host:15002\" "
            '(or "local[2]" for a local Connect server)',
        ),
        (
            '[spark]\nshuffle_partitions = "8"\n',
            "spark.shuffle_partitions = '8' must be a whole number of 1 or more (no quotes)",
        ),
        (
            "[spark]\nshuffle_partitions = true\n",
            "spark.shuffle_partitions = True must be a whole number of 1 or more (no quotes)",
        ),
        (
            '[spark]\ndriver_memory = "lots"\n',
            'spark.driver_memory = \'lots\' must be a JVM memory size such as "512m" or "2g"',
        ),
        (
            '[spark]\nlog_level = "loud"\n',
            "spark.log_level = 'loud' must be one of ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN",
        ),
        ('[spark.conf]\n"spark.x" = [1]\n', 'spark.conf."spark.x" = [1] must be a string, number or boolean'),
        (
            "[spark.conf]\nfoo = 1\n",
            'spark.conf.foo: Spark setting names start with "spark."; quote the whole name, e.g. '
            '"spark.sql.adaptive.enabled" = "true"',
        ),
        (
            '[spark.conf]\n"spark.master" = "x"\n',
            'spark.conf."spark.master": set it through spark.master (use [spark] master, or spark-submit '
            "--master) instead",
        ),
        (
            '[spark.conf]\n"spark.app.name" = "x"\n',
            'spark.conf."spark.app.name": set it through [spark] app_name instead',
        ),
        (
            '[spark.conf]\n"spark.sql.shuffle.partitions" = 2\n',
            'spark.conf."spark.sql.shuffle.partitions": set it through [spark] shuffle_partitions instead',
        ),
        (
            '[spark.conf]\n"spark.driver.memory" = "x"\n',
            'spark.conf."spark.driver.memory": set it through [spark] driver_memory instead',
        ),
        (
            '[spark.conf]\n"spark.log.level" = "x"\n',
            'spark.conf."spark.log.level": set it through [spark] log_level instead',
        ),
        (
            "[jobs.recover_stale]\nstreams = []\n",
            "jobs.recover_stale.streams = [] must be a non-empty list of names or glob patterns, "
            'e.g. ["orders-*", "payments"]',
        ),
        (
            '[jobs.recover_stale]\nmin_idle = "soon"\n',
            f"jobs.recover_stale.min_idle = 'soon' is not a duration; {DURATION}",
        ),
        (
            '[jobs.recover_stale]\nbackoff = "5m,1m"\n',
            "jobs.recover_stale.backoff = '5m,1m' has a step shorter than the one before it (60000 ms after "
            f"300000 ms); {BACKOFF}",
        ),
        (
            "[jobs.recover_stale]\nlive_window = -1\n",
            f"jobs.recover_stale.live_window = -1 must not be negative; {DURATION}",
        ),
        (
            "[jobs.recover_stale]\nlive_window = true\n",
            f"jobs.recover_stale.live_window = True is not a duration; {DURATION}",
        ),
        (
            '[jobs.recover_stale]\nassign = "all"\n',
            'jobs.recover_stale.assign = \'all\' must be "consumer" (one recovery consumer), "live" (spread over live '
            'consumers) or "nack" (give them back to their group, as XNACK FAIL does)',
        ),
        (
            "[server]\nport = 65536\n",
            "server.port = 65536 must be a TCP port from 0 to 65535 (no quotes; 0 picks a free port)",
        ),
        ("[server]\nrequirepass = 1\n", 'server.requirepass = 1 must be a string ("" for no password)'),
        ("[server]\nmax_clients = 0\n", "server.max_clients = 0 must be a whole number of 1 or more (no quotes)"),
        ("[jobs.redrive]\nlimit = 0\n", "jobs.redrive.limit = 0 must be a whole number of 1 or more (no quotes)"),
        ('[jobs.redrive]\nwhere = " "\n', "jobs.redrive.where = ' ' must be a non-empty string"),
    ],
)
def test_a_bad_value_is_named_with_its_file_its_key_and_the_fix(conf_dir: Path, local_toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_local(conf_dir, local_toml)

    assert str(error.value) == f"{conf_dir / 'local.toml'}: {message}"


def test_a_rule_across_keys_names_the_table_and_every_file_that_set_one(conf_dir: Path) -> None:
    (conf_dir / "base.toml").write_text('[store]\npath = "/s"\n[jobs.recover_stale]\nconsumer = "c"\n')
    with pytest.raises(ConfigError) as error:
        load_local(conf_dir, "[jobs.recover_stale]\nlive_window = 0\n")

    sources = f"{conf_dir / 'base.toml'}, {conf_dir / 'local.toml'}"
    assert str(error.value) == (
        f"{sources}: [jobs.recover_stale] live_window_ms=0: give a positive number of milliseconds"
    )
    (conf_dir / "local.toml").unlink()
    with pytest.raises(ConfigError) as error:
        load_config(conf_dir, {("server", "bind"): ("10.0.0.5", "--bind")})
    assert str(error.value).startswith("--bind: [server] bind='10.0.0.5' is not a loopback address")


def test_an_override_names_its_flag(conf_dir: Path) -> None:
    overrides: dict[tuple[str, ...], tuple[Any, str]] = {("jobs", "recover_stale", "min_idle"): ("x", "--min-idle")}
    with pytest.raises(ConfigError, match=r"^--min-idle: jobs.recover_stale.min_idle = 'x' is not a duration"):
        load_config(conf_dir, overrides)
    with pytest.raises(ConfigError, match=r"^--nope: unknown key store.nope$"):
        load_config(conf_dir, {("store", "nope"): (1, "--nope")})
    with pytest.raises(ConfigError, match=r"^--spark-conf: spark.conf.x: Spark setting names start with"):
        load_config(conf_dir, {("spark", "conf", "x"): ("1", "--spark-conf")})


def test_a_missing_store_path_says_where_to_set_it(conf_dir: Path) -> None:
    (conf_dir / "base.toml").write_text("")
    with pytest.raises(ConfigError) as error:
        load_config(conf_dir)

    assert str(error.value) == (
        f"store.path is not set; set it in {conf_dir / 'base.toml'} or {conf_dir / 'local.toml'}, or pass --store"
    )
    assert load_config(conf_dir, {("store", "path"): ("rel", "--store")}).store.path == "rel"


def test_config_errors_are_streamclaim_errors_and_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path)
    assert isinstance(error.value, StreamclaimError) and isinstance(error.value, ValueError)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("data/store", "/project/data/store"),
        ("/abs/store", "/abs/store"),
        ("s3a://bucket/streams", "s3a://bucket/streams"),
        ("abfss://c@a.dfs.core.windows.net/s", "abfss://c@a.dfs.core.windows.net/s"),
        ("file:/tmp/s", "file:/tmp/s"),
        ("file:///tmp/s", "file:///tmp/s"),
    ],
)
def test_a_relative_local_store_path_is_taken_from_the_base_folder_and_urls_are_kept(path: str, expected: str) -> None:
    assert resolve_store_path(path, Path("/project")) == expected


def test_a_relative_store_path_in_a_file_is_relative_to_the_project_folder(conf_dir: Path) -> None:
    assert load_local(conf_dir, '[store]\npath = "data/s"\n').store.path == str(conf_dir.parent / "data" / "s")
    assert load_local(conf_dir, '[store]\npath = "s3a://b/s"\n').store.path == "s3a://b/s"

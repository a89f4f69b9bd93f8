"""Recovery policies per group (core/policies.py) read from conf/: first match wins, errors name the policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.config_loader import load_config
from streamclaim_spark.core.policies import RecoveryPolicy, policy_for
from streamclaim_spark.errors import ConfigError

POLICIES = """
[jobs.recover_stale]
min_idle = "10m"

[[jobs.recover_stale.policies]]
streams = ["payments"]
assign = "nack"

[[jobs.recover_stale.policies]]
groups = ["ship*"]
min_idle = "5m"
backoff = "1m,1h"
dead_letter = false

[[jobs.recover_stale.policies]]
streams = ["orders"]
max_deliveries = 20
"""


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "base.toml").write_text('[store]\npath = "/data/s"\n')
    return folder


def test_each_group_takes_the_first_policy_that_names_it_over_the_run_options(conf_dir: Path) -> None:
    (conf_dir / "local.toml").write_text(POLICIES)
    options = load_config(conf_dir).recover_stale
    local = conf_dir / "local.toml"

    assert options.policies == (
        RecoveryPolicy(streams=("payments",), assign="nack", name=f"policy 1 ({local}, line 5)"),
        RecoveryPolicy(
            groups=("ship*",),
            min_idle_ms=300_000,
            backoff=parse_backoff("1m,1h"),
            dead_letter=False,
            name=f"policy 2 ({local}, line 9)",
        ),
        RecoveryPolicy(streams=("orders",), max_deliveries=20, name=f"policy 3 ({local}, line 15)"),
    )
    run = RecoveryOptions(min_idle_ms=600_000)
    assert policy_for(options, "payments", "shipping") == (1, RecoveryOptions(min_idle_ms=600_000, assign="nack"))
    assert policy_for(options, "orders", "shipping") == (
        2,
        RecoveryOptions(min_idle_ms=300_000, backoff=parse_backoff("1m,1h"), dead_letter=False),
    )
    assert policy_for(options, "orders", "billing") == (3, RecoveryOptions(min_idle_ms=600_000, max_deliveries=20))
    assert policy_for(options, "audit", "billing") == (None, run)
    assert options.policies[1].to_json() == {
        "name": f"policy 2 ({local}, line 9)",
        "streams": ["*"],
        "groups": ["ship*"],
        "min_idle_ms": 300_000,
        "backoff": "1m,1h",
        "dead_letter": False,
    }


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            'streams = ["a"]\nmin_idel = "1m"\n',
            "unknown key 'min_idel'; a policy may set streams, groups, min_idle, max_deliveries, backoff, assign, "
            "dead_letter (see conf/README.md)",
        ),
        (
            'consumer = "x"\n',
            "unknown key 'consumer'; a policy may set streams, groups, min_idle, max_deliveries, "
            "backoff, assign, dead_letter (see conf/README.md)",
        ),
        ("max_deliveries = 0\n", "max_deliveries = 0 must be a whole number of 1 or more (no quotes)"),
        (
            'backoff = "5m,1m"\n',
            "backoff = '5m,1m' has a step shorter than the one before it (60000 ms after 300000 ms); "
            'write the steps by delivery count, e.g. "1m,5m,30m,2h" (the last repeats), or a doubling range such as '
            '"10s..10m"',
        ),
    ],
)
def test_a_policy_that_cannot_be_meant_is_refused_naming_its_file_and_line(
    conf_dir: Path, policy: str, message: str
) -> None:
    (conf_dir / "local.toml").write_text(
        f'[[jobs.recover_stale.policies]]\ngroups = ["g"]\n\n[[jobs.recover_stale.policies]]\n{policy}'
    )

    with pytest.raises(ConfigError) as error:
        load_config(conf_dir)

    assert str(error.value) == f"policy 2 ({conf_dir / 'local.toml'}, line 4): {message}"


def test_policies_written_as_a_plain_key_are_refused_with_the_table_form(conf_dir: Path) -> None:
    (conf_dir / "local.toml").write_text('[jobs.recover_stale]\npolicies = "nack everything"\n')

    with pytest.raises(ConfigError, match=r"jobs.recover_stale.policies must be tables, each written as "):
        load_config(conf_dir)

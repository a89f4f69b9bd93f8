"""The store on a Spark Connect session: the same replies as redis-server, a fleet built with the bulk
APIs, a batched claim, a recovery run with dead letters (through the library and through
``streamclaim-recover --remote``), the SQL views' queries, and the streaming source's refusal.

The checks run in one client process (tests/connect/client.py: pyspark builds Connect or classic Columns
per process), against the Connect server of this run's JVM; each test reads one section of its results.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streamclaim_spark import StreamStore, sql
from streamclaim_spark.streaming.driver import CONNECT_REFUSAL
from tests.connect.client import FLEET_DEAD, FLEET_GROUPS, FLEET_SIZES
from tests.parity.harness import assert_same_outcomes, run_on
from tests.parity.scenarios import SCENARIOS
from tests.redis_server import RedisServer
from tests.spark.test_sql import doc_queries

REPO = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).parent / "streamclaim-recover"
# The commands of recovery, errors included; the full catalogue runs on classic (tests/parity).
ON_CONNECT = (
    "xadd_explicit_ids_must_increase",
    "xclaim_moves_a_pending_entry_and_justid_keeps_the_delivery_count",
    "xautoclaim_cursor_is_the_next_unexamined_id_and_zero_at_the_end",
)
# The docs' queries whose results depend only on the store, not on when they run.
TIMELESS_QUERIES = ("delivery_counts_per_consumer", "entries_delivered_more_than_n_times", "recovery_runs_per_group")

pytestmark = pytest.mark.spark


def client_env() -> dict[str, str]:
    """A client process's environment: this venv's Python for anything Spark starts, no SPARK_REMOTE."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    return {**env, "PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def on_connect(connect_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What every section of tests/connect/client.py produced on the Connect session."""
    work = tmp_path_factory.mktemp("connect")
    request, result = work / "request.pickle", work / "result.pickle"
    queries = doc_queries()
    request.write_bytes(pickle.dumps({"parity": {name: SCENARIOS[name] for name in ON_CONNECT}, "queries": queries}))
    finished = subprocess.run(
        [sys.executable, "-m", "tests.connect.client", connect_url, str(work), str(request), str(result)],
        cwd=REPO,
        env=client_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    results: dict[str, Any] = pickle.loads(result.read_bytes())
    results["work"] = work
    return results


def section(results: dict[str, Any], name: str) -> Any:
    """One section's result, or the failure with the client's traceback."""
    value = results[name]
    if isinstance(value, dict) and "raised" in value:
        pytest.fail(f"section {name!r} raised on Spark Connect:\n{value['raised']}")
    return value


def test_the_client_ran_on_a_spark_connect_session(on_connect: dict[str, Any]) -> None:
    assert on_connect["is_connect"] is True


@pytest.mark.parametrize("name", ON_CONNECT)
def test_commands_on_spark_connect_reply_like_redis(
    name: str, on_connect: dict[str, Any], redis_server: RedisServer
) -> None:
    actual = section(on_connect, "parity")[name]
    client = redis_server.client()
    try:
        client.execute("FLUSHALL")
        expected = run_on(client, SCENARIOS[name])
    finally:
        client.close()

    assert_same_outcomes(SCENARIOS[name], expected, actual, labels=("redis-server", "store on Connect"))


def test_a_fleet_built_with_the_bulk_apis_on_spark_connect_has_every_entry_pending(on_connect: dict[str, Any]) -> None:
    pel = section(on_connect, "fleet")

    assert set(pel) == set(FLEET_SIZES)
    for stream, size in FLEET_SIZES.items():
        ids, owner = pel[stream]["ids"], FLEET_DEAD[FLEET_GROUPS[stream]]
        assert len(ids) == size, stream
        # Every entry is pending, once, to the consumer it was delivered to, delivered once.
        assert pel[stream]["summary"] == [size, ids[0], ids[-1], [[owner, str(size)]]], stream
        assert pel[stream]["rows"] == [[entry_id, owner, 1] for entry_id in ids], stream


def test_a_batched_claim_on_spark_connect_moves_the_stale_entries_in_one_commit(on_connect: dict[str, Any]) -> None:
    claims = section(on_connect, "batched_claim")

    assert claims["claimed"] == 120
    assert claims["counts"] == {(f"orders-{n}", "billing"): (40, 0) for n in (1, 2, 3)}
    ids = claims["ids"]
    assert claims["pending_summary"] == [40, ids[2][0], ids[2][-1], [["alive", "40"]]]
    xclaim, xautoclaim = claims["batch_replies"]
    assert [entry[0] for entry in xclaim] == ids[3][:2]
    assert xautoclaim == [ids[1][5], ids[1][:5], []]
    assert [row[:2] for row in claims["owners"]] == [[entry_id, "later"] for entry_id in ids[1][:5]]


def test_a_recovery_run_on_spark_connect_claims_and_dead_letters(on_connect: dict[str, Any]) -> None:
    recovered = section(on_connect, "recovery")
    ids = recovered["ids"]

    assert recovered["status"] == "succeeded"
    assert recovered["totals"]["claimed"] == 4
    assert recovered["totals"]["dead_lettered"] == 2
    assert [row[:2] for row in recovered["pending"]] == [[entry_id, "recovery"] for entry_id in ids[2:]]
    assert recovered["dead_letters"] == ids[:2]


def test_a_redrive_on_spark_connect_puts_the_dead_letters_back_once(on_connect: dict[str, Any]) -> None:
    ids = section(on_connect, "recovery")["ids"]
    redriven = section(on_connect, "redrive")

    assert (redriven["status"], redriven["recorded"]) == ("succeeded", True)
    assert redriven["totals"]["redriven"] == 2
    # The two dead letters, first to the group's next reader through XREADGROUP ... CLAIM.
    assert redriven["claimed"][0][0] == "jobs"
    assert [entry[:2] for entry in redriven["claimed"][0][1]] == [[ids[0], ["n", "1"]], [ids[1], ["n", "2"]]]
    assert redriven["acked"] == 2
    assert redriven["again"]["redriven"] == 0


def test_the_sql_views_answer_the_docs_queries_on_spark_connect_as_on_classic(
    on_connect: dict[str, Any], spark: SparkSession
) -> None:
    answers = section(on_connect, "sql")
    assert set(answers) == set(doc_queries())
    sql.register(spark, str(on_connect["work"] / "fleet"))
    for name in TIMELESS_QUERIES:
        classic = [tuple(row) for row in spark.sql(doc_queries()[name]).collect()]
        assert answers[name] == classic, name


def test_the_streaming_source_refuses_a_connect_session_and_says_what_to_use(on_connect: dict[str, Any]) -> None:
    assert section(on_connect, "streaming") == f"ClassicSessionRequiredError: {CONNECT_REFUSAL}"


def test_streamclaim_recover_runs_on_a_connect_server_with_remote(
    on_connect: dict[str, Any], connect_url: str, spark: SparkSession
) -> None:
    section(on_connect, "fleet")
    store_path = on_connect["work"] / "fleet"
    conf_dir = on_connect["work"] / "conf"
    conf_dir.mkdir()
    (conf_dir / "base.toml").write_text((REPO / "conf" / "base.toml").read_text())
    flags = ["--conf-dir", str(conf_dir), "--remote", connect_url, "--store", str(store_path), "--streams", "mail"]

    finished = subprocess.run(
        [str(CONSOLE_SCRIPT), *flags, "--min-idle", "0", "--consumer", "rescuer"],
        env=client_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert finished.returncode == 0, finished.stderr[-4000:]
    summary = json.loads(finished.stdout)
    assert summary["totals"]["claimed"] == 4
    store = StreamStore.open(str(store_path), spark=spark)
    ids = [entry[0] for entry in store.execute("XRANGE", "mail", "-", "+")]
    assert store.execute("XPENDING", "mail", "senders") == [4, ids[0], ids[-1], [["rescuer", "4"]]]

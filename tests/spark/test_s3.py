"""The store on S3, through Hadoop's S3A connector, against a real S3 API server on loopback (moto's).

moto's server speaks the S3 REST API over HTTP; the child driver (tests/spark/s3_worker.py) reaches it
through ``hadoop-aws`` and the AWS SDK exactly as it would reach AWS, so Delta's commits, S3A's listing and
the store's MERGEs all go over the wire. It runs in a process of its own because its JVM needs the S3A jars.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from tests.redis_server import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUCKET = "streamclaim"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on a free loopback port, with an empty bucket ``streamclaim``."""
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start on {endpoint}") from None
                time.sleep(0.1)
        s3_client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client for the test server, with the dummy keys the child driver uses too."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def object_keys(endpoint: str, prefix: str) -> list[str]:
    listing = s3_client(endpoint).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for item in listing.get("Contents", [])]


def test_on_s3_the_store_refuses_to_open_without_opt_in_and_in_single_writer_mode_claims_each_entry_once(
    s3_endpoint: str,
) -> None:
    path = f"s3a://{BUCKET}/streams"
    refused_path = f"s3a://{BUCKET}/refused"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [sys.executable, "-m", "tests.spark.s3_worker", "--endpoint", s3_endpoint]
    worker = subprocess.run(
        [*command, "--path", path, "--refused-path", refused_path],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in worker.stdout.splitlines() if line.startswith("result ")]
    assert worker.returncode == 0 and lines, worker.stderr[-4000:]
    result = json.loads(lines[0].removeprefix("result "))

    # Without the DynamoDB log store or the single-writer promise: refused, with the fix named.
    assert result["refusal"].startswith(
        f"path={refused_path}: Delta commits to s3a:// through io.delta.storage.S3SingleDriverLogStore, "
        "which is safe for one writing driver only"
    )
    assert "--conf spark.delta.logStore.s3a.impl=io.delta.storage.S3DynamoDBLogStore" in result["refusal"]
    assert object_keys(s3_endpoint, "refused/") == []
    assert (result["mode"], result["log_store"]) == ("single-writer", "io.delta.storage.S3SingleDriverLogStore")

    # Two threads of this driver race XAUTOCLAIM for the same 200 stale entries: one claims them all, the
    # other re-runs after losing the commit race and finds none stale any more.
    ids = result["ids"]
    assert len(ids) == 200
    claims = result["race"]
    winner = max(claims, key=lambda name: len(claims[name]))
    loser = next(name for name in claims if name != winner)
    assert (claims[winner], claims[loser]) == (ids, [])
    assert result["attempts"][loser] >= 2
    assert result["xpending_after_race"] == [200, ids[0], ids[-1], [[winner, "200"]]]

    # The recovery job claims them all back (stale again two hours later) and records the writer mode.
    assert (result["recovery"]["claimed"], result["recovery"]["conflicts_retried"]) == (200, 0)
    assert result["recovery_runs"] == [["s3-run", "single-writer"]]
    assert result["xpending_after_recovery"] == [200, ids[0], ids[-1], [["recovery", "200"]]]

    # Every table lives in the bucket: Delta logs went through S3A to the server.
    keys = object_keys(s3_endpoint, "streams/")
    assert any(key.startswith("streams/state/_delta_log/") and key.endswith(".json") for key in keys), keys[:20]
    assert any(key.startswith("streams/recovery_runs/_delta_log/") for key in keys), keys[:20]

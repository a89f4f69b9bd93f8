"""moto's S3 (and DynamoDB) server on loopback, for benches that put a store on ``s3a://``."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def moto_server(port: int, bucket: str) -> Iterator[str]:
    """moto's server on ``port`` with an empty ``bucket``; yields its endpoint, stops it after."""
    import boto3  # type: ignore[import-untyped]

    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
        boto3.client("s3", endpoint_url=endpoint, **keys).create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)

"""What a test does when a file scripts/setup.sh builds is not there: skips, except in CI, where it fails.

Setup builds a few files a test needs (the local commit classes' jar, the JVM class archive, the
``S3DynamoDBLogStore`` jar). On a developer's machine that skipped setup the test has nothing to run on;
in CI (``CI=true``) setup always runs, so a missing file there is a failure, never a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skips the test for ``reason``; in CI, fails it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI runs this test, and {reason}")
    pytest.skip(reason)


def setup_built(path: Path | None, what: str) -> Path:
    """``path`` when it is a file; else the test is ``unavailable`` (``what``: the file, for the message)."""
    if path is None or not path.is_file():
        unavailable(f"no {what} at {path}: bash scripts/setup.sh builds it")
    return path

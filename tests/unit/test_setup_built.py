"""The guard for files scripts/setup.sh builds (tests/setup_built.py): a skip outside CI, a failure in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.setup_built import setup_built, unavailable


def test_a_file_setup_did_not_build_skips_the_test_outside_ci_and_fails_it_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "classes.jar"
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        setup_built(missing, "jar")
    assert str(failed.value) == f"CI runs this test, and no jar at {missing}: bash scripts/setup.sh builds it"
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as skipped:
        unavailable("no javac")
    assert str(skipped.value) == "no javac"


def test_a_file_setup_built_is_handed_to_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = tmp_path / "classes.jsa"
    built.write_bytes(b"archive")
    monkeypatch.setenv("CI", "true")
    assert setup_built(built, "archive") == built

"""The tests' S3DynamoDBLogStore jar (tests/jars/log_store_jar.py): its versions, when it counts as up to
date, and what a missing JDK means in CI and outside it. Nothing is compiled here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streamclaim_spark.state.session import DELTA_PACKAGE
from tests.jars import log_store_jar


def test_the_vendored_log_store_is_the_delta_version_the_session_runs() -> None:
    assert log_store_jar.LOG_STORE_PACKAGE.startswith("io.delta:delta-storage-s3-dynamodb:")
    assert DELTA_PACKAGE.endswith(f":{log_store_jar.VERSION}")
    assert log_store_jar.AWS_SDK_PACKAGE.startswith("com.amazonaws:aws-java-sdk-dynamodb:")
    readme = (log_store_jar.MODULE / "README.md").read_text(encoding="utf-8")
    assert f"tag: `v{log_store_jar.VERSION}`" in readme
    sources = sorted(path.name for path in log_store_jar.SOURCES.rglob("*.java"))
    assert "S3DynamoDBLogStore.java" in sources and len(sources) == 6
    for notice in log_store_jar.NOTICES:
        assert "Delta Lake" in (log_store_jar.MODULE / notice).read_text(encoding="utf-8")


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the vendored module, with the build module pointed at it."""
    copy = tmp_path / "delta-storage-s3-dynamodb"
    shutil.copytree(log_store_jar.MODULE, copy, ignore=shutil.ignore_patterns("build"))
    jar = copy / "build" / log_store_jar.JAR.name
    monkeypatch.setattr(log_store_jar, "MODULE", copy)
    monkeypatch.setattr(log_store_jar, "SOURCES", copy / "src" / "main" / "java")
    monkeypatch.setattr(log_store_jar, "JAR", jar)
    monkeypatch.setattr(log_store_jar, "KEY", jar.with_name(jar.name + ".key"))
    return copy


def test_the_jar_is_current_until_a_source_or_the_compiler_changes(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not log_store_jar.is_current()  # never built
    log_store_jar.JAR.parent.mkdir()
    log_store_jar.JAR.write_bytes(b"not read here")
    log_store_jar.KEY.write_text(log_store_jar.build_key(), encoding="utf-8")
    assert log_store_jar.is_current()
    assert log_store_jar.main(["--if-stale"]) == 0  # up to date: nothing resolved, nothing compiled

    source = next(log_store_jar.SOURCES.rglob("ThrowingSupplier.java"))
    source.write_text(source.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert not log_store_jar.is_current()
    log_store_jar.KEY.write_text(log_store_jar.build_key(), encoding="utf-8")
    assert log_store_jar.is_current()

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert not log_store_jar.is_current()


def test_without_a_jdk_setup_warns_outside_ci_and_fails_in_ci(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.delenv("CI", raising=False)
    assert log_store_jar.main(["--if-stale"]) == 0
    assert "WARNING: no javac" in capsys.readouterr().err

    monkeypatch.setenv("CI", "true")
    assert log_store_jar.main(["--if-stale"]) == 1
    assert "ERROR: no javac" in capsys.readouterr().err
    assert not log_store_jar.JAR.exists()

"""Which Java options a locally started session gets for the JVM class archive (state/jvm_archive.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamclaim_spark.state.jvm_archive import ARCHIVE_ENV, DEFAULT_ARCHIVE, QUIET_CDS, archive_path, with_archive


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "jvm-classes.jsa"
    path.write_bytes(b"not read here: the JVM checks it")
    return path


def test_an_archive_that_exists_is_mapped_quietly(archive: Path) -> None:
    assert with_archive(None, archive) == f"-XX:SharedArchiveFile={archive} {QUIET_CDS}"


def test_the_user_s_own_java_options_come_first_and_are_kept(archive: Path) -> None:
    assert with_archive("-Xss4m -Dx=1", archive) == f"-Xss4m -Dx=1 -XX:SharedArchiveFile={archive} {QUIET_CDS}"


def test_a_missing_archive_is_not_named_since_that_would_turn_off_the_jvm_s_own(tmp_path: Path) -> None:
    assert with_archive("-Xss4m", tmp_path / "never-built.jsa") is None
    assert with_archive(None, None) is None


@pytest.mark.parametrize("theirs", ["-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/y.jsa"])
def test_options_that_choose_class_sharing_themselves_win(archive: Path, theirs: str) -> None:
    assert with_archive(theirs, archive) is None


def test_the_environment_names_another_archive_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    assert archive_path() == DEFAULT_ARCHIVE
    monkeypatch.setenv(ARCHIVE_ENV, "/srv/classes.jsa")
    assert archive_path() == Path("/srv/classes.jsa")
    monkeypatch.setenv(ARCHIVE_ENV, "")
    assert archive_path() is None

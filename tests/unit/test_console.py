"""What a console script shows on the console and what it leaves to its log file (cli/console.py), no Spark."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamclaim_spark.cli import console as console_module
from streamclaim_spark.cli.console import LOG_DIR_ENV, console, default_log_file
from streamclaim_spark.core import constants as C
from streamclaim_spark.state import session

log = logging.getLogger("streamclaim_spark.tests.console")


def test_a_quiet_console_shows_the_log_file_warnings_errors_and_progress_and_files_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "job.log"

    with console("streamclaim-test", log_file=str(log_file)) as path:
        assert path == log_file
        assert session.send_jvm_output_to(str(log_file)) == str(log_file)  # what build_session's JVM writes to
        log.info("a step's detail")
        log.info("claim committed", extra=C.PROGRESS)
        log.warning("maintenance refused: a query reads version 3")
        try:
            raise ValueError("bad value\nwith a second line")
        except ValueError:
            log.exception("the run stopped on an unexpected error")

    assert capsys.readouterr().err.splitlines() == [
        f"streamclaim-test: log in {log_file} (--verbose shows it here)",
        "streamclaim-test: claim committed",
        "streamclaim-test: warning: maintenance refused: a query reads version 3",
        "streamclaim-test: error: the run stopped on an unexpected error: ValueError: bad value "
        f"(details in {log_file})",
    ]
    written = log_file.read_text(encoding="utf-8")
    assert " INFO streamclaim_spark.tests.console: a step's detail\n" in written
    assert " INFO streamclaim_spark.tests.console: claim committed\n" in written
    assert "Traceback (most recent call last):" in written and "with a second line" in written
    assert session.send_jvm_output_to(None) is None  # restored when the block ends


def test_without_progress_the_console_keeps_progress_lines_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "demo.log"

    with console("streamclaim-demo", log_file=str(log_file), progress=False):
        log.info("claim committed", extra=C.PROGRESS)

    assert capsys.readouterr().err == f"streamclaim-demo: log in {log_file} (--verbose shows it here)\n"
    assert "claim committed" in log_file.read_text(encoding="utf-8")


def test_verbose_sends_everything_to_stderr_and_writes_no_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path))

    with console("streamclaim-test", verbose=True) as path:
        assert path is None
        assert session.send_jvm_output_to(None) is None  # the JVM writes to the console
        log.info("a step's detail")

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(" INFO streamclaim_spark.tests.console: a step's detail")
    assert list(tmp_path.iterdir()) == []


def test_a_console_inside_a_console_shares_its_log_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_file = tmp_path / "demo.log"

    with console("streamclaim-demo", log_file=str(log_file), progress=False), console("streamclaim-recover") as inner:
        assert inner == log_file
        log.info("claim committed", extra=C.PROGRESS)

    assert capsys.readouterr().err == f"streamclaim-demo: log in {log_file} (--verbose shows it here)\n"
    assert console_module._active == []


def test_a_console_inside_a_verbose_one_keeps_everything_on_stderr_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path))

    with console("streamclaim-demo", verbose=True), console("streamclaim-recover") as inner:
        assert inner is None
        log.info("claim committed", extra=C.PROGRESS)

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(" INFO streamclaim_spark.tests.console: claim committed")
    assert list(tmp_path.iterdir()) == []


def test_a_default_log_file_lies_in_the_log_folder_named_by_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path))

    path = default_log_file("streamclaim-maintain")

    assert path.parent == tmp_path
    assert path.name.startswith("streamclaim-maintain-") and path.suffix == ".log"

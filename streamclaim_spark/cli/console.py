"""What a console script shows on the console, and the log file everything else goes to.

A job's user wants its report, a line per step at most and a progress line on long work; Ivy's
dependency report, Spark's log4j lines and the job's own log are for finding out why something went
wrong. So, unless ``--verbose``, a console script (and the demo) writes its log, and has the JVM it
starts write its stdout and stderr, to one log file whose path it prints first; the console shows
warnings and errors (an error's message with the log's path; its traceback in the file) and the lines
logged with ``constants.PROGRESS``. With ``--verbose`` everything goes to stderr as it comes, as before.

Under spark-submit the JVM is spark-submit's and its output is spark-submit's console: the job then
logs to stderr as with ``--verbose``, so that its lines stay next to Spark's.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from streamclaim_spark.state.session import send_jvm_output_to, under_spark_submit

# Where log files go unless --log-file names one: $STREAMCLAIM_LOG_DIR, else a folder in the system's temp.
LOG_DIR_ENV = "STREAMCLAIM_LOG_DIR"
VERBOSE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# The console set up in this process (the demo's, which the job it runs shares): its log file, or None for
# a verbose one; empty when there is none.
_active: list[Path | None] = []


def add_console_flags(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """``--verbose`` and ``--log-file``, for a console script's output flags."""
    group.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the job's whole log on stderr instead of writing it to the log file",
    )
    group.add_argument(
        "--log-file",
        metavar="PATH",
        help=f"the log file (default: a new file in ${LOG_DIR_ENV}, else in the system's temp folder)",
    )


def default_log_file(prog: str) -> Path:
    """A new log file's path for one run of ``prog``: named by the program, the UTC time and the process."""
    folder = Path(os.environ.get(LOG_DIR_ENV) or Path(tempfile.gettempdir()) / "streamclaim-logs")
    return folder / f"{prog}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.log"


@contextlib.contextmanager
def console(
    prog: str,
    *,
    verbose: bool = False,
    level: str = "INFO",
    log_file: str | None = None,
    progress: bool = True,
) -> Iterator[Path | None]:
    """Sets up where a console script's output goes for the ``with`` block; yields the log file (None with
    ``verbose`` or under spark-submit, where everything goes to stderr).

    ``progress=False`` keeps even the progress lines in the file (the demo prints its own). Inside a
    console already set up in this process (the demo running the recovery job) it changes nothing."""
    if _active:
        yield _active[0]
        return
    root = logging.getLogger()
    handlers: list[logging.Handler] = []
    path: Path | None = None
    previous_level = root.level
    if verbose or under_spark_submit():
        handlers.append(logging.StreamHandler(sys.stderr))
        handlers[0].setFormatter(logging.Formatter(VERBOSE_FORMAT))
    else:
        path = Path(log_file) if log_file else default_log_file(prog)
        path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(path, encoding="utf-8")
        to_file.setFormatter(logging.Formatter(VERBOSE_FORMAT))
        to_console = logging.StreamHandler(sys.stderr)
        to_console.addFilter(lambda record: record.levelno >= logging.WARNING or (progress and is_progress(record)))
        to_console.setFormatter(ConsoleFormatter(prog, path))
        handlers += [to_file, to_console]
        sys.stderr.write(f"{prog}: log in {path} (--verbose shows it here)\n")
        sys.stderr.flush()
    root.setLevel(level)
    for handler in handlers:
        root.addHandler(handler)
    # py4j logs every connection it closes at INFO, some after the summary line.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.captureWarnings(path is not None)  # pyspark's and pandas' warnings: to the file too
    previous_output = send_jvm_output_to(None if path is None else str(path))
    _active.append(path)
    try:
        yield path
    finally:
        _active.clear()
        send_jvm_output_to(previous_output)
        logging.captureWarnings(False)
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(previous_level)


def is_progress(record: logging.LogRecord) -> bool:
    """True for a record logged with ``constants.PROGRESS``: a step of long work the console shows."""
    return bool(getattr(record, "progress", False))


class ConsoleFormatter(logging.Formatter):
    """A record as the console shows it: ``prog: message``; a warning or error says its level, an error
    points at the log file, and an exception is its last line (its traceback is in the file)."""

    def __init__(self, prog: str, log_file: Path) -> None:
        super().__init__()
        self.prog = prog
        self.log_file = log_file

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.prog}: {record.getMessage()}"
        if record.levelno >= logging.WARNING:
            line = f"{self.prog}: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            last = str(error).strip().splitlines()
            line += f": {type(error).__name__}" + (f": {last[0]}" if last else "")
        if record.levelno >= logging.ERROR:
            line += f" (details in {self.log_file})"
        return line

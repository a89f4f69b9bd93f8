"""Copies of a remote table's small data files kept on the driver's disk, by location.

A Delta data file never changes once written (each has a new, unique name), so a copy of one stays
true for as long as any version names the file. On an object store every command reads the small head
files of its stream and group, which the previous command rewrote: kept here, the copy a command just
uploaded (or downloaded) is read back without the two requests (HEAD, GET) a download costs. Bounded
in bytes, least recently used out first; the copies live in one temporary folder of the process, removed
at exit (a killed process leaves it under ``TMPDIR``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid
from collections import OrderedDict

# Most bytes of copies kept: head files are a few KB each, so this holds thousands of them; a file
# larger than a tenth of it (a full entry or PEL file) is not kept, so big reads never churn the heads.
CACHE_BYTES = 64 * 1024 * 1024
_KEPT_FILE_BYTES = CACHE_BYTES // 10

_lock = threading.Lock()
_copies: OrderedDict[str, tuple[str, int]] = OrderedDict()  # location -> (copy's path, size)
_held = [0]
_folder: list[str] = []


def take(location: str, local: str) -> bool:
    """Puts a copy of the file at ``location`` at ``local`` when one is kept; False when none is."""
    with _lock:
        kept = _copies.get(location)
        if kept is None:
            return False
        _copies.move_to_end(location)
    try:
        _link(kept[0], local)
    except FileNotFoundError:  # evicted by another thread since: the caller downloads it
        return False
    return True


def keep(location: str, local: str) -> None:
    """Keeps a copy of ``local``, the whole content of the file at ``location``, when it is small."""
    size = os.path.getsize(local)
    if size > _KEPT_FILE_BYTES:
        return
    with _lock:
        if location in _copies:
            return
        copy = os.path.join(_cache_folder(), f"{uuid.uuid4()}.parquet")
        _link(local, copy)
        _copies[location] = (copy, size)
        _held[0] += size
        while _held[0] > CACHE_BYTES:
            _, (evicted, evicted_size) = _copies.popitem(last=False)
            os.remove(evicted)
            _held[0] -= evicted_size


def _link(source: str, target: str) -> None:
    """``target`` as a second name of ``source`` (no bytes copied: the caller may delete either name),
    or a copy where the two folders lie on different file systems."""
    try:
        os.link(source, target)
    except OSError as error:
        if isinstance(error, FileNotFoundError):
            raise
        shutil.copyfile(source, target)


def _cache_folder() -> str:
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix="streamclaim-cache-"))
        atexit.register(shutil.rmtree, _folder[0], True)
    return _folder[0]

"""What a data file's ``AddFile`` action of the state table says: its rows, location, bucket and name.

Delta's log names each data file by an ``AddFile`` (a py4j object here): a path relative to the table
and URL-encoded, its partition values, and the statistics written with it.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import unquote

from streamclaim_spark.core import constants as C


def row_count(file: Any) -> int:
    """The rows of an ``AddFile``, from the statistics Delta wrote with it."""
    return int(file.numLogicalRecords().get())


def data_file_path(table_path: str, path: str) -> str:
    """The location of a data file the log names by ``path`` (relative to the table and URL-encoded)."""
    if "://" in path or path.startswith("/"):
        return unquote(path)
    return table_path.rstrip("/") + "/" + unquote(path)


def bucket_of(file: Any) -> str:
    """The bucket (partition value) of an ``AddFile``."""
    return str(file.partitionValues().apply(C.BUCKET))


def file_name(path: str) -> str:
    """A data file's name, from an ``AddFile`` path (relative, URL-encoded) or a ``_metadata.file_path``
    (an absolute URI): Delta names every data file uniquely, so the name identifies it."""
    return posixpath.basename(unquote(path))

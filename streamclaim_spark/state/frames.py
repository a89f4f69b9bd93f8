"""Small DataFrames built in the JVM from one literal: MERGE sources, lookup keys, bulk targets."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from streamclaim_spark.errors import ArgumentTypeError


def json_frame(spark: SparkSession, records: Sequence[dict[str, Any]], schema: StructType) -> DataFrame:
    """A small DataFrame of ``records`` built in the JVM from one JSON literal.

    ``createDataFrame`` of a Python list is a Python RDD, evaluated (for a MERGE source: twice) in
    Python worker processes. ``from_json`` of a literal is deterministic, so Delta may read it twice
    without materializing it; JSON escapes carry any Unicode text, NULs included, unchanged, and
    ``bytes`` go as base64, which is how Spark's JSON reader fills a BINARY column.
    """
    text = json.dumps(list(records), separators=(",", ":"), default=_json_bytes)
    return spark.range(1).select(F.inline(F.from_json(F.lit(text), ArrayType(schema))))


def _json_bytes(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise ArgumentTypeError(f"cannot write a {type(value).__name__} into a JSON-built DataFrame")

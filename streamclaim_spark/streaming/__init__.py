"""Consumer groups in Spark Structured Streaming: the ``streamclaim`` data source (docs/STREAMING.md).

``register(spark)`` once per session, then::

    spark.readStream.format("streamclaim").option("path", ...).option("stream", "orders")
        .option("group", "billing").option("consumer", "spark-billing-1").load()
    frame.writeStream.format("streamclaim").option("path", ...).option("stream", "orders")...
    spark.read.format("streamclaim").option("path", ...).option("stream", "orders").load()
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.types import StructType

from streamclaim_spark.errors import OptionError
from streamclaim_spark.streaming.driver import DriverLink
from streamclaim_spark.streaming.options import range_options, sink_options, source_options
from streamclaim_spark.streaming.sink import AppendWriter
from streamclaim_spark.streaming.source import ENTRY_SCHEMA, GroupReader, RangeReader

__all__ = ["NAME", "OptionError", "StreamclaimDataSource", "register"]

NAME = "streamclaim"


class StreamclaimDataSource(DataSource):
    """The ``streamclaim`` format: a consumer group as a stream source, an XADD sink, a batch XRANGE.

    ``register`` registers a subclass carrying the driver link; this class itself has none.
    """

    _link: DriverLink | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return ENTRY_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GroupReader(source_options(self.options), self._link)

    def reader(self, schema: StructType) -> DataSourceReader:
        return RangeReader(range_options(self.options), self._link)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return AppendWriter(sink_options(self.options), self._link)


def register(spark: SparkSession) -> None:
    """Registers the ``streamclaim`` format in ``spark`` (a classic session, not Spark Connect).

    The registered class carries the link back to this driver (driver.py): Spark pickles it by value,
    so the Python processes that plan micro-batches can run Delta transactions on this session.

    Example (a batch read of the store at ``path``; docs/STREAMING.md has the streaming forms)::

        >>> register(spark)
        >>> frame = spark.read.format("streamclaim").option("path", path).option("stream", "orders").load()
        >>> [(row.stream, row.id) for row in frame.collect()]
        [('orders', '1-1')]
    """
    attributes: dict[str, Any] = {"_link": DriverLink.of(spark), "__module__": __name__}
    spark.dataSource.register(type("LinkedStreamclaimDataSource", (StreamclaimDataSource,), attributes))

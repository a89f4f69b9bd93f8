"""A real Spark Connect server with Delta, served by the test run's own JVM.

``SparkConnectService.start`` is what ``SparkSession.builder.remote("local")`` and the Connect plugin
run: the gRPC service of Spark Connect over this SparkContext, whose sessions have Delta's extension
and catalog (tests/fixtures.TEST_SPARK_CONF binds it to a free port). Starting it costs well under a
second, where a server process of its own would cost a JVM start and Delta's warm-up.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.parity.conftest import redis_server  # noqa: F401  (the parity tests' redis-server, shared)


@pytest.fixture(scope="session")
def connect_url(spark: SparkSession) -> Iterator[str]:
    """The ``sc://`` URL of the Connect service this run's JVM serves (started on first use)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    service = jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(spark.sparkContext._jsc.sc())
    port = (
        getattr(getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$").server().getPort()
    )
    try:
        yield f"sc://localhost:{port}"
    finally:
        service.stop(jvm.scala.Option.empty(), jvm.scala.Option.empty())

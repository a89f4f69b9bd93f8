"""A SparkSession for the Python processes Spark starts to plan a Python data source's micro-batches.

Spark runs a Python stream reader's ``latestOffset``/``partitions`` and a stream writer's ``commit`` in
Python processes its JVM starts beside the driver, with no SparkSession. Delivering entries and
appending them are Delta transactions, which need one. So ``register`` captures the driver's py4j
gateway (port and secret) in the registered source class, and these processes connect back to the
driver's JVM and wrap its active session: the same JVM, the same SparkContext, the same Delta log.

The secret never goes into options (which Spark shows in plans and the UI) nor into the reader and
writer objects Spark ships to executors (their ``__getstate__`` drops it). Spark Connect sessions
have no py4j gateway, so this route does not exist there.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from streamclaim_spark.errors import ClassicSessionRequiredError, SourceNotRegisteredError

if TYPE_CHECKING:
    from streamclaim_spark.store import StreamStore

# java_import's of a pyspark driver (pyspark.java_gateway.launch_gateway): what SparkContext expects.
_JAVA_IMPORTS = (
    "org.apache.spark.SparkConf",
    "org.apache.spark.api.java.*",
    "org.apache.spark.api.python.*",
    "org.apache.spark.ml.python.*",
    "org.apache.spark.mllib.api.python.*",
    "org.apache.spark.resource.*",
    "org.apache.spark.sql.*",
    "org.apache.spark.sql.api.python.*",
    "org.apache.spark.sql.hive.*",
)

_lock = threading.Lock()
# Why the data source refuses a Spark Connect session, and what to use there (docs/STREAMING.md).
CONNECT_REFUSAL = (
    "streaming.register: the streamclaim data source needs a classic SparkSession. Its micro-batches are "
    "planned in Python processes that run Delta transactions through the driver's JVM (py4j), and a Spark "
    "Connect session has no JVM on the client to link them to. On Spark Connect, consume a group with "
    "StreamStore.deliver (or execute('XREADGROUP', ...)) and StreamStore.acknowledge in a loop, and append "
    "with StreamStore.append_streams; or run the streaming query where a classic session exists (spark-submit "
    "on the cluster, a notebook on dedicated compute)."
)
_sessions: dict[int, SparkSession] = {}
# The stores opened in this process, by (driver port, path). Spark unpickles a fresh stream writer for
# every micro-batch it commits, so a store kept only on the writer was opened again each time (its
# tables found and their layout checked: 0.5-0.65 s of a sink batch's commit).
_stores: dict[tuple[int, str], StreamStore] = {}


@dataclass(frozen=True)
class DriverLink:
    """How a planning process reaches the driver's JVM: its py4j gateway's port and secret."""

    port: int
    secret: str

    def __repr__(self) -> str:  # never print the secret
        return f"DriverLink(port={self.port})"

    @classmethod
    def of(cls, spark: SparkSession) -> DriverLink:
        """The link to ``spark``'s driver; refuses Spark Connect sessions, which have no gateway."""
        gateway = getattr(getattr(spark, "_sc", None), "_gateway", None)
        if gateway is None:
            raise ClassicSessionRequiredError(CONNECT_REFUSAL)
        parameters = gateway.gateway_parameters
        return cls(int(parameters.port), str(parameters.auth_token))

    def session(self) -> SparkSession:
        """A session over the driver's active SparkSession, made once per process.

        Never stop it: its SparkContext is the driver's.
        """
        with _lock:
            session = _sessions.get(self.port)
            if session is None:
                session = _connect(self)
                _sessions[self.port] = session
            return session


class Linked:
    """A reader or writer that opens the store over the driver's session, and is shipped without the link."""

    def __init__(self, path: str, link: DriverLink | None) -> None:
        self._path = path
        self._link = link

    def _store(self) -> StreamStore:
        from streamclaim_spark.store import StreamStore

        if self._link is None:
            raise SourceNotRegisteredError(
                "the streamclaim data source was registered without a driver link; "
                "register it with streamclaim_spark.streaming.register(spark)"
            )
        key = (self._link.port, self._path)
        with _lock:
            opened = _stores.get(key)
        if opened is None:
            opened = StreamStore.open(self._path, spark=self._link.session(), decode_responses=False)
            with _lock:
                opened = _stores.setdefault(key, opened)
        return opened

    def __getstate__(self) -> dict[str, Any]:
        # Executors read partitions (or write rows): they need no store, and must never get the gateway's secret.
        return {**self.__dict__, "_link": None}


def _connect(link: DriverLink) -> SparkSession:
    from py4j.java_gateway import GatewayParameters, JavaGateway, java_import
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:  # this process is the driver itself (e.g. a test calling the reader directly)
        return SparkSession(active)
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(port=link.port, auth_token=link.secret, auto_convert=True)
    )
    jvm: Any = gateway.jvm
    for name in _JAVA_IMPORTS:
        java_import(jvm, name)
    jsession = jvm.org.apache.spark.sql.SparkSession.active()
    with warnings.catch_warnings():
        # SparkContext tries to put the driver's --packages jars (spark.submit.pyFiles) on this process's
        # sys.path and warns once per jar that it cannot; this process needs none of them.
        warnings.simplefilter("ignore", RuntimeWarning)
        jsc = jvm.org.apache.spark.api.java.JavaSparkContext(jsession.sparkContext())
        context = SparkContext(gateway=gateway, jsc=jsc)
    return SparkSession(context, jsparkSession=jsession)

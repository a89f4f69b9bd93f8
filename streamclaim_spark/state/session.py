"""The one place that builds a SparkSession for the store.

Users may pass their own Delta-enabled session to ``StreamStore.open``; otherwise this module builds a
local one (``build_session``), or the console scripts' one from ``conf/`` (``session_from_config``, which
lets spark-submit's own settings win). The Delta JVM jar is resolved from Maven Central by Spark's own
``spark.jars.packages`` the first time and served from the Ivy cache afterwards, so later starts work offline.
A console script may send the JVM's own output (that resolution's report, Spark's log4j lines) to its log
file instead of the console (``send_jvm_output_to``).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping

from py4j.java_gateway import JavaClass
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from streamclaim_spark.core.config import SparkConfig
from streamclaim_spark.core.object_store import DELTA_PACKAGE as DELTA_PACKAGE  # where jobs and tests import it
from streamclaim_spark.core.object_store import WriterSafety, check_writer_safety
from streamclaim_spark.errors import InvalidArgumentError
from streamclaim_spark.state.delta_io import is_connect, register_connect_errors
from streamclaim_spark.state.jvm_archive import JAVA_OPTIONS_KEY, archive_path, with_archive
from streamclaim_spark.state.local_commits import jar_path, with_local_commits

log = logging.getLogger(__name__)

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# Settings that suit a store of small commits on a small machine; any of them can be overridden.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    "spark.jars.packages": DELTA_PACKAGE,
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Delta rebuilds snapshots with this many partitions; the default of 50 costs ~1 s per command here.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.delta.log.cacheSize": "16",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    # Spark keeps 100 compiled query classes by default; one command's queries (Delta's file skipping,
    # the MERGE's joins, the log replay) need more, so every command recompiled ~19 of them (~1.7 s of
    # Janino per 8 commands). Static: it sizes a JVM-wide cache when the first session starts.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # Only matters on stores created with deletion vectors (new ones have them off, tables.py), and each
    # state commit sets it for itself (state/commit_settings.py: off for a command's few rows, on for
    # bulk plans); this is only the session's starting value.
    "spark.databricks.delta.merge.deletionVectors.persistent": "true",
    # Object stores (docs/DEPLOY.md, "Requests per commit"). Delta writes each version's checksum file
    # through Spark's checkpoint file manager, which defaults to Hadoop's FileContext: on s3a:// its
    # create-and-rename took 22 requests per commit, the FileSystem one's takes 9 (local disk: a rename
    # either way).
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    # S3A probes a new file's key and its folder (a HEAD and a LIST each) before writing it. Every file a
    # commit writes has a new name, and Delta's log store checks N.json for itself before it writes one.
    "spark.hadoop.fs.s3a.create.performance": "true",
}

# Loggers that print a stack trace at ERROR for a failure the store expects and handles itself:
# a MERGE aborted by its stale-snapshot guard (see engine/merge_commit.py).
_EXPECTED_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.delta.commands.MergeIntoCommand",
    "org.apache.spark.sql.delta.commands.merge.MergeIntoMaterializeSource",
)


# Where the JVM this process starts writes its stdout and stderr (None: this process' own, the console).
_jvm_output: str | None = None


def send_jvm_output_to(path: str | None) -> str | None:
    """Makes the JVM that ``build_session`` starts next write its stdout and stderr to the file ``path``
    (appended; None: to this process' own); returns the previous setting. Ivy's dependency report is printed
    by spark-submit's launcher before log4j is configured, so only the process' own streams catch it. A JVM
    already running (spark-submit's, an earlier session's) keeps writing where it did."""
    global _jvm_output
    previous, _jvm_output = _jvm_output, path
    return previous


def build_session(
    master: str | None = "local[2]",
    app_name: str = "streamclaim-spark",
    conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Builds (or reuses) a Delta-enabled SparkSession.

    Args:
        master: Spark master URL; None leaves it to spark-submit (default ``local[2]``). Under
            spark-submit the JVM already runs, so ``spark.jars.packages`` here cannot add Delta: pass
            ``--packages io.delta:delta-spark_4.2_2.13:4.4.0`` to spark-submit (docs/RECOVERY.md).
            Ignored with ``remote``.
        app_name: Application name shown in Spark's logs.
        conf: Extra Spark settings; they override ``DEFAULT_CONF`` key by key.
        remote: A Spark Connect URL (``sc://host:port``): a Connect session instead, whose server must
            already run with Delta's extension and catalog (docs/DEPLOY.md); the settings the server lets
            a session change are set, the others (the Delta jar, the extension) are the server's.
            ``local[2]`` and the like start a local Connect server with Delta in this process.
    """
    if remote is not None:
        return _connect_session(remote, app_name, {**DEFAULT_CONF, **(conf or {})})
    if master is not None and master.startswith("local"):
        # Python workers, and the processes that plan Python data sources' batches (streaming/), run
        # this interpreter, which has the project's packages, unless the user named another.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {**DEFAULT_CONF, **(conf or {})}
    if not under_spark_submit():  # this process starts the driver's JVM: it can add jars and map the archive
        settings = with_local_commits(settings, jar_path())
        options = with_archive(settings.get(JAVA_OPTIONS_KEY), archive_path())
        if options is not None:
            settings[JAVA_OPTIONS_KEY] = options
    for key, value in settings.items():
        builder = builder.config(key, value)
    if _jvm_output is not None and master is not None and not under_spark_submit():
        _start_jvm_writing_to(_jvm_output, {**settings, "spark.master": master, "spark.app.name": app_name})
    spark = builder.getOrCreate()
    quiet_expected_failures(spark)
    register_connect_errors(spark)  # a session of SPARK_REMOTE's (pyspark reads it) is a Connect one
    return spark


def _start_jvm_writing_to(path: str, settings: Mapping[str, str]) -> None:
    """Starts the driver's JVM as pyspark would for a session of ``settings`` (spark-submit with each as
    ``--conf``), its stdout and stderr appended to ``path``; nothing when this process has a JVM already."""
    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    with open(path, "ab") as output:  # the JVM keeps its own copy of the descriptor
        gateway = launch_gateway(conf, popen_kwargs={"stdout": output, "stderr": output})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)


def _connect_session(remote: str, app_name: str, settings: Mapping[str, str]) -> SparkSession:
    """A Spark Connect session on ``remote`` with every setting of ``settings`` a session may change."""
    if remote.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # pyspark starts the server in this process from the builder's settings (jars, extensions
        # included) and keeps, for the session, the ones a session may set.
        builder = SparkSession.builder.remote(remote).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        with warnings.catch_warnings():
            # It then tries them on the session too and warns for each the server fixed at its start.
            warnings.filterwarnings("ignore", message="Failed to set", category=UserWarning)
            spark = builder.getOrCreate()
    else:
        spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        for key, value in settings.items():
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
    register_connect_errors(spark)
    return spark


def session_from_config(config: SparkConfig) -> SparkSession:
    """Builds a console script's session from ``[spark]``; under spark-submit its master and its own
    ``--conf`` settings win (the JVM already runs, so ``spark.driver.memory`` cannot apply any more)."""
    settings = config.settings()
    if config.remote is not None:
        return build_session(app_name=config.app_name, conf=settings, remote=config.remote)
    if not under_spark_submit():
        return build_session(master=config.master, app_name=config.app_name, conf=settings)
    submitted = submitted_conf()
    if "spark.driver.memory" in settings and "spark.driver.memory" not in submitted:
        log.info("spark.driver.memory from conf is ignored under spark-submit; pass --driver-memory to spark-submit")
    settings.pop("spark.driver.memory", None)
    kept = {key: value for key, value in submitted.items() if key in settings or key in DEFAULT_CONF}
    return build_session(master=None, app_name=config.app_name, conf={**settings, **kept})


def under_spark_submit() -> bool:
    """True when spark-submit (or the pyspark launcher) started this Python process and its JVM."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def submitted_conf() -> dict[str, str]:
    """The settings spark-submit was given (``--conf``, ``--driver-memory`` ...), read from its JVM."""
    SparkContext._ensure_initialized()
    return dict(SparkConf(loadDefaults=True).getAll())


def has_delta_jar(spark: SparkSession) -> bool:
    """True when Delta's JVM classes can be loaded (spark-submit needs ``--packages`` for that). On Spark
    Connect the client cannot look: a server configured with Delta's extension has started with the jar."""
    if is_connect(spark):
        return DELTA_EXTENSION in (spark.conf.get("spark.sql.extensions", "") or "")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return isinstance(jvm.io.delta.tables.DeltaTable, JavaClass)


def active_or_new_session() -> SparkSession:
    """Returns the active session when there is one (spark-submit, notebooks), else builds a local one."""
    spark = SparkSession.getActiveSession()
    if spark is None:
        return build_session()
    return spark


def require_delta(spark: SparkSession) -> None:
    """Raises ValueError unless the session has Delta's SQL extension and catalog configured."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if DELTA_EXTENSION not in extensions:
        raise InvalidArgumentError(
            "spark: the SparkSession is not Delta-enabled (spark.sql.extensions lacks "
            f"{DELTA_EXTENSION}). Build it with streamclaim_spark.state.session.build_session(), or set "
            f"spark.sql.extensions={DELTA_EXTENSION}, spark.sql.catalog.spark_catalog={DELTA_CATALOG} "
            f"and spark.jars.packages={DELTA_PACKAGE}."
        )


def writer_safety(spark: SparkSession, path: str, *, single_writer: bool = False) -> WriterSafety:
    """Checks ``path`` against the log store Delta will use under this session's SparkContext settings.

    Raises object_store.UnsafeObjectStoreError when two drivers could both commit one version there and
    ``single_writer`` is not given. Logs nothing: ``StreamStore.open`` logs the result's warnings once.
    """
    if is_connect(spark):
        # The server's session settings start from its SparkContext's, log-store keys included.
        spark_conf = dict(spark.conf.getAll)
        default_fs = spark_conf.get("spark.hadoop.fs.defaultFS") or "file:///"
    else:
        spark_conf = dict(spark.sparkContext.getConf().getAll())
        default_fs = spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///"
    return check_writer_safety(path, spark_conf, single_writer=single_writer, default_fs=default_fs)


def quiet_expected_failures(spark: SparkSession) -> None:
    """Stops Spark from logging a stack trace for every MERGE the stale-snapshot guard aborts (a Spark
    Connect server's logging is the server's own)."""
    if is_connect(spark):
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    fatal = jvm.org.apache.logging.log4j.Level.FATAL
    for name in _EXPECTED_FAILURE_LOGGERS:
        configurator.setLevel(name, fatal)

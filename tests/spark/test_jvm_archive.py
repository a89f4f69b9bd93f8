"""The class archive scripts/setup.sh builds is the one the session's JVM maps (cli/jvm_archive.py)."""

from __future__ import annotations

import os
import subprocess

from pyspark.sql import SparkSession

from streamclaim_spark.state.jvm_archive import archive_path
from tests.setup_built import setup_built

SPARK_SUBMIT = "org.apache.spark.deploy.SparkSubmit"


def test_the_session_s_jvm_starts_from_the_class_archive_setup_built(spark: SparkSession) -> None:
    archive = setup_built(archive_path(), "JVM class archive")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    # A running JVM cannot be asked where its classes came from, so one of the same build, options and
    # class path starts spark-submit with sharing required (it refuses to start unless the archive maps)
    # and says where it loaded spark-submit's class from: the archive, not the jar.
    system = jvm.java.lang.System
    java = os.path.join(system.getProperty("java.home"), "bin", "java")
    classpath = system.getProperty("java.class.path")
    command = [java, *arguments, "-Xshare:on", "-Xlog:class+load=info", "-cp", classpath, SPARK_SUBMIT, "--version"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = [line for line in done.stdout.splitlines() if f" {SPARK_SUBMIT} source:" in line]
    assert len(loaded) == 1, done.stdout[-2000:]
    assert loaded[0].endswith("source: shared objects file (top)")

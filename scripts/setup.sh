#!/usr/bin/env bash
# Shared install step for tests and demos: the project's .venv (with the dev extras), a redis-server, the JVM
# class archive and the tests' S3DynamoDBLogStore jar.
# Idempotent: an existing .venv is reused, redis-server is installed only when missing, the archive and the
# jar are built only when what they are built from changed.
# The parity tests need a real redis-server; as root this installs Debian's package (7.0.x on bookworm).
# In CI (CI=true) a missing redis-server is an error, so the parity suite can never be skipped there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() { printf '\n==> %s\n' "$*"; }

section "python: .venv with .[dev]"
if [[ ! -x .venv/bin/python ]]; then
    python3.11 -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/python --version

section "redis-server"
if ! command -v redis-server >/dev/null 2>&1; then
    if [[ "$(id -u)" -eq 0 ]]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
    else
        echo "redis-server is not on PATH and only root can install it here: run 'sudo apt-get install redis-server'." >&2
    fi
fi
if command -v redis-server >/dev/null 2>&1; then
    redis-server --version
elif [[ "${CI:-}" == "true" ]]; then
    echo "ERROR: redis-server is required in CI (the parity tests compare the store against it)." >&2
    exit 1
else
    echo "WARNING: no redis-server: the parity tests will be skipped." >&2
fi

section "the local-disk commit classes"
# Delta's commits to file:// without the processes Hadoop's local file system starts for each file
# (state/local_commits.py); built again only when their sources, the JDK or the versions changed.
.venv/bin/python -m streamclaim_spark.cli.local_commits_jar --if-stale

section "JVM class archive"
# New processes map the classes Spark and Delta load instead of loading them (~4 s of a cold job's start,
# docs/BENCHMARKS.md); built again only when Java, pyspark or Delta changed.
.venv/bin/python -m streamclaim_spark.cli.jvm_archive --if-stale

section "test jar: Delta's S3DynamoDBLogStore"
# tests/spark/test_s3.py races two drivers through io.delta:delta-storage-s3-dynamodb, which not every Maven
# registry serves: built from Delta's sources in tests/jars/delta-storage-s3-dynamodb (javac, against jars
# Spark's Ivy resolves), again only when they, the JDK or the versions changed. Without a JDK it warns (the
# test then asks Maven for the published jar), except in CI (CI=true), where that is an error.
.venv/bin/python -m tests.jars.log_store_jar --if-stale

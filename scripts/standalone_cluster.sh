#!/usr/bin/env bash
# Runs the recovery job, then a Structured Streaming query, on a local Spark standalone cluster: a master
# and one worker on 127.0.0.1, started with pyspark's own sbin/spark-daemon.sh (pyspark ships no
# start-master.sh) and stopped on exit. It builds a small demo store, submits jobs/recover_stale.py to the
# cluster with spark-submit, prints the job's JSON summary and checks the tables it wrote; then it submits
# a query that consumes a group with the streamclaim source and writes every entry into another stream
# with the sink (AvailableNow), and checks each entry arrived exactly once. Too slow for CI;
# docs/RECOVERY.md and docs/STREAMING.md record runs.
#
#   bash scripts/standalone_cluster.sh            # work folder: a new /tmp/streamclaim-standalone.*
#   WORK=/tmp/sc MASTER_PORT=7177 bash scripts/standalone_cluster.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() { printf '\n==> %s\n' "$*"; }

REPO="$PWD"
PY="$REPO/.venv/bin/python"
SPARK_HOME="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
DELTA_PACKAGE="$("$PY" -c 'from streamclaim_spark.state.session import DELTA_PACKAGE; print(DELTA_PACKAGE)')"
WORK="${WORK:-$(mktemp -d /tmp/streamclaim-standalone.XXXXXX)}"
MASTER_PORT="${MASTER_PORT:-7177}"
MASTER_URL="spark://127.0.0.1:${MASTER_PORT}"
export SPARK_HOME PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY"
export SPARK_LOCAL_IP=127.0.0.1 SPARK_MASTER_HOST=127.0.0.1
export SPARK_LOG_DIR="$WORK/logs" SPARK_PID_DIR="$WORK/pids" SPARK_WORKER_DIR="$WORK/worker"
DAEMON="$SPARK_HOME/sbin/spark-daemon.sh"
MASTER=org.apache.spark.deploy.master.Master
WORKER=org.apache.spark.deploy.worker.Worker

stop_cluster() {
    section "stopping the cluster"
    "$DAEMON" stop "$WORKER" 1 || true
    "$DAEMON" stop "$MASTER" 1 || true
}
trap stop_cluster EXIT

section "cluster: master $MASTER_URL and one worker (work folder $WORK)"
"$DAEMON" start "$MASTER" 1 --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "${MASTER_UI_PORT:-8180}"
"$DAEMON" start "$WORKER" 1 --host 127.0.0.1 --webui-port "${WORKER_UI_PORT:-8181}" \
    --cores 1 --memory 1g "$MASTER_URL"
for _ in $(seq 1 180); do
    if grep -qs "Registering worker" "$SPARK_LOG_DIR"/*Master*.out; then break; fi
    sleep 1
done
grep -h "Registering worker" "$SPARK_LOG_DIR"/*Master*.out || { echo "the worker did not register" >&2; exit 1; }

section "demo store: orders/billing, e0..e3 delivered to alice 2 h ago, e0 delivered 5 times"
"$PY" - "$WORK/store" 2>"$WORK/demo-store.log" <<'EOF'
import sys, time
from pyspark.sql import functions as F
from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session

spark = build_session(master="local[1]", app_name="standalone-demo-store")
spark.sparkContext.setLogLevel("ERROR")
store = StreamStore.open(sys.argv[1], spark=spark, clock=lambda: time.time_ns() // 1_000_000 - 7_200_000)
first = store.append("orders", spark.range(4).select(F.col("id").alias("n"))).first_id
ids = [f"{first.ms}-{i}" for i in range(4)]
store.execute("XGROUP", "CREATE", "orders", "billing", "0")
store.deliver("orders", "billing", "alice")
store.execute("XCLAIM", "orders", "billing", "alice", "0", ids[0], "RETRYCOUNT", "5", "JUSTID")
print("store", sys.argv[1], "entries", ids)
EOF

section "spark-submit --master $MASTER_URL jobs/recover_stale.py"
mkdir -p "$WORK/conf"
cp conf/base.toml "$WORK/conf/base.toml"
# spark-submit passes the job's stdout and stderr on together through its own stdout (job.out); its
# JVM logs to stderr (job.log). --summary-file keeps a clean copy of the JSON summary.
set +e
(cd "$WORK" && "$SPARK_HOME/bin/spark-submit" --master "$MASTER_URL" --packages "$DELTA_PACKAGE" \
    --conf spark.ui.enabled=false --total-executor-cores 1 --executor-memory 1g \
    "$REPO/jobs/recover_stale.py" --conf-dir "$WORK/conf" --store "$WORK/store" \
    --min-idle 30m --max-deliveries 3 --summary-file "$WORK/summary.json" >"$WORK/job.out" 2>"$WORK/job.log")
status=$?
set -e
echo "exit code: $status"
echo "job log:"
grep -E "streamclaim_spark" "$WORK/job.out" || true
echo "summary:"
cat "$WORK/summary.json" 2>/dev/null || true
grep -h "Registering app\|Launching executor" "$SPARK_LOG_DIR"/*Master*.out || true
for executor in "$SPARK_WORKER_DIR"/app-*/*; do
    echo "executor $executor finished $(grep -c "Finished task" "$executor/stderr" || true) task(s) on the worker"
done
[[ $status -eq 0 ]] || { tail -50 "$WORK/job.out" "$WORK/job.log" >&2; exit "$status"; }

section "tables after the run"
"$PY" - "$WORK/store" 2>"$WORK/check.log" <<'EOF'
import sys
from streamclaim_spark import sql
from streamclaim_spark.state.session import build_session

spark = build_session(master="local[1]", app_name="standalone-check")
spark.sparkContext.setLogLevel("ERROR")
sql.register(spark, sys.argv[1])
for query in (
    "SELECT stream, group_name, id, owner, delivery_count FROM streamclaim.pending ORDER BY id_ms, id_seq",
    "SELECT run_id, stream, group_name, id, owner, delivery_count FROM streamclaim.dead_letters",
    "SELECT run_id, status, scanned, claimed, dead_lettered, conflicts_retried FROM streamclaim.recovery_runs",
):
    spark.sql(query).show(truncate=False)
EOF

section "streaming on the cluster: 'in' consumed by group g (source), copied into 'out' (sink), AvailableNow"
cat >"$WORK/streaming_job.py" <<'EOF'
"""Submitted to the cluster: the streamclaim source and sink end to end, every entry checked once."""
import json
import sys

from pyspark.sql import functions as F

from streamclaim_spark import StreamStore
from streamclaim_spark.state.session import build_session
from streamclaim_spark.streaming import register

path, checkpoint, entries, per_trigger = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spark = build_session(master=None, app_name="standalone-streaming")
spark.sparkContext.setLogLevel("ERROR")
store = StreamStore.open(path, spark=spark)
store.append("in", spark.range(entries).select(F.col("id").alias("n")))
store.execute("XGROUP", "CREATE", "in", "g", "0")
register(spark)
source = (
    spark.readStream.format("streamclaim").option("path", path).option("stream", "in").option("group", "g")
    .option("consumer", "spark-1").option("maxEntriesPerTrigger", per_trigger).option("rowsPerPartition", 1000)
    .load()
)
# Each copy carries its source ID, so the check below sees every entry exactly once.
copies = source.select(
    F.concat("fields", F.array(F.struct(F.lit(b"src").alias("field"), F.col("id").cast("binary").alias("value"))))
    .alias("pairs")
)
query = (
    copies.writeStream.format("streamclaim").option("path", path).option("stream", "out").option("fields", "pairs")
    .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
)
query.awaitTermination()
batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
sources = [entry[1][-1] for entry in store.execute("XRANGE", "out", "-", "+")]
inputs = [entry[0] for entry in store.execute("XRANGE", "in", "-", "+")]
summary = {
    "entries": entries,
    "micro_batches": len(batches),
    "out_length": store.execute("XLEN", "out"),
    "every_entry_once": sorted(sources) == sorted(inputs) and len(set(sources)) == len(sources),
    "pending_after_last_batch": store.execute("XPENDING", "in", "g")[0],
}
print("STREAMING " + json.dumps(summary))
ok = summary["every_entry_once"] and summary["out_length"] == entries
sys.exit(0 if ok else 1)
EOF
set +e
(cd "$WORK" && "$SPARK_HOME/bin/spark-submit" --master "$MASTER_URL" --packages "$DELTA_PACKAGE" \
    --conf spark.ui.enabled=false --total-executor-cores 1 --executor-memory 1g \
    "$WORK/streaming_job.py" "$WORK/streaming-store" "$WORK/streaming-checkpoint" "${ENTRIES:-20000}" 5000 \
    >"$WORK/streaming.out" 2>"$WORK/streaming.log")
status=$?
set -e
echo "exit code: $status"
grep -h "^STREAMING " "$WORK/streaming.out" || true
for executor in "$SPARK_WORKER_DIR"/app-*/*; do
    echo "executor $executor finished $(grep -c "Finished task" "$executor/stderr" || true) task(s) on the worker"
done
[[ $status -eq 0 ]] || { tail -50 "$WORK/streaming.out" "$WORK/streaming.log" >&2; exit "$status"; }

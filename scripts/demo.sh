#!/usr/bin/env bash
# The README's main command: install everything (scripts/setup.sh), then run the demo of the recovery
# job on the embedded default: local Spark, Delta tables under ./data/demo-store.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh >/dev/null
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
exec python -m streamclaim_spark.demo "$@"

#!/usr/bin/env bash
# The project's test command: install (scripts/setup.sh), lint, format check, type check, then pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -q tests/parity` or `bash scripts/test.sh -- --co -q`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() { printf '\n==> %s\n' "$*"; }

bash scripts/setup.sh

# Run everything from the venv, including the Python workers Spark starts (it looks up python3 on PATH).
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"

section "ruff check"
ruff check .

section "ruff format --check"
ruff format --check .

section "mypy"
mypy

section "pytest"
if [[ "${1:-}" == "--" ]]; then
    shift
fi
# Two workers, each with its own SparkSession and redis-server, each taking whole test files (so a module's
# shared stores are built once): 1.3x the throughput of one on two cores (docs/TESTING.md). The 25 slowest
# tests are printed at the end. Later arguments win: `bash scripts/test.sh -n 0 tests/unit` runs in-process.
python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25 "$@"

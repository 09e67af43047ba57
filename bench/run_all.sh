#!/usr/bin/env bash
# Run every benchmark; JSON goes to bench/results/<name>.json.
# Usage: bench/run_all.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
for name in headline model_vs_sim heuristics planning_time; do
    echo "== bench/${name}.py $*"
    python "bench/${name}.py" "$@"
done

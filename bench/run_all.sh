#!/usr/bin/env bash
# Run every benchmark; JSON goes to bench/results/<name>.json.
# Usage: bench/run_all.sh [--quick] [--no-mpi]
#   --no-mpi skips the benchmarks that start mpiexec (headline_measured, runtime_vs_sim,
#   collectives_measured, native, dropin, host_overhead, measure_accuracy, overlap: one process
#   per rank on this machine). dropin needs the bench extra (pip install -e ".[bench]":
#   pylops-mpi; it exits 2 without it).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
mpi=1
for a in "$@"; do
    if [ "$a" = "--no-mpi" ]; then mpi=0; else args+=("$a"); fi
done
names=(headline model_vs_sim heuristics planning_time simulator_speed bounds collectives collectives_bound heterogeneous)
if [ "$mpi" = 1 ]; then
    names+=(headline_measured runtime_vs_sim collectives_measured native dropin host_overhead measure_accuracy overlap)
fi
for name in "${names[@]}"; do
    echo "== bench/${name}.py ${args[*]+"${args[*]}"}"
    python "bench/${name}.py" ${args[@]+"${args[@]}"}
done

#!/usr/bin/env bash
# Collective bandwidth benchmark: the runtime's MPI all-gather and
# reduce-scatter (seed layout) at 2 and 4 ranks on this machine, 1 MB to
# 256 MB, next to memcpy of the same size measured in the same run
# (nccl-tests definitions of algbw and busbw).
# Usage: bench/collectives/run.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
for n in 2 4; do
  echo "=== N=$n"
  mpirun --oversubscribe --bind-to none -np "$n" \
    "$build/bin/fsdp-collective-bench" --min-mb 1 --max-mb 256
done

#!/usr/bin/env bash
# Collective bandwidth benchmark: the runtime's MPI all-gather and
# reduce-scatter (seed layout) at 2 and 4 ranks on this machine, 1 MB to
# 256 MB, next to memcpy of the same size measured in the same run
# (nccl-tests definitions of algbw and busbw). Each N runs twice: with the
# runtime's ring reduce-scatter (the default) and with Open MPI's own
# MPI_Reduce_scatter (FSDP_REDUCE_SCATTER=mpi), the baseline.
# Usage: bench/collectives/run.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
for n in 2 4; do
  for rs in ring mpi; do
    echo "=== N=$n, reduce-scatter: $rs"
    mpirun --oversubscribe --bind-to none -np "$n" -x FSDP_REDUCE_SCATTER=$rs \
      "$build/bin/fsdp-collective-bench" --min-mb 1 --max-mb 256
  done
done

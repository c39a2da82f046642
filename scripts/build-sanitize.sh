#!/usr/bin/env bash
# The sanitizer build: fsdp-opt, fsdp-run and the CPU kernel test (and the
# tools the lit tests name) under AddressSanitizer and UndefinedBehavior-
# Sanitizer (GCC; libasan and libubsan come with it), in a second build
# directory, ${ASAN_BUILD_DIR:-build-asan}, at -O1: a cold build 22% faster
# than at -O3 and the checks no slower, since the runtime's targets ask
# for -O3 themselves (docs/testing.md), and as a unity build: each
# target's sources compiled in batches of 8, so that MLIR's headers and
# their inline functions are compiled once a batch, not once a file (a
# cold build 5 min 20 s instead of 7 min 39 s; the code stays
# unity-safe: no two files of a target define the same internal name).
# With --check it then runs, each
# failure fatal:
#   * the lit tests of test/Runtime and test/fsdp-opt with these tools,
#   * the CPU kernel test (OpenBLAS),
#   * a 2-rank mpirun of a tiny plan (the collective path),
#   * the fuzzers: their saved crashers, then fresh cases with fixed seeds,
#     each fuzzer stopping after a count or a time budget. Two sweeps:
#     FSDP_TEST_SWEEP=long (what CI runs, .ci/run): 1500 plans and 600
#     models (150 s each at most), 600 data files, 400 configs, 400
#     --init-from files, 300 checkpoints and 300 command lines (40 s each),
#     40 per-rank option mixes (30 s); quick (the default, the README's
#     test command): 400, 150 (40 s), 150, 100, 100, 80, 80 (10 s), 12
#     (12 s). FUZZ_PLAN_CASES, FUZZ_MODEL_CASES, FUZZ_DATA_CASES,
#     FUZZ_CONFIG_CASES, FUZZ_SAFETENSORS_CASES, FUZZ_CHECKPOINT_CASES,
#     FUZZ_OPTIONS_CASES, FUZZ_RANK_CASES and the budgets FUZZ_TIME_BUDGET,
#     FUZZ_DATA_TIME_BUDGET, FUZZ_RANK_TIME_BUDGET override a figure
#     (docs/testing.md).
# CTest runs `build-sanitize.sh --check` (the `sanitizers` test).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ASAN_BUILD_DIR:-$root/build-asan}"
check=0
[ "${1:-}" = "--check" ] && check=1

"$root/scripts/setup.sh" >/dev/null

flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
if [ ! -f "$build/build.ninja" ]; then
  # CUDA stays out: nvcc and the sanitizers do not mix, and the CUDA backend
  # needs a GPU to run anyway.
  CC=gcc CXX=g++ cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DFSDP_ENABLE_CUDA=OFF \
    -DCMAKE_UNITY_BUILD=ON \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
fi
# ccache shares objects between checkouts under /work (its default base
# directory otherwise makes every worktree's paths differ).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}"
# fsdp-sanitizer-tools: every tool the lit suite names, less the emulated
# CUDA module that only tests unsupported here load (test/CMakeLists.txt).
ninja -C "$build" fsdp-sanitizer-tools fsdp-cpu-kernels-test

[ "$check" = 1 ] || exit 0

# MPI and OpenBLAS's threads leak by design: no leak checks. Any other
# report stops the process with a non-zero exit. allow_user_poisoning=0:
# LLVM's BumpPtrAllocator poisons a new slab from our instrumented inline
# copy of it while Debian's uninstrumented libMLIR allocates from the same
# slab without unpoisoning, which ASan reports as use-after-poison in code
# that is correct (docs/testing.md); real heap errors are still caught.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=99:allow_user_poisoning=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=98"
export OMP_NUM_THREADS=1
bin="$build/bin"

echo "== sanitizers: lit (test/Runtime, test/fsdp-opt)"
/usr/lib/llvm-22/bin/lit -s "$build/test/Runtime" "$build/test/fsdp-opt"

echo "== sanitizers: CPU kernels"
"$bin/fsdp-cpu-kernels-test" openblas

echo "== sanitizers: 2 ranks over MPI"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin/fsdp-gen" mlp --layers 2 --width 8 --in-features 4 --classes 3 --batch 2 |
  "$bin/fsdp-opt" --fsdp-train-pipeline="world-size=2" -o "$tmp/mlp2.plan"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to none -np 2 \
  -x ASAN_OPTIONS -x UBSAN_OPTIONS -x OMP_NUM_THREADS \
  "$bin/fsdp-run" "$tmp/mlp2.plan" --steps 3 --threads 1 >"$tmp/mpi.log"
grep -q "summary: 3 steps" "$tmp/mpi.log"

echo "== sanitizers: fuzzers"
for f in plans models data configs safetensors checkpoints rank_options options; do
  python3 "$root/test/fuzz/fuzz_$f.py" --bin "$bin" --replay
done
# Fresh cases: the sweep's budgets (CI runs the long one, scripts/test.sh the
# quick one by default; each FUZZ_* variable overrides its figure).
if [ "${FSDP_TEST_SWEEP:-quick}" = long ]; then
  big=(1500 600 150); small=(600 400 400 300 300 40); short=40; rank=30
else
  big=(400 150 40); small=(150 100 100 80 80 12); short=10; rank=12
fi
fresh() { # fuzzer cases seconds [more options]
  python3 "$root/test/fuzz/fuzz_$1.py" --bin "$bin" --seed 1 --cases "$2" \
    --time-budget "$3" "${@:4}"
}
fresh plans "${FUZZ_PLAN_CASES:-${big[0]}}" "${FUZZ_TIME_BUDGET:-${big[2]}}"
fresh models "${FUZZ_MODEL_CASES:-${big[1]}}" "${FUZZ_TIME_BUDGET:-${big[2]}}"
budget="${FUZZ_DATA_TIME_BUDGET:-$short}"
fresh data "${FUZZ_DATA_CASES:-${small[0]}}" "$budget"
fresh configs "${FUZZ_CONFIG_CASES:-${small[1]}}" "$budget"
fresh safetensors "${FUZZ_SAFETENSORS_CASES:-${small[2]}}" "$budget"
fresh checkpoints "${FUZZ_CHECKPOINT_CASES:-${small[3]}}" "$budget"
fresh options "${FUZZ_OPTIONS_CASES:-${small[4]}}" "$budget"
# 2 ranks a case under mpirun: two at a time on 2 cores, a minute before a
# case counts as hung.
fresh rank_options "${FUZZ_RANK_CASES:-${small[5]}}" \
  "${FUZZ_RANK_TIME_BUDGET:-$rank}" --jobs 2 --timeout 60
echo "sanitizers: all clean"

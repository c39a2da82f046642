#!/usr/bin/env bash
# Memcheck on the normal (release) build, ${BUILD_DIR:-build}: what the
# sanitizer build cannot see. ASan's allocator and its allow_user_poisoning=0
# (scripts/build-sanitize.sh) change what a heap corruption touches; the
# issue-27 parser corruption aborted the release fsdp-opt every time and was
# silent under ASan. Runs, each failure fatal (docs/testing.md):
#   * the parser's error cases that once freed a value still in use
#     (test/Dialect/FSDP/compute-parse-invalid.mlir, -verify-diagnostics);
#   * every saved crasher of every fuzzer (their --replay);
#   * a bounded sample of each fuzzer's fresh cases, seed 1
#     (FUZZ_VALGRIND_CASES per fuzzer: 6 in the long sweep that CI runs,
#     FSDP_TEST_SWEEP=long, 2 in the quick one).
# CTest runs it as the `valgrind` test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
bin="$build/bin"
if [ "${FSDP_TEST_SWEEP:-quick}" = long ]; then sample=6; else sample=2; fi
cases="${FUZZ_VALGRIND_CASES:-$sample}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== valgrind: parser error cases"
valgrind -q --error-exitcode=97 "$bin/fsdp-opt" \
  "$root/test/Dialect/FSDP/compute-parse-invalid.mlir" \
  -split-input-file -verify-diagnostics >/dev/null

for f in plans models data configs safetensors checkpoints rank_options options; do
  echo "== valgrind: fuzz_$f.py, saved crashers and $cases fresh cases"
  python3 "$root/test/fuzz/fuzz_$f.py" --bin "$bin" --valgrind --replay
  python3 "$root/test/fuzz/fuzz_$f.py" --bin "$bin" --valgrind --seed 1 \
    --cases "$cases" --jobs 2
done
echo "valgrind: all clean"

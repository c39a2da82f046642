#!/usr/bin/env bash
# The one test command: sets up, builds, and runs every test through CTest
# (the lit suite, docs-in-sync checks, the sanitizer build, memcheck, ...).
# FSDP_TEST_SWEEP=long runs the fuzzers' long sweep, as CI does (.ci/run);
# the default, quick, runs about a quarter of its cases (docs/testing.md).
#
# The Python packages the tests compare against (torch, transformers,
# safetensors, tokenizers: scripts/setup-python.sh) install in the
# background while the build runs, mostly waiting on the network; the tests
# then require them (FSDP_REQUIRE_PYTHON_PACKAGES: lit stops rather than
# reporting their tests UNSUPPORTED).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
mkdir -p "$build"
python_log="$build/setup-python.log"
"$root/scripts/setup-python.sh" > "$build/setup-python.out" 2> "$python_log" &
python_setup=$!

BUILD_DIR="$build" "$root/scripts/build.sh"
if ! wait "$python_setup"; then
  cat "$python_log" >&2
  echo "test.sh: scripts/setup-python.sh failed (log above)" >&2
  exit 1
fi
cat "$python_log"
export FSDP_PYTHON="$(cat "$build/setup-python.out")"
export FSDP_REQUIRE_PYTHON_PACKAGES=1
cd "$build"
echo "test.sh: the fuzzers' ${FSDP_TEST_SWEEP:-quick} sweep; Python for the tests: $FSDP_PYTHON"
ctest --output-on-failure -j 2

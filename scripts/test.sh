#!/usr/bin/env bash
# The one test command: sets up, builds, and runs every test through CTest
# (the lit suite, docs-in-sync checks, the sanitizer build, memcheck, ...).
# FSDP_TEST_SWEEP=long runs the fuzzers' long sweep, as CI does (.ci/run);
# the default, quick, runs about a quarter of its cases (docs/testing.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

BUILD_DIR="$build" "$root/scripts/build.sh"
cd "$build"
echo "test.sh: the fuzzers' ${FSDP_TEST_SWEEP:-quick} sweep"
ctest --output-on-failure -j 2

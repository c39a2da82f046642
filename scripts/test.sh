#!/usr/bin/env bash
# The one test command: sets up, builds, and runs every test through CTest
# (the lit suite, docs-in-sync checks, and more as the project grows).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

BUILD_DIR="$build" "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j 2

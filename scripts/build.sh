#!/usr/bin/env bash
# Configures and builds fsdp-mlir into ${BUILD_DIR:-build} (Ninja, Release).
# Installs the packages it needs first (scripts/setup.sh is idempotent).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
# ccache hits across checkouts (a CI clone elsewhere, a worktree): paths
# below the checkout's parent are hashed relative to it.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build"

#!/usr/bin/env bash
# Prints one SHA-256 over the runtime's sources (runtime/: every file the
# runtime-only build `cmake -S runtime` reads), so that check.sh can tell
# whether the prebuilt binaries that prepare.sh made (bench/gpu/prebuilt,
# manifest.txt's source_hash) were built from the sources it has.
# The files hashed are those the device tool copies: in a git checkout,
# the tracked and the untracked-but-not-ignored ones (git ls-files -co
# --exclude-standard); without git (a copied tree), every file under
# runtime/ but Python caches. Content and path only, not modes or times.
# Not runtime/test/cuda-emulation/: the CPU emulation of the device, which
# none of the three prebuilt binaries contains (prepare.sh configures with
# FSDP_BUILD_CUDA_EMULATOR=OFF), so that work on it does not make the
# prebuilt runtime stale.
# Usage: bench/gpu/runtime-hash.sh [REPO_ROOT]
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root"
list() {
  if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files -co --exclude-standard -- runtime
  else
    find runtime -type f ! -name '*.pyc' ! -path '*/__pycache__/*'
  fi
}
# A tracked file deleted from the working tree is listed by git but absent.
list | grep -v '^runtime/test/cuda-emulation/' | LC_ALL=C sort -u | while IFS= read -r f; do
  [[ -f "$f" ]] && printf '%s\0' "$f"
done | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1

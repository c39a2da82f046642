#!/usr/bin/env bash
# check.sh --dry-run on fake prepared paths, without a GPU, for the lit test
# test/Runtime/gpu-check-dry-run.test (about a second): a fake plans
# folder and a fake prebuilt runtime (shell scripts; fsdp-run's
# --list-devices lists "device 0") with a manifest as prepare.sh writes
# it, then the cases check.sh must tell apart: usable, built from other
# sources, a file that is not the manifest's, no prebuilt folder, missing
# plans, and the deadline guard.
# Usage: bench/gpu/test-dry-run.sh WORK_DIR   (emptied first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$1"
rm -rf "$work"
mkdir -p "$work/plans" "$work/prebuilt/bin" "$work/prebuilt/lib" "$work/out"
for f in tiny.plan gpt2-124m.plan tokens.bin tiny-bf16.plan gpt2-124m-bf16.plan; do
  : > "$work/plans/$f"
done
echo '{}' > "$work/plans/reference.json"
printf '#!/bin/sh\necho "device 0: a fake GPU, sm_90"\n' > "$work/prebuilt/bin/fsdp-run"
printf '#!/bin/sh\necho "cuda-kernels: 0 passed, 0 failed"\n' > "$work/prebuilt/bin/fsdp-cuda-kernels-test"
echo "not a module" > "$work/prebuilt/lib/libfsdp-backend-cuda.so"
chmod +x "$work/prebuilt/bin/"*
manifest() {
  echo "commit=test"
  echo "source_hash=$1"
  echo "cuda_architectures=80;90"
  local f
  for f in bin/fsdp-run lib/libfsdp-backend-cuda.so bin/fsdp-cuda-kernels-test; do
    echo "file=$f size=$(stat -c %s "$work/prebuilt/$f") sha256=$(sha256sum "$work/prebuilt/$f" | cut -d' ' -f1) needed="
  done
}
hash=$("$root/bench/gpu/runtime-hash.sh" "$root")
check() {
  echo "--- case: $1"
  shift
  OUT="$work/out" TMPDIR="$work" "$@" "$root/bench/gpu/check.sh" --dry-run "$work/plans" 2>&1
  echo "exit: $?"
}
set +e
manifest "$hash" > "$work/prebuilt/manifest.txt"
check usable env PREBUILT_DIR="$work/prebuilt"
manifest 0000 > "$work/prebuilt/manifest.txt"
check stale env PREBUILT_DIR="$work/prebuilt"
manifest "$hash" > "$work/prebuilt/manifest.txt"
echo >> "$work/prebuilt/lib/libfsdp-backend-cuda.so"
check changed env PREBUILT_DIR="$work/prebuilt"
check absent env PREBUILT_DIR="$work/none"
check deadline env PREBUILT_DIR="$work/none" CHECK_DEADLINE=25
rm "$work/plans/reference.json"
check no-plans env PREBUILT_DIR="$work/none"
exit 0

#!/usr/bin/env bash
# The main job: sets up and builds, generates a small GPT-2, compiles it
# into a plan (fsdp-opt --fsdp-train-pipeline), prints the compiler's memory
# report, then trains it on the CPU backend with fsdp-run on a built-in
# English text, one progress line every 25 steps and a summary at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

BUILD_DIR="$build" "$root/scripts/build.sh" > /dev/null
bin="$build/bin"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "=== fsdp-gen gpt2 (4 layers, dim 128, 4 heads, byte vocabulary, seq 64, batch 8)"
"$bin/fsdp-gen" gpt2 --layers 4 --dim 128 --heads 4 --vocab 256 --seq 64 \
  --batch 8 -o "$out/model.mlir"
echo "=== fsdp-opt --fsdp-train-pipeline -o model.plan"
"$bin/fsdp-opt" "$out/model.mlir" --fsdp-train-pipeline="lr=2e-3" \
  --fsdp-plan-memory=report --fsdp-summary -o "$out/model.plan"
echo "=== fsdp-run model.plan --steps 300"
"$bin/fsdp-run" "$out/model.plan" --steps 300 --log-every 25 --threads "$(nproc)"

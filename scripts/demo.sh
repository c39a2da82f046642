#!/usr/bin/env bash
# The main job: sets up and builds, generates a small GPT-2, compiles it into
# a training step, prints that step and a summary of its units.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

BUILD_DIR="$build" "$root/scripts/build.sh" > /dev/null
bin="$build/bin"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

"$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 64 \
  --batch 4 -o "$out/model.mlir"
"$bin/fsdp-opt" "$out/model.mlir" --fsdp-train-pipeline --fsdp-summary \
  -o "$out/train.mlir" 2> "$out/summary.txt"
echo "=== @train_step (fsdp-opt --fsdp-train-pipeline) ==="
sed -n '/func.func @train_step/,$p' "$out/train.mlir"
echo
echo "=== summary ==="
cat "$out/summary.txt"

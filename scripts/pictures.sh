#!/usr/bin/env bash
# Regenerates the pictures in docs/pictures/ (docs/memory.md and README
# show them):
#
#   llama-13b-8-before.svg, llama-13b-8-after.svg
#       --fsdp-plan-memory="svg=..." of llama-13b-shape at 8 ranks, one
#       2048-token sequence per rank: materialized attention without
#       recomputation, and the pipeline's choice under memory-budget=40GB
#       (runtime=cuda). The compiler writes them byte for byte the same on
#       every machine; `--check` regenerates them into a temporary folder
#       and fails when a committed one differs (test/Dialect/Runtime/
#       plan-memory-docs.test runs it, in a second).
#   loss-f32-bf16.svg
#       scripts/plot-runs.py over two fsdp-run --report-json files: a small
#       GPT-2 trained for 300 steps at 2 ranks, f32 and param-dtype=bf16,
#       validated every 50 steps on test/Runtime/Inputs/corpus.txt.
#       Needs mpirun and matplotlib (optional; the script says how to
#       install it); matplotlib's output is not byte-stable across its
#       versions, so this one is produced here, not checked.
#
#   scripts/pictures.sh [--check] [--memory-only]
#
# The tools come from $FSDP_BIN (default: $BUILD_DIR/bin, BUILD_DIR=build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${FSDP_BIN:-$root/${BUILD_DIR:-build}/bin}"
check=0 memory_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    --memory-only) memory_only=1 ;;
    *) echo "pictures: unknown option $arg (--check, --memory-only)" >&2; exit 2 ;;
  esac
done
out="$root/docs/pictures"
if [ "$check" = 1 ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

llama() { "$bin/fsdp-gen" --preset llama-13b-shape --batch 8; }
llama | "$bin/fsdp-opt" --fsdp-train-pipeline="world-size=8 attention=materialized runtime=cuda" \
  --fsdp-plan-memory="svg=$out/llama-13b-8-before.svg memory-budget=40GB runtime=cuda" -o /dev/null
llama | "$bin/fsdp-opt" --fsdp-train-pipeline="world-size=8 memory-budget=40GB runtime=cuda" \
  --fsdp-plan-memory="svg=$out/llama-13b-8-after.svg memory-budget=40GB runtime=cuda" -o /dev/null 2>/dev/null

if [ "$check" = 1 ]; then
  for f in llama-13b-8-before.svg llama-13b-8-after.svg; do
    if ! cmp -s "$out/$f" "$root/docs/pictures/$f"; then
      echo "pictures: docs/pictures/$f is stale: run scripts/pictures.sh" >&2
      exit 1
    fi
  done
  echo "pictures: the memory pictures in docs/pictures are up to date"
  exit 0
fi
[ "$memory_only" = 1 ] && exit 0

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 64 --batch 8 > "$tmp/gpt2.mlir"
for dtype in f32 bf16; do
  "$bin/fsdp-opt" "$tmp/gpt2.mlir" --fsdp-train-pipeline="world-size=2 param-dtype=$dtype" -o "$tmp/$dtype.plan"
  mpirun --oversubscribe --bind-to none -np 2 "$bin/fsdp-run" "$tmp/$dtype.plan" \
    --data "$root/data/corpus.txt" --steps 300 --threads 1 --report-json "$tmp/$dtype.json" \
    --val-data "$root/test/Runtime/Inputs/corpus.txt" --val-every 50 --val-steps 4 > /dev/null
done
python3 "$root/scripts/plot-runs.py" "$tmp/f32.json" "$tmp/bf16.json" --label f32 --label bf16 \
  --title "GPT-2 2 x 64, byte vocabulary, 2 ranks, data/corpus.txt" -o "$out/loss-f32-bf16.svg"

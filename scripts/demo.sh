#!/usr/bin/env bash
# The main job: sets up and builds, generates a small GPT-2, compiles it for
# two ranks (fsdp-opt --fsdp-train-pipeline="world-size=2": units, batch
# split, autodiff, sharding, verification, lowering, memory plan), prints
# the compiler's memory report, then trains it with FSDP on two CPU ranks
# (mpirun, one process per rank) on a small English text (data/corpus.txt),
# the learning rate warming up over 20 steps and then following a cosine to
# a tenth of the peak: one progress line every 25 steps and a summary at
# the end. Without MPI it trains the
# same model on one rank.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

BUILD_DIR="$build" "$root/scripts/build.sh" > /dev/null
bin="$build/bin"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

ranks=2
launch=(mpirun --oversubscribe --bind-to none -np "$ranks")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! command -v mpirun > /dev/null; then
  ranks=1
  launch=()
fi
threads=$(( $(nproc) / ranks ))
(( threads >= 1 )) || threads=1

echo "=== fsdp-gen gpt2 (4 layers, dim 128, 4 heads, byte vocabulary, seq 64, global batch 8)"
"$bin/fsdp-gen" gpt2 --layers 4 --dim 128 --heads 4 --vocab 256 --seq 64 \
  --batch 8 -o "$out/model.mlir"
echo "=== fsdp-opt --fsdp-train-pipeline=\"world-size=$ranks\" -o model.plan"
"$bin/fsdp-opt" "$out/model.mlir" --fsdp-train-pipeline="world-size=$ranks lr=2e-3" \
  --fsdp-plan-memory=report -o "$out/model.plan"
echo "=== ${launch[*]} fsdp-run model.plan --steps 300 --lr-schedule cosine --warmup-steps 20 --min-lr 2e-4"
"${launch[@]}" "$bin/fsdp-run" "$out/model.plan" --steps 300 --log-every 25 \
  --lr-schedule cosine --warmup-steps 20 --min-lr 2e-4 \
  --threads "$threads" --data "$root/data/corpus.txt"

#!/usr/bin/env bash
# The main job: sets up and builds, generates a small GPT-2, compiles it for
# two ranks (fsdp-opt --fsdp-train-pipeline="world-size=2": units, batch
# split, autodiff, sharding, verification, lowering, memory plan), prints
# the compiler's memory report, then trains it with FSDP on two CPU ranks
# (mpirun, one process per rank) on a small English text (data/corpus.txt:
# its last 1025 bytes held out as validation data, measured every 50
# steps by the plan's evaluation step), the learning rate warming up over 20 steps and then following a cosine to
# a tenth of the peak, the gradients clipped to global norm 1 in the
# compiled step, a checkpoint every 50 steps: one progress line every 25
# steps. At step 150 it is interrupted (SIGTERM, as a preemption would),
# resumed from its checkpoint, and finishes with the parameters of the
# same run uninterrupted, bit for bit (the demo checks). Without MPI it trains the
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
echo "=== fsdp-opt --fsdp-train-pipeline=\"world-size=$ranks lr=2e-3 grad-clip=1.0\" -o model.plan"
"$bin/fsdp-opt" "$out/model.mlir" \
  --fsdp-train-pipeline="world-size=$ranks lr=2e-3 grad-clip=1.0" \
  --fsdp-plan-memory=report -o "$out/model.plan"

# The text's last 1025 bytes (two global batches of 8 x 64 and their last
# target) are held out: the model never trains on them.
corpus="$root/data/corpus.txt"
held=1025
head -c "$(( $(wc -c < "$corpus") - held ))" "$corpus" > "$out/train.txt"
tail -c "$held" "$corpus" > "$out/val.txt"

# The run: a cosine schedule after 20 warmup steps, the gradients clipped
# to norm 1 inside the compiled step, the validation loss and a checkpoint
# every 50 steps.
train=("$bin/fsdp-run" "$out/model.plan" --steps 300 --log-every 25
       --lr-schedule cosine --warmup-steps 20 --min-lr 2e-4
       --threads "$threads" --data "$out/train.txt"
       --val-data "$out/val.txt" --val-every 50)

echo "=== ${launch[*]} fsdp-run model.plan --steps 300 --lr-schedule cosine" \
  "--warmup-steps 20 --min-lr 2e-4 --data train.txt --val-data val.txt" \
  "--val-every 50 --checkpoint-dir ckpt --checkpoint-every 50"
echo "    (interrupted with SIGTERM after step 150)"
"${launch[@]}" "${train[@]}" --checkpoint-dir "$out/ckpt" \
  --checkpoint-every 50 > "$out/first.log" 2>&1 &
job=$!
# Follow the log; once step 150 is printed, SIGTERM every rank (what
# SLURM's preemption sends): each finishes its step, they agree on where
# to stop, write a checkpoint there and exit.
shown=0
while kill -0 "$job" 2> /dev/null; do
  lines=$(wc -l < "$out/first.log")
  if (( lines > shown )); then
    sed -n "$((shown + 1)),${lines}p" "$out/first.log"
    shown=$lines
  fi
  if grep -q "^step   150/300" "$out/first.log"; then
    pkill -TERM -f "fsdp-run $out/model.plan" || true
    break
  fi
  sleep 0.05
done
wait "$job" || true # stopped runs exit 75
sed -n "$((shown + 1)),\$p" "$out/first.log" | grep -v "^---\|^Primary job\|^mpirun\|^  Process\|^  Exit\|^$" || true

echo "=== ${launch[*]} fsdp-run model.plan ... --resume ckpt --export resumed.safetensors"
"${launch[@]}" "${train[@]}" --resume "$out/ckpt" --export "$out/resumed.safetensors"

echo "=== the same run without the interruption, for comparison"
"${launch[@]}" "${train[@]}" --export "$out/straight.safetensors" \
  | grep "^summary: 300 steps"
# Both exports hold the full weights by Hugging Face's GPT-2 names: the same
# bytes are the same parameters.
if cmp -s "$out/resumed.safetensors" "$out/straight.safetensors"; then
  echo "demo: the interrupted and resumed run ends with the uninterrupted" \
    "run's parameters, bit for bit"
else
  echo "demo: the resumed run's parameters differ from the uninterrupted run's" >&2
  exit 1
fi

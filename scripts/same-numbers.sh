#!/usr/bin/env bash
# Same numbers before and after a refactor: compiles a fixed set of models
# with one build's tools and trains each a few steps, writing every plan,
# memory report, step log and final weights into a folder; two folders (the
# build before and the build after) then compare file for file.
#
#   scripts/same-numbers.sh BIN_DIR OUT_DIR          record one build
#   scripts/same-numbers.sh --compare DIR_A DIR_B    every file byte-equal
#
# The set covers what a refactor of the compiler, the plan loader or the
# kernel dispatch can move: GPT-2 and a grouped-query Llama; 1, 2 and 4
# ranks (mesh 2x2); f32 and bf16 with reduce-dtype both ways; materialized
# and blocked attention; recomputation; prefetch and buckets; clipping.
# Step logs keep the losses, gradient norms and learning rates and drop
# the timings (which differ run to run); the weights are exported after
# the last step, so "bitwise equal" covers every parameter too.
set -euo pipefail

if [[ ${1:-} == --compare ]]; then
  a="$2" b="$3"
  status=0
  files=$( (cd "$a" && find . -type f) | sort)
  [[ -n $files ]] || { echo "same-numbers: $a is empty" >&2; exit 2; }
  for f in $files; do
    if ! cmp -s "$a/$f" "$b/$f"; then
      echo "DIFFERS: $f"
      status=1
    fi
  done
  extra=$(comm -13 <(echo "$files") <( (cd "$b" && find . -type f) | sort))
  [[ -z $extra ]] || { echo "ONLY IN $b: $extra"; status=1; }
  (( status == 0 )) && echo "same-numbers: $(echo "$files" | wc -l) files" \
    "byte-identical"
  exit $status
fi

bin="$(cd "$1" && pwd)" out="$2"
corpus="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/data/corpus.txt"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive

"$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 32 \
  --batch 8 -o "$out/gpt2.mlir"
"$bin/fsdp-gen" llama --layers 2 --dim 64 --heads 4 --kv-heads 2 \
  --ffn-dim 160 --vocab 256 --seq 32 --batch 8 -o "$out/llama.mlir"
"$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 32 \
  --batch 8 --dtype bf16 -o "$out/gpt2-bf16.mlir"

# name | model | ranks | pipeline options
cases=(
  "gpt2-1|gpt2|1|world-size=1 lr=1e-3"
  "gpt2-2|gpt2|2|world-size=2 lr=1e-3 grad-clip=1.0"
  "gpt2-2-blocked-remat|gpt2|2|world-size=2 lr=1e-3 attention=blocked remat=full"
  "gpt2-2-prefetch-buckets|gpt2|2|world-size=2 lr=1e-3 forward-prefetch=1 backward-prefetch=1 bucket-bytes=100000"
  "gpt2-mesh2x2|gpt2|4|mesh=2x2 world-size=4 lr=1e-3 grad-clip=0.5"
  "gpt2-bf16-2|gpt2-bf16|2|world-size=2 lr=1e-3"
  "gpt2-bf16-2-reduce-bf16|gpt2-bf16|2|world-size=2 lr=1e-3 reduce-dtype=bf16"
  "llama-1|llama|1|world-size=1 lr=1e-3"
  "llama-2|llama|2|world-size=2 lr=1e-3 grad-clip=1.0 remat=selective"
  "llama-2-blocked|llama|2|world-size=2 lr=1e-3 attention=blocked"
)
for entry in "${cases[@]}"; do
  IFS='|' read -r name model ranks options <<< "$entry"
  "$bin/fsdp-opt" "$out/$model.mlir" --fsdp-train-pipeline="$options" \
    --fsdp-plan-memory=report -o "$out/$name.plan" 2> "$out/$name.report"
  launch=()
  (( ranks > 1 )) && launch=(mpirun --oversubscribe --bind-to none -np "$ranks")
  "${launch[@]}" "$bin/fsdp-run" "$out/$name.plan" --steps 4 --log-every 1 \
    --threads 1 --data "$corpus" --export "$out/$name.safetensors" 2>&1 |
    grep '^step\|^summary: [0-9]* steps\|high-water\|live peak' |
    sed -E 's/\| +[0-9.]+ ms \|.*//; s/, [0-9.]+ ms\/step.*//' \
      > "$out/$name.log"
done
rm -f "$out"/*.mlir
echo "same-numbers: recorded ${#cases[@]} cases in $out"

#!/usr/bin/env bash
# Prepares what bench/gpu/check.sh needs on the GPU machine, which has no
# MLIR: compiles the plans here and records the CPU backend's losses on
# them as the reference the GPU must reproduce.
#   tiny.plan       GPT-2, 2 layers, dim 64, byte vocabulary, seq 64, batch 8
#   gpt2-124m.plan  the gpt2-124m preset, batch 4 x 1024 tokens (PyTorch's
#                   baseline in check.sh trains the same shapes)
#   gpt2-124m-materialized.plan  the same with attention materialized (the
#                   blocked CUDA kernels against cuBLAS-based attention)
#   attn-base.plan, attn-fit.plan  GPT-2 6 layers, dim 256, T 1024, batch 8,
#                   GPT-2's vocabulary: materialized attention without
#                   recomputation, and blocked with full recomputation
#   tiny-bf16.plan, gpt2-124m-bf16.plan  the same two with mixed precision
#                   (param-dtype=bf16 reduce-dtype=f32: FSDP2's
#                   MixedPrecisionPolicy; fp32 master weights and AdamW)
#   tokens.bin      random GPT-2 token ids in llm.c's format (fixed seed)
#   reference.json  CPU losses: tiny for 30 steps on data/corpus.txt (fp32
#                   and, where the bf16 plan compiled and ran, bf16),
#                   gpt2-124m for 3 steps on tokens.bin; the model shapes
# Usage: bench/gpu/prepare.sh [OUT_DIR]   (default bench/gpu/plans, which
# git ignores; carry it to the GPU machine). Takes a few minutes (three
# gpt2-124m steps on the CPU).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/bench/gpu/plans}"
build="${BUILD_DIR:-$root/build}"
BUILD_DIR="$build" "$root/scripts/build.sh" > /dev/null
bin="$build/bin"
mkdir -p "$out"

"$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 64 \
  --batch 8 | "$bin/fsdp-opt" --fsdp-train-pipeline="lr=1e-3" -o "$out/tiny.plan"
"$bin/fsdp-gen" --preset gpt2-124m --batch 4 --seq 1024 \
  | "$bin/fsdp-opt" --fsdp-train-pipeline -o "$out/gpt2-124m.plan"
"$bin/fsdp-gen" --preset gpt2-124m --batch 4 --seq 1024 \
  | "$bin/fsdp-opt" --fsdp-train-pipeline=attention=materialized \
      -o "$out/gpt2-124m-materialized.plan"
"$bin/fsdp-gen" gpt2 --layers 6 --dim 256 --heads 4 --vocab 50257 --seq 1024 \
  --batch 8 > "$out/attn.mlir"
"$bin/fsdp-opt" "$out/attn.mlir" \
  --fsdp-train-pipeline="attention=materialized remat=none" -o "$out/attn-base.plan"
"$bin/fsdp-opt" "$out/attn.mlir" \
  --fsdp-train-pipeline="attention=blocked remat=full" -o "$out/attn-fit.plan"
rm "$out/attn.mlir"
# Mixed precision. A compiler without the options (or a CPU backend that
# cannot run the plan) leaves the bf16 plans out, with a warning: check.sh
# then reports them missing and checks the rest.
mixed="param-dtype=bf16 reduce-dtype=f32"
rm -f "$out/tiny-bf16.plan" "$out/gpt2-124m-bf16.plan" "$out/tiny-bf16-cpu.json"
if "$bin/fsdp-gen" gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 64 \
     --batch 8 | "$bin/fsdp-opt" --fsdp-train-pipeline="lr=1e-3 $mixed" \
     -o "$out/tiny-bf16.plan" \
   && "$bin/fsdp-gen" --preset gpt2-124m --batch 4 --seq 1024 \
     | "$bin/fsdp-opt" --fsdp-train-pipeline="$mixed" \
       -o "$out/gpt2-124m-bf16.plan"; then
  "$bin/fsdp-run" "$out/tiny-bf16.plan" --steps 30 --log-every 100 \
    --data "$root/data/corpus.txt" --report-json "$out/tiny-bf16-cpu.json" \
    > /dev/null \
    || echo "prepare: warning: the CPU backend could not train tiny-bf16.plan: no bf16 reference" >&2
else
  rm -f "$out/tiny-bf16.plan" "$out/gpt2-124m-bf16.plan"
  echo "prepare: warning: fsdp-opt did not compile the bf16 plans ($mixed): check.sh skips them" >&2
fi
python3 - "$out/tokens.bin" <<'PY'
import random, struct, sys
rng = random.Random(1234)
count = 200_000
header = struct.pack("<256i", 20240520, 1, count, *([0] * 253))
tokens = struct.pack(f"<{count}H", *(rng.randrange(50257) for _ in range(count)))
open(sys.argv[1], "wb").write(header + tokens)
PY
"$bin/fsdp-run" "$out/tiny.plan" --steps 30 --log-every 100 --data "$root/data/corpus.txt" \
  --report-json "$out/tiny-cpu.json" > /dev/null
"$bin/fsdp-run" "$out/gpt2-124m.plan" --steps 3 --data "$out/tokens.bin" \
  --report-json "$out/gpt2-124m-cpu.json"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
ref = {
    "tiny": json.load(open(os.path.join(out, "tiny-cpu.json"))),
    "gpt2-124m": json.load(open(os.path.join(out, "gpt2-124m-cpu.json"))),
    "mixed-precision": "param-dtype=bf16 reduce-dtype=f32",
    "gpt2-124m-shape": {"layers": 12, "dim": 768, "heads": 12,
                        "vocab": 50257, "seq": 1024, "batch": 4},
}
bf16 = os.path.join(out, "tiny-bf16-cpu.json")
if os.path.exists(bf16):
    ref["tiny-bf16"] = json.load(open(bf16))
json.dump(ref, open(os.path.join(out, "reference.json"), "w"), indent=1)
PY
echo "prepare: plans and CPU reference losses in $out"
ls -l "$out"

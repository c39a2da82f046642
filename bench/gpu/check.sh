#!/usr/bin/env bash
# The GPU check, for the lent GPU machine (one GPU with CUDA, NCCL, PyTorch
# and CMake; no MLIR, no package registry). Run from the repository root,
# with the plans that bench/gpu/prepare.sh compiled here carried along:
#   bench/gpu/check.sh [PLANS_DIR]     (default bench/gpu/plans)
# It lists the devices, builds the runtime there (CUDA backend; MPI and a
# CPU BLAS only if present), runs the CPU-versus-GPU kernel parity suite,
# trains the carried plans on the GPU and compares their losses with the
# CPU backend's (pedantic fp32 GEMMs), times gpt2-124m (TF32, as PyTorch's
# default matmul precision setting here) and PyTorch eager on the same
# shapes in the same run; then mixed precision (the plans compiled with
# param-dtype=bf16 reduce-dtype=f32): tiny's losses against the CPU
# backend's bf16 run and our fp32 run, gpt2-124m timed against PyTorch
# eager under torch.autocast(bfloat16); then the Llama (when prepare.sh
# compiled it; else one line says it is skipped): a tiny Llama's losses
# against the CPU's (fp32 and bf16), a GPT-2-124M-sized Llama's
# (llama-124m: 12 x 768, 12 heads, 4 kv heads, ffn 2048, vocab 32000,
# 4 x 1024 tokens) fp32 losses against the CPU's, bench/gpu/torch_llama.py's
# tiny Llama from our initial values against the CPU's losses, and
# llama-124m timed in TF32 and in bf16 against torch_llama.py (the same
# Llama in plain PyTorch, eager, TF32 and autocast bf16); last the
# optional parts: torch.compile of GPT-2 (within $TORCH_COMPILE_LIMIT
# seconds, 90) and of the Llama (within $LLAMA_COMPILE_LIMIT, 90, and only
# when that much is left); and prints one table per model
# (bench/gpu/summarize.py). Everything it produces goes to $OUT (or
# /tmp/gpu-check). Budget, estimated (never measured): about 10 minutes on
# an H200, most of it the build; the Llama adds one to two.
#
# Deadline: every stage after the build runs under a timeout that ends it
# at $CHECK_DEADLINE seconds after the start (540 by default: one device
# command may run 600 s) less the summary's reserve, and a stage that
# would start with under 10 s left is skipped with a line saying so; the
# summary always runs, and reports what was skipped as missing.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
plans="${1:-$root/bench/gpu/plans}"
out="${OUT:-/tmp/gpu-check}"
build="${GPU_BUILD_DIR:-/tmp/fsdp-gpu-build}"
mkdir -p "$out"
start=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - start )) s] $*"; }
deadline="${CHECK_DEADLINE:-540}"
reserve=20  # seconds kept for the summary
# The guard's own lines go to the script's stdout (fd 3), past the pipes
# and filters of the stage.
exec 3>&1
elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( deadline - reserve - $(elapsed) )); }
# within SECONDS CMD...: CMD under a timeout of SECONDS or what is left
# before the deadline, whichever is less; skipped (status 125) when under
# 10 s are left; a stop by the timeout is named (status 124).
within() {
  local want=$1 l what rc
  shift
  what="${1##*/}"
  (( $# > 1 )) && what+=" ${2##*/}"
  l=$(left)
  (( l < want )) && want=$l
  if (( want < 10 )); then
    echo "check: skipped at $(elapsed) s, past the deadline (CHECK_DEADLINE=$deadline s): $what" >&3
    return 125
  fi
  timeout -k 5 "$want" "$@"
  rc=$?
  if (( rc == 124 || rc == 137 )); then
    echo "check: stopped after $want s by its timeout or the deadline guard (CHECK_DEADLINE=$deadline s, at $(elapsed) s): $what" >&3
  fi
  return $rc
}

stamp "devices"
nvidia-smi -L || true
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
  --format=csv || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')" || true
for f in tiny.plan gpt2-124m.plan tokens.bin reference.json; do
  [[ -f "$plans/$f" ]] || { echo "check: $plans/$f is missing (run bench/gpu/prepare.sh and carry $plans)" >&2; exit 2; }
done

stamp "build the runtime"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake "${generator[@]}" -S "$root/runtime" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" > "$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 1; }
grep -E "fsdp runtime" "$out/configure.log"
cmake --build "$build" -j "$(nproc)" --target fsdp-run fsdp-cuda-kernels-test \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
run="$build/bin/fsdp-run"
# Through the CUDA backend module that building fsdp-run built next to it
# ($build/lib/libfsdp-backend-cuda.so): a module that does not load is
# named here, with dlerror().
"$run" --list-devices

stamp "kernel parity (CPU reference vs GPU)"
within 240 "$build/bin/fsdp-cuda-kernels-test" 2>&1 | tee "$out/parity.log"
echo "parity exit: ${PIPESTATUS[0]}" | tee -a "$out/parity.log"

stamp "tiny GPT-2, fp32, 30 steps (losses vs the CPU backend)"
within 60 "$run" "$plans/tiny.plan" --backend cuda --tf32 off --steps 30 --log-every 10 --data "$root/data/corpus.txt" \
  --report-json "$out/tiny-cuda.json" 2>&1 | tail -4

stamp "gpt2-124m, fp32, 3 steps (losses vs the CPU backend)"
within 90 "$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 off --steps 3 \
  --data "$plans/tokens.bin" --report-json "$out/gpt2-124m-fp32.json" 2>&1 | tail -4

stamp "gpt2-124m, TF32, timed"
within 120 "$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 on --steps 25 \
  --log-every 5 --data "$plans/tokens.bin" --profile \
  --report-json "$out/gpt2-124m-tf32.json" 2>&1 | tee "$out/gpt2-124m-tf32.log" | tail -40

stamp "gpt2-124m device memory: measured (total less free) vs the compiler's prediction"
grep -E "summary: (device memory|predicted by the compiler|outside the arena)" \
  "$out/gpt2-124m-tf32.log"

stamp "mixed precision (param-dtype=bf16 reduce-dtype=f32): tiny GPT-2, 30 steps (vs the CPU's bf16 run and our fp32 run)"
if [[ -f "$plans/tiny-bf16.plan" ]]; then
  within 60 "$run" "$plans/tiny-bf16.plan" --backend cuda --tf32 off --steps 30 --log-every 10 \
    --data "$root/data/corpus.txt" --report-json "$out/tiny-bf16-cuda.json" 2>&1 | tail -4
else
  echo "check: $plans/tiny-bf16.plan is missing (prepare.sh could not compile it)"
fi

stamp "gpt2-124m, mixed precision (bf16 parameters and compute, f32 reduce and AdamW), timed"
if [[ -f "$plans/gpt2-124m-bf16.plan" ]]; then
  within 120 "$run" "$plans/gpt2-124m-bf16.plan" --backend cuda --tf32 on --steps 25 \
    --log-every 5 --data "$plans/tokens.bin" --profile \
    --report-json "$out/gpt2-124m-bf16.json" 2>&1 | tee "$out/gpt2-124m-bf16.log" | tail -40
  grep -E "summary: (device memory|predicted by the compiler|outside the arena)" \
    "$out/gpt2-124m-bf16.log"
else
  echo "check: $plans/gpt2-124m-bf16.plan is missing (prepare.sh could not compile it)"
fi

stamp "gpt2-124m, TF32, attention materialized (cuBLAS) against blocked (above)"
within 90 "$run" "$plans/gpt2-124m-materialized.plan" --backend cuda --tf32 on --steps 10 \
  --log-every 5 --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|device memory|predicted by)"

stamp "attention-dominated GPT-2 (6 x 256, T 1024): materialized, no recompute vs blocked + full recompute"
for form in attn-base attn-fit; do
  [[ -f "$plans/$form.plan" ]] || { echo "check: $plans/$form.plan is missing"; continue; }
  echo "--- $form"
  within 90 "$run" "$plans/$form.plan" --backend cuda --tf32 on --steps 10 --log-every 5 \
    --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|arena|device memory|predicted by)"
done

stamp "PyTorch eager, same shapes, same GPU"
within 120 python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
  --json "$out/torch-manual.json" 2>&1 | tail -3
within 120 python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
  --attention sdpa --json "$out/torch-sdpa.json" 2>&1 | tail -3

stamp "PyTorch, torch.autocast(bfloat16), same shapes, same GPU"
for attention in manual sdpa; do
  within 120 python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
    --autocast bf16 --attention "$attention" \
    --json "$out/torch-$attention-bf16.json" 2>&1 | tail -3
done
# The Llama. Its files are optional: a plans directory from before the
# Llama (or a compiler that could not build it) skips these stages with
# a line, and the summary reports the Llama as not prepared.
llama_present=1
for f in llama-124m.plan llama-tokens.bin llama-124m-params.json; do
  [[ -f "$plans/$f" ]] || { (( llama_present )) && missing_llama=$f; llama_present=0; }
done
if (( llama_present )) && ! grep -q '"llama-124m-shape"' "$plans/reference.json"; then
  llama_present=0; missing_llama='reference.json'"'"'s "llama-124m-shape"'
fi
if (( ! llama_present )); then
  stamp "Llama: skipped ($plans/$missing_llama is missing: run bench/gpu/prepare.sh again and carry $plans)"
else
  stamp "tiny Llama, fp32 and mixed precision, 30 steps (losses vs the CPU backend)"
  for name in tiny-llama tiny-llama-bf16; do
    if [[ -f "$plans/$name.plan" ]]; then
      within 60 "$run" "$plans/$name.plan" --backend cuda --tf32 off --steps 30 \
        --log-every 10 --data "$root/data/corpus.txt" \
        --report-json "$out/$name-cuda.json" 2>&1 | tail -4
    else
      echo "check: $plans/$name.plan is missing (prepare.sh could not compile it)"
    fi
  done

  stamp "llama-124m, fp32, 2 steps (losses vs the CPU backend)"
  within 90 "$run" "$plans/llama-124m.plan" --backend cuda --tf32 off --steps 2 \
    --data "$plans/llama-tokens.bin" --report-json "$out/llama-124m-fp32.json" 2>&1 | tail -4

  stamp "llama-124m, TF32, timed"
  within 90 "$run" "$plans/llama-124m.plan" --backend cuda --tf32 on --steps 12 \
    --log-every 4 --data "$plans/llama-tokens.bin" --profile \
    --report-json "$out/llama-124m-tf32.json" 2>&1 | tee "$out/llama-124m-tf32.log" | tail -40
  grep -E "summary: (device memory|predicted by the compiler|outside the arena)" \
    "$out/llama-124m-tf32.log"

  stamp "llama-124m, mixed precision (bf16 parameters and compute, f32 reduce and AdamW), timed"
  if [[ -f "$plans/llama-124m-bf16.plan" ]]; then
    within 90 "$run" "$plans/llama-124m-bf16.plan" --backend cuda --tf32 on --steps 12 \
      --log-every 4 --data "$plans/llama-tokens.bin" \
      --report-json "$out/llama-124m-bf16.json" 2>&1 | tee "$out/llama-124m-bf16.log" \
      | grep -E "summary: ([0-9]+ steps|device memory|predicted by the compiler)|error"
  else
    echo "check: $plans/llama-124m-bf16.plan is missing (prepare.sh could not compile it)"
  fi

  stamp "PyTorch Llama (bench/gpu/torch_llama.py): the tiny Llama from our initial values (losses vs the CPU backend), then eager TF32 and autocast bf16, manual and sdpa attention, timed"
  # One process (PyTorch imported once): the equivalence run, then the four
  # variants, each writing its JSON when done, so a stop by the guard keeps
  # the finished ones.
  equivalence=()
  grep -q '"tiny-llama-shape"' "$plans/reference.json" && equivalence=(--equivalence)
  within 150 python3 "$root/bench/gpu/torch_llama.py" --reference "$plans/reference.json" \
    --manifest "$plans/llama-124m-params.json" --steps 10 --warmup 3 --tf32 on \
    "${equivalence[@]}" --variants manual,sdpa,manual-bf16,sdpa-bf16 \
    --json-dir "$out" 2>&1 | tee "$out/torch-llama.log" | grep -vE "^torch_llama: wrote "
fi

stamp "PyTorch GPT-2, torch.compile, autocast bf16, sdpa (within ${TORCH_COMPILE_LIMIT:-90} s)"
limit="${TORCH_COMPILE_LIMIT:-90}"
within "$limit" python3 "$root/bench/gpu/torch_baseline.py" --steps 20 \
  --warmup 3 --tf32 on --autocast bf16 --attention sdpa --compile \
  --json "$out/torch-compile-bf16.json" > "$out/torch-compile-bf16.log" 2>&1
case $? in
  0) tail -3 "$out/torch-compile-bf16.log" ;;
  124|137) echo "torch.compile: skipped (it did not compile and run within its limit, at most $limit s)"
       rm -f "$out/torch-compile-bf16.json" ;;
  125) rm -f "$out/torch-compile-bf16.json" ;;
  *) echo "torch.compile: skipped (it failed):"; tail -3 "$out/torch-compile-bf16.log"
     rm -f "$out/torch-compile-bf16.json" ;;
esac

if (( llama_present )); then
  limit="${LLAMA_COMPILE_LIMIT:-90}"
  if (( $(left) < limit )); then
    echo "torch.compile (Llama): skipped ($(left) s left before the deadline, it needs up to $limit s)"
  else
    stamp "PyTorch Llama, torch.compile, autocast bf16, sdpa (within $limit s)"
    within "$limit" python3 "$root/bench/gpu/torch_llama.py" \
      --reference "$plans/reference.json" --manifest "$plans/llama-124m-params.json" \
      --steps 10 --warmup 3 --tf32 on --variants compile-bf16 --json-dir "$out" \
      > "$out/torch-llama-compile.log" 2>&1
    case $? in
      0) grep -E "^torch_llama: compile-bf16 \|" "$out/torch-llama-compile.log" ;;
      124|137) echo "torch.compile (Llama): skipped (it did not compile and run within $limit s)"
         rm -f "$out/torch-llama-compile-bf16.json" ;;
      *) echo "torch.compile (Llama): skipped (it failed):"; tail -3 "$out/torch-llama-compile.log"
         rm -f "$out/torch-llama-compile-bf16.json" ;;
    esac
  fi
fi

stamp "summary"
python3 "$root/bench/gpu/summarize.py" "$plans/reference.json" "$out"
status=$?
stamp "done"
exit $status

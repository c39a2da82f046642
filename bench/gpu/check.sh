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
# eager under torch.autocast(bfloat16) and, when it compiles and runs
# within $TORCH_COMPILE_LIMIT seconds (90), torch.compile; and prints one
# table (bench/gpu/summarize.py). Everything it produces goes to $OUT (or
# /tmp/gpu-check). Budget: about 10 minutes on an H200, most of it the
# build.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
plans="${1:-$root/bench/gpu/plans}"
out="${OUT:-/tmp/gpu-check}"
build="${GPU_BUILD_DIR:-/tmp/fsdp-gpu-build}"
mkdir -p "$out"
start=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - start )) s] $*"; }

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
"$build/bin/fsdp-cuda-kernels-test" 2>&1 | tee "$out/parity.log"
echo "parity exit: ${PIPESTATUS[0]}" | tee -a "$out/parity.log"

stamp "tiny GPT-2, fp32, 30 steps (losses vs the CPU backend)"
"$run" "$plans/tiny.plan" --backend cuda --tf32 off --steps 30 --log-every 10 --data "$root/data/corpus.txt" \
  --report-json "$out/tiny-cuda.json" 2>&1 | tail -4

stamp "gpt2-124m, fp32, 3 steps (losses vs the CPU backend)"
"$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 off --steps 3 \
  --data "$plans/tokens.bin" --report-json "$out/gpt2-124m-fp32.json" 2>&1 | tail -4

stamp "gpt2-124m, TF32, timed"
"$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 on --steps 25 \
  --log-every 5 --data "$plans/tokens.bin" --profile \
  --report-json "$out/gpt2-124m-tf32.json" 2>&1 | tee "$out/gpt2-124m-tf32.log" | tail -40

stamp "gpt2-124m device memory: measured (total less free) vs the compiler's prediction"
grep -E "summary: (device memory|predicted by the compiler|outside the arena)" \
  "$out/gpt2-124m-tf32.log"

stamp "mixed precision (param-dtype=bf16 reduce-dtype=f32): tiny GPT-2, 30 steps (vs the CPU's bf16 run and our fp32 run)"
if [[ -f "$plans/tiny-bf16.plan" ]]; then
  "$run" "$plans/tiny-bf16.plan" --backend cuda --tf32 off --steps 30 --log-every 10 \
    --data "$root/data/corpus.txt" --report-json "$out/tiny-bf16-cuda.json" 2>&1 | tail -4
else
  echo "check: $plans/tiny-bf16.plan is missing (prepare.sh could not compile it)"
fi

stamp "gpt2-124m, mixed precision (bf16 parameters and compute, f32 reduce and AdamW), timed"
if [[ -f "$plans/gpt2-124m-bf16.plan" ]]; then
  "$run" "$plans/gpt2-124m-bf16.plan" --backend cuda --tf32 on --steps 25 \
    --log-every 5 --data "$plans/tokens.bin" --profile \
    --report-json "$out/gpt2-124m-bf16.json" 2>&1 | tee "$out/gpt2-124m-bf16.log" | tail -40
  grep -E "summary: (device memory|predicted by the compiler|outside the arena)" \
    "$out/gpt2-124m-bf16.log"
else
  echo "check: $plans/gpt2-124m-bf16.plan is missing (prepare.sh could not compile it)"
fi

stamp "gpt2-124m, TF32, attention materialized (cuBLAS) against blocked (above)"
"$run" "$plans/gpt2-124m-materialized.plan" --backend cuda --tf32 on --steps 10 \
  --log-every 5 --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|device memory|predicted by)"

stamp "attention-dominated GPT-2 (6 x 256, T 1024): materialized, no recompute vs blocked + full recompute"
for form in attn-base attn-fit; do
  [[ -f "$plans/$form.plan" ]] || { echo "check: $plans/$form.plan is missing"; continue; }
  echo "--- $form"
  "$run" "$plans/$form.plan" --backend cuda --tf32 on --steps 10 --log-every 5 \
    --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|arena|device memory|predicted by)"
done

stamp "PyTorch eager, same shapes, same GPU"
python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
  --json "$out/torch-manual.json" 2>&1 | tail -3
python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
  --attention sdpa --json "$out/torch-sdpa.json" 2>&1 | tail -3

stamp "PyTorch, torch.autocast(bfloat16), same shapes, same GPU"
for attention in manual sdpa; do
  python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
    --autocast bf16 --attention "$attention" \
    --json "$out/torch-$attention-bf16.json" 2>&1 | tail -3
done
limit="${TORCH_COMPILE_LIMIT:-90}"
timeout "$limit" python3 "$root/bench/gpu/torch_baseline.py" --steps 20 \
  --warmup 3 --tf32 on --autocast bf16 --attention sdpa --compile \
  --json "$out/torch-compile-bf16.json" > "$out/torch-compile-bf16.log" 2>&1
case $? in
  0) tail -3 "$out/torch-compile-bf16.log" ;;
  124) echo "torch.compile: skipped (it did not compile and run within $limit s)"
       rm -f "$out/torch-compile-bf16.json" ;;
  *) echo "torch.compile: skipped (it failed):"; tail -3 "$out/torch-compile-bf16.log"
     rm -f "$out/torch-compile-bf16.json" ;;
esac

stamp "summary"
python3 "$root/bench/gpu/summarize.py" "$plans/reference.json" "$out"
status=$?
stamp "done"
exit $status

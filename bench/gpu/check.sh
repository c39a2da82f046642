#!/usr/bin/env bash
# The GPU check, for the lent GPU machine (one GPU with CUDA, NCCL, PyTorch
# and CMake; no MLIR, no package registry). Run from the repository root,
# with what bench/gpu/prepare.sh made here carried along (docs/cuda.md,
# "Running the GPU check", has the exact commands):
#   bench/gpu/check.sh [--dry-run] [PLANS_DIR]     (default bench/gpu/plans)
# PLANS_DIR holds the compiled plans, token files and the CPU backend's
# reference losses; bench/gpu/prebuilt (PREBUILT_DIR) the runtime built
# here for the GPU (fsdp-run, the CUDA module, the kernel parity test and
# manifest.txt). The prebuilt runtime is used when its manifest matches
# the files, it was built from this tree's runtime/ (runtime-hash.sh), for
# this GPU's architecture, its libraries resolve (ldd; the CUDA toolkit's
# and PyTorch's pip nvidia-* lib folders are tried when the loader alone
# does not find them) and `fsdp-run --list-devices` lists a device;
# otherwise one line says why and the runtime is built here as before
# (cmake -S runtime for the GPU's architecture; MPI and a CPU BLAS only
# if present), which costs the build's time (estimated 1.5 minutes on 16
# cores: about 50 s of nvcc for one architecture on 2 cores here).
#
# It lists the devices, runs the CPU-versus-GPU kernel parity suite,
# trains the carried plans on the GPU and compares their losses with the
# CPU backend's (pedantic fp32 GEMMs), times gpt2-124m in TF32 with its
# device memory against the compiler's prediction, then mixed precision
# (param-dtype=bf16 reduce-dtype=f32: tiny's losses against the CPU's bf16
# run and our fp32 run, gpt2-124m timed), then the Llama when prepare.sh
# compiled it (a tiny Llama's losses, fp32 and bf16; llama-124m's fp32
# losses, then timed in TF32 and bf16), then the PyTorch baselines on the
# same shapes (GPT-2 eager TF32 and autocast bf16, manual and sdpa
# attention; torch_llama.py: our tiny Llama from our initial values
# against the CPU's losses, and eager llama-124m), then the attention
# forms (materialized against blocked, an attention-dominated GPT-2), and
# last, only if that much time is left, torch.compile of GPT-2 and of the
# Llama. Each stage's table row or PASS/FAIL line is printed as soon as it
# ends (`summarize.py --row`, lines "row: ..."); the full tables and
# verdicts (bench/gpu/summarize.py) end the run. Everything it produces
# goes to $OUT (or /tmp/gpu-check).
#
# Budget per stage, ESTIMATES (never run on a GPU; seconds): the estimate
# of the stage, then the cap of each command in it (its `within` limit).
#   devices            15   30   nvidia-smi, torch's view of the GPU
#   runtime             5  240   prebuilt checks (a build here: ~90)
#   parity             40  120   fsdp-cuda-kernels-test
#   tiny               10   45   30 steps, fp32
#   gpt2-124m-fp32     10   60   3 steps, fp32
#   gpt2-124m-tf32     15   90   25 steps, --profile, memory lines
#   tiny-bf16          10   45
#   gpt2-124m-bf16     15   90   25 steps
#   tiny-llama         15   45   fp32 and bf16, 30 steps each
#   llama-124m-fp32    10   60   2 steps
#   llama-124m-tf32    15   75   12 steps, --profile
#   llama-124m-bf16    15   75   12 steps
#   torch-gpt2-tf32    30   90   torch_baseline.py manual, sdpa
#   torch-gpt2-bf16    30   90   the same under autocast bf16
#   torch-llama        45  150   torch_llama.py: equivalence + 4 variants
#   attention-forms    25   60   materialized gpt2-124m, attn-base, attn-fit
#   torch-compile      --   90   GPT-2, then the Llama: only when the cap is left
#   summary            --   20   kept back from the deadline
# Estimated total 305 s without torch.compile, of the 310 s before the
# summary's reserve: little margin, hence the order. The machine's
# start-up (a few minutes) and the carry come on top, outside the command.
#
# Deadline: every stage runs under a timeout that ends it at
# $CHECK_DEADLINE seconds after the start (330 by default, so that the
# command ends in under 6 minutes) less 20 s kept for the summary, and a
# stage that would start with under 10 s left is skipped with a line
# saying so; the summary always runs, and reports what was skipped as
# missing. The stages run in order of value, so a stop by the guard costs
# the least useful measurements.
#
# --dry-run (or CHECK_DRY_RUN=1): no GPU needed. Checks the plans and the
# prebuilt runtime (manifest, sizes, SHA-256, source hash, ldd; its
# `--list-devices` is run and shown but not required), prints the stage
# plan with the budgets, and walks the stages printing each command it
# would run instead of running it. Takes about a second.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dry="${CHECK_DRY_RUN:-0}"
if [[ "${1:-}" == --dry-run ]]; then
  dry=1
  shift
fi
plans="${1:-$root/bench/gpu/plans}"
out="${OUT:-/tmp/gpu-check}"
build="${GPU_BUILD_DIR:-/tmp/fsdp-gpu-build}"
prebuilt="${PREBUILT_DIR:-$root/bench/gpu/prebuilt}"
mkdir -p "$out"
start=$(date +%s)
deadline="${CHECK_DEADLINE:-330}"
reserve=20  # seconds kept for the summary
# The guard's own lines go to the script's stdout (fd 3), past the pipes
# and filters of the stage.
exec 3>&1
elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( deadline - reserve - $(elapsed) )); }

# The stages: key, estimate (s), cap per command (s), title. The caps are
# what `within` gets (cap KEY); the estimates are printed with the stamp.
stages=(
  "devices|15|30|devices"
  "runtime|5|240|the runtime: prebuilt ($prebuilt) or built here"
  "parity|40|120|kernel parity (CPU reference vs GPU)"
  "tiny|10|45|tiny GPT-2, fp32, 30 steps (losses vs the CPU backend)"
  "gpt2-124m-fp32|10|60|gpt2-124m, fp32, 3 steps (losses vs the CPU backend)"
  "gpt2-124m-tf32|15|90|gpt2-124m, TF32, timed; device memory measured (total less free) vs the compiler's prediction"
  "tiny-bf16|10|45|mixed precision (param-dtype=bf16 reduce-dtype=f32): tiny GPT-2, 30 steps (vs the CPU's bf16 run and our fp32 run)"
  "gpt2-124m-bf16|15|90|gpt2-124m, mixed precision (bf16 parameters and compute, f32 reduce and AdamW), timed"
  "tiny-llama|15|45|tiny Llama, fp32 and mixed precision, 30 steps (losses vs the CPU backend)"
  "llama-124m-fp32|10|60|llama-124m, fp32, 2 steps (losses vs the CPU backend)"
  "llama-124m-tf32|15|75|llama-124m, TF32, timed"
  "llama-124m-bf16|15|75|llama-124m, mixed precision (bf16 parameters and compute, f32 reduce and AdamW), timed"
  "torch-gpt2-tf32|30|90|PyTorch GPT-2 eager, TF32, manual and sdpa attention, same shapes, same GPU"
  "torch-gpt2-bf16|30|90|PyTorch GPT-2, torch.autocast(bfloat16), manual and sdpa attention"
  "torch-llama|45|150|PyTorch Llama (bench/gpu/torch_llama.py): the tiny Llama from our initial values (losses vs the CPU backend), then eager TF32 and autocast bf16, manual and sdpa attention, timed"
  "attention-forms|25|60|attention forms: gpt2-124m materialized (cuBLAS) against blocked (above); GPT-2 6 x 256, T 1024: materialized, no recompute vs blocked + full recompute"
  "torch-compile|0|90|torch.compile (GPT-2, then the Llama), autocast bf16, sdpa: only when its cap is left"
)
field() {  # field KEY N: the stage's Nth field (1 key, 2 estimate, 3 cap, 4 title)
  local s
  for s in "${stages[@]}"; do
    [[ "${s%%|*}" == "$1" ]] && { cut -d'|' -f"$2" <<< "$s"; return; }
  done
  echo "check: no stage $1" >&2
  echo 0
}
cap() { field "$1" 3; }
stamp() { echo "=== [$(elapsed) s] $*"; }
stage() {  # stage KEY: the stamp, with the stage's budget
  stamp "$(field "$1" 4)  (estimate $(field "$1" 2) s, cap $(cap "$1") s per command, $(left) s left)"
}
# within SECONDS CMD...: CMD under a timeout of SECONDS or what is left
# before the deadline, whichever is less; skipped (status 125) when under
# 10 s are left; a stop by the timeout is named (status 124). A dry run
# prints the command instead.
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
  if (( dry )); then
    echo "dry run: would run, for at most $want s: $*" >&3
    return 0
  fi
  timeout -k 5 "$want" "$@"
  rc=$?
  if (( rc == 124 || rc == 137 )); then
    echo "check: stopped after $want s by its timeout or the deadline guard (CHECK_DEADLINE=$deadline s, at $(elapsed) s): $what" >&3
  fi
  return $rc
}
# row KEY: that stage's table rows or PASS/FAIL lines, now.
row() {
  (( dry )) && return 0
  python3 "$root/bench/gpu/summarize.py" --row "$1" "$plans/reference.json" "$out"
}
# memory LOG: fsdp-run's device memory lines, measured and predicted.
memory() {
  (( dry )) && return 0
  grep -E "summary: (device memory|predicted by the compiler|outside the arena)" "$1"
}

if (( dry )); then
  echo "check: dry run (no GPU used): plans $plans, prebuilt $prebuilt, deadline $deadline s"
  echo "stage plan (ESTIMATES, never run on a GPU): estimate s | cap s per command | stage"
  total=0
  for s in "${stages[@]}"; do
    IFS='|' read -r key est capped title <<< "$s"
    printf '  %-16s %4s %4s  %s\n' "$key" "$est" "$capped" "$title"
    total=$(( total + est ))
  done
  echo "  estimated total $total s of $(( deadline - reserve )) s (deadline $deadline s less $reserve s for the summary)"
fi

stage devices
within "$(cap devices)" nvidia-smi -L
within "$(cap devices)" nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
  --format=csv
within "$(cap devices)" python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
for f in tiny.plan gpt2-124m.plan tokens.bin reference.json; do
  [[ -f "$plans/$f" ]] || { echo "check: $plans/$f is missing (run bench/gpu/prepare.sh and carry $plans)" >&2; exit 2; }
done
echo "check: plans: $plans ($(du -sh "$plans" | cut -f1))"

stage runtime
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
# Library folders the prebuilt binaries may need besides the loader's:
# the CUDA toolkit's, and those of PyTorch's pip wheels (nvidia-nccl-cu*,
# nvidia-cublas-cu*, nvidia-cuda-runtime-cu*: site-packages/nvidia/*/lib).
lib_dirs() {
  local d s
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [[ -n "$d" ]] || continue
    for s in lib64 lib targets/x86_64-linux/lib; do
      [[ -d "$d/$s" ]] && echo "$d/$s"
    done
  done
  python3 - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
for base in nvidia.__path__:
    for d in sorted(glob.glob(os.path.join(base, "*", "lib"))
                    + glob.glob(os.path.join(base, "*", "*", "lib"))):
        print(d)
PY
}
prebuilt_files=(bin/fsdp-run lib/libfsdp-backend-cuda.so bin/fsdp-cuda-kernels-test)
# unresolved [LD_LIBRARY_PATH]: ldd's complaints about the prebuilt files.
unresolved() {
  local f
  for f in "${prebuilt_files[@]}"; do
    LD_LIBRARY_PATH="$1" ldd "$prebuilt/$f" 2>&1 | grep -E "not found|version .* not found" \
      | sed "s|^\s*|${f##*/}: |"
  done | sort -u
}
why=""       # why the prebuilt runtime is not used
libpath=""   # what LD_LIBRARY_PATH the prebuilt binaries need
prebuilt_usable() {
  local m="$prebuilt/manifest.txt" line f size sum have want missing d
  [[ -f "$m" ]] || { why="no $m (bench/gpu/prepare.sh makes it; carry bench/gpu/prebuilt)"; return 1; }
  echo "check: prebuilt runtime: $(grep -E '^(commit|built|cuda|cuda_architectures)=' "$m" | tr '\n' ' ')"
  for f in "${prebuilt_files[@]}"; do
    line=$(grep -E "^file=$f " "$m") || { why="$m lists no $f"; return 1; }
    [[ -f "$prebuilt/$f" ]] || { why="$prebuilt/$f is missing"; return 1; }
    size=$(sed -n 's/.* size=\([0-9]*\).*/\1/p' <<< "$line")
    sum=$(sed -n 's/.* sha256=\([0-9a-f]*\).*/\1/p' <<< "$line")
    [[ "$(stat -c %s "$prebuilt/$f")" == "$size" && "$(sha256sum "$prebuilt/$f" | cut -d' ' -f1)" == "$sum" ]] \
      || { why="$prebuilt/$f is not the file the manifest lists (size or SHA-256 differ: a partial carry?)"; return 1; }
    [[ -x "$prebuilt/$f" ]] || chmod +x "$prebuilt/$f" 2> /dev/null
  done
  want=$(sed -n 's/^source_hash=//p' "$m")
  have=$("$root/bench/gpu/runtime-hash.sh" "$root")
  [[ "$want" == "$have" ]] || { why="it was built from other runtime/ sources (source_hash ${want:0:12}, here ${have:0:12}): run bench/gpu/prepare.sh again"; return 1; }
  if [[ -n "$arch" ]]; then
    local archs max a ok=0
    archs=$(sed -n 's/^cuda_architectures=//p' "$m" | tr ';,' '  ')
    max=0
    for a in $archs; do
      a=${a%%-*}
      (( a == arch )) && ok=1
      (( a > max )) && max=$a
    done
    # A newer GPU runs the newest architecture's PTX (CMake's "90" is
    # sm_90 code and compute_90 PTX); an older one runs none of it.
    if (( ! ok )); then
      (( arch > max )) || { why="it was built for sm_{$archs}, this GPU is sm_$arch"; return 1; }
      echo "check: this GPU (sm_$arch) is newer than the prebuilt's sm_{$archs}: its kernels run from compute_$max PTX (JIT-compiled at start-up)"
    fi
  elif (( ! dry )); then
    echo "check: nvidia-smi gave no compute capability: the architecture is not checked"
  fi
  missing=$(unresolved "${LD_LIBRARY_PATH:-}")
  if [[ -n "$missing" ]]; then
    libpath="${LD_LIBRARY_PATH:-}"
    while IFS= read -r d; do
      libpath="${libpath:+$libpath:}$d"
    done < <(lib_dirs | while IFS= read -r d; do readlink -f "$d"; done | awk '!seen[$0]++')
    missing=$(unresolved "$libpath")
    [[ -z "$missing" ]] || { why="its libraries do not resolve here ($(tr '\n' ';' <<< "$missing"))"; return 1; }
    echo "check: the prebuilt binaries run with LD_LIBRARY_PATH=$libpath"
  fi
  local listed
  listed=$(LD_LIBRARY_PATH="${libpath:-${LD_LIBRARY_PATH:-}}" timeout 60 "$prebuilt/bin/fsdp-run" --list-devices 2>&1)
  echo "$listed"
  if ! grep -q "^device 0: " <<< "$listed"; then
    if (( dry )); then
      echo "dry run: fsdp-run --list-devices lists no device here (expected without a GPU); on the device that makes check.sh build the runtime"
    else
      why="its fsdp-run --list-devices lists no device: $(head -1 <<< "$listed")"
      return 1
    fi
  fi
  return 0
}
bin=""
if [[ -d "$prebuilt" ]] && prebuilt_usable; then
  bin="$prebuilt/bin"
  echo "check: using the prebuilt runtime $prebuilt (no build here)"
  if [[ -n "$libpath" ]]; then
    # The binaries, not the whole script (PyTorch keeps its own libraries),
    # get the extra folders: small wrappers that exec them.
    wrappers="${TMPDIR:-/tmp}/fsdp-gpu-check-bin"
    mkdir -p "$wrappers"
    for f in fsdp-run fsdp-cuda-kernels-test; do
      printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$libpath" "$prebuilt/bin/$f" \
        > "$wrappers/$f"
      chmod +x "$wrappers/$f"
    done
    bin="$wrappers"
  fi
else
  [[ -d "$prebuilt" ]] || why="no $prebuilt (bench/gpu/prepare.sh makes it; carry bench/gpu/prebuilt)"
  echo "check: not using the prebuilt runtime: $why"
  echo "check: building the runtime here instead (estimated 1.5 minutes, see the header)"
  generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  within "$(cap runtime)" cmake "${generator[@]}" -S "$root/runtime" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" -DFSDP_BUILD_CUDA_EMULATOR=OFF > "$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log"; exit 1; }
  (( dry )) || grep -E "fsdp runtime" "$out/configure.log"
  within "$(cap runtime)" cmake --build "$build" -j "$(nproc)" --target fsdp-run fsdp-cuda-kernels-test \
    > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  bin="$build/bin"
  # Through the CUDA backend module that building fsdp-run built next to
  # it ($build/lib/libfsdp-backend-cuda.so): a module that does not load
  # is named here, with dlerror().
  within 60 "$bin/fsdp-run" --list-devices
fi
run="$bin/fsdp-run"

stage parity
if (( dry )); then
  within "$(cap parity)" "$bin/fsdp-cuda-kernels-test"
else
  within "$(cap parity)" "$bin/fsdp-cuda-kernels-test" 2>&1 | tee "$out/parity.log"
  echo "parity exit: ${PIPESTATUS[0]}" | tee -a "$out/parity.log"
fi
row parity

stage tiny
within "$(cap tiny)" "$run" "$plans/tiny.plan" --backend cuda --tf32 off --steps 30 --log-every 10 --data "$root/data/corpus.txt" \
  --report-json "$out/tiny-cuda.json" 2>&1 | tail -4
row tiny

stage gpt2-124m-fp32
within "$(cap gpt2-124m-fp32)" "$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 off --steps 3 \
  --data "$plans/tokens.bin" --report-json "$out/gpt2-124m-fp32.json" 2>&1 | tail -4
row gpt2-124m-fp32

stage gpt2-124m-tf32
within "$(cap gpt2-124m-tf32)" "$run" "$plans/gpt2-124m.plan" --backend cuda --tf32 on --steps 25 \
  --log-every 5 --data "$plans/tokens.bin" --profile \
  --report-json "$out/gpt2-124m-tf32.json" 2>&1 | tee "$out/gpt2-124m-tf32.log" | tail -40
memory "$out/gpt2-124m-tf32.log"
row gpt2-124m-tf32

stage tiny-bf16
if [[ -f "$plans/tiny-bf16.plan" ]]; then
  within "$(cap tiny-bf16)" "$run" "$plans/tiny-bf16.plan" --backend cuda --tf32 off --steps 30 --log-every 10 \
    --data "$root/data/corpus.txt" --report-json "$out/tiny-bf16-cuda.json" 2>&1 | tail -4
  row tiny-bf16
else
  echo "check: $plans/tiny-bf16.plan is missing (prepare.sh could not compile it)"
fi

stage gpt2-124m-bf16
if [[ -f "$plans/gpt2-124m-bf16.plan" ]]; then
  within "$(cap gpt2-124m-bf16)" "$run" "$plans/gpt2-124m-bf16.plan" --backend cuda --tf32 on --steps 25 \
    --log-every 5 --data "$plans/tokens.bin" --profile \
    --report-json "$out/gpt2-124m-bf16.json" 2>&1 | tee "$out/gpt2-124m-bf16.log" | tail -40
  memory "$out/gpt2-124m-bf16.log"
  row gpt2-124m-bf16
else
  echo "check: $plans/gpt2-124m-bf16.plan is missing (prepare.sh could not compile it)"
fi

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
  stage tiny-llama
  for name in tiny-llama tiny-llama-bf16; do
    if [[ -f "$plans/$name.plan" ]]; then
      within "$(cap tiny-llama)" "$run" "$plans/$name.plan" --backend cuda --tf32 off --steps 30 \
        --log-every 10 --data "$root/data/corpus.txt" \
        --report-json "$out/$name-cuda.json" 2>&1 | tail -4
      row "$name"
    else
      echo "check: $plans/$name.plan is missing (prepare.sh could not compile it)"
    fi
  done

  stage llama-124m-fp32
  within "$(cap llama-124m-fp32)" "$run" "$plans/llama-124m.plan" --backend cuda --tf32 off --steps 2 \
    --data "$plans/llama-tokens.bin" --report-json "$out/llama-124m-fp32.json" 2>&1 | tail -4
  row llama-124m-fp32

  stage llama-124m-tf32
  within "$(cap llama-124m-tf32)" "$run" "$plans/llama-124m.plan" --backend cuda --tf32 on --steps 12 \
    --log-every 4 --data "$plans/llama-tokens.bin" --profile \
    --report-json "$out/llama-124m-tf32.json" 2>&1 | tee "$out/llama-124m-tf32.log" | tail -40
  memory "$out/llama-124m-tf32.log"
  row llama-124m-tf32

  stage llama-124m-bf16
  if [[ -f "$plans/llama-124m-bf16.plan" ]]; then
    within "$(cap llama-124m-bf16)" "$run" "$plans/llama-124m-bf16.plan" --backend cuda --tf32 on --steps 12 \
      --log-every 4 --data "$plans/llama-tokens.bin" \
      --report-json "$out/llama-124m-bf16.json" 2>&1 | tee "$out/llama-124m-bf16.log" \
      | grep -E "summary: ([0-9]+ steps|device memory|predicted by the compiler)|error"
    row llama-124m-bf16
  else
    echo "check: $plans/llama-124m-bf16.plan is missing (prepare.sh could not compile it)"
  fi
fi

stage torch-gpt2-tf32
for attention in manual sdpa; do
  within "$(cap torch-gpt2-tf32)" python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
    --attention "$attention" --json "$out/torch-$attention.json" 2>&1 | tail -3
  row "torch-$attention"
done

stage torch-gpt2-bf16
for attention in manual sdpa; do
  within "$(cap torch-gpt2-bf16)" python3 "$root/bench/gpu/torch_baseline.py" --steps 20 --warmup 3 --tf32 on \
    --autocast bf16 --attention "$attention" \
    --json "$out/torch-$attention-bf16.json" 2>&1 | tail -3
  row "torch-$attention-bf16"
done

if (( llama_present )); then
  stage torch-llama
  # One process (PyTorch imported once): the equivalence run, then the four
  # variants, each writing its JSON when done, so a stop by the guard keeps
  # the finished ones.
  equivalence=()
  grep -q '"tiny-llama-shape"' "$plans/reference.json" && equivalence=(--equivalence)
  within "$(cap torch-llama)" python3 "$root/bench/gpu/torch_llama.py" --reference "$plans/reference.json" \
    --manifest "$plans/llama-124m-params.json" --steps 10 --warmup 3 --tf32 on \
    "${equivalence[@]}" --variants manual,sdpa,manual-bf16,sdpa-bf16 \
    --json-dir "$out" 2>&1 | tee "$out/torch-llama.log" | grep -vE "^torch_llama: wrote "
  row torch-llama
fi

stage attention-forms
within "$(cap attention-forms)" "$run" "$plans/gpt2-124m-materialized.plan" --backend cuda --tf32 on --steps 10 \
  --log-every 5 --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|device memory|predicted by)"
for form in attn-base attn-fit; do
  [[ -f "$plans/$form.plan" ]] || { echo "check: $plans/$form.plan is missing"; continue; }
  echo "--- $form"
  within "$(cap attention-forms)" "$run" "$plans/$form.plan" --backend cuda --tf32 on --steps 10 --log-every 5 \
    --data "$plans/tokens.bin" 2>&1 | grep -E "summary: (10 steps|arena|device memory|predicted by)"
done

# Optional, last, and only when its whole limit is left: a compile that
# is stopped half-way measures nothing.
stage torch-compile
limit="${TORCH_COMPILE_LIMIT:-$(cap torch-compile)}"
if (( ! dry && $(left) < limit )); then
  echo "torch.compile: skipped ($(left) s left before the deadline, it needs up to $limit s)"
  rm -f "$out/torch-compile-bf16.json"
else
  echo "--- PyTorch GPT-2, torch.compile, autocast bf16, sdpa (within $limit s)"
  within "$limit" python3 "$root/bench/gpu/torch_baseline.py" --steps 20 \
    --warmup 3 --tf32 on --autocast bf16 --attention sdpa --compile \
    --json "$out/torch-compile-bf16.json" > "$out/torch-compile-bf16.log" 2>&1
  case $? in
    0) (( dry )) || { tail -3 "$out/torch-compile-bf16.log"; row torch-compile-bf16; } ;;
    124|137) echo "torch.compile: skipped (it did not compile and run within its limit, at most $limit s)"
         rm -f "$out/torch-compile-bf16.json" ;;
    125) rm -f "$out/torch-compile-bf16.json" ;;
    *) echo "torch.compile: skipped (it failed):"; tail -3 "$out/torch-compile-bf16.log"
       rm -f "$out/torch-compile-bf16.json" ;;
  esac
fi

if (( llama_present )); then
  limit="${LLAMA_COMPILE_LIMIT:-$(cap torch-compile)}"
  if (( ! dry && $(left) < limit )); then
    echo "torch.compile (Llama): skipped ($(left) s left before the deadline, it needs up to $limit s)"
  else
    echo "--- PyTorch Llama, torch.compile, autocast bf16, sdpa (within $limit s)"
    within "$limit" python3 "$root/bench/gpu/torch_llama.py" \
      --reference "$plans/reference.json" --manifest "$plans/llama-124m-params.json" \
      --steps 10 --warmup 3 --tf32 on --variants compile-bf16 --json-dir "$out" \
      > "$out/torch-llama-compile.log" 2>&1
    case $? in
      0) (( dry )) || { grep -E "^torch_llama: compile-bf16 \|" "$out/torch-llama-compile.log"
                        row torch-llama-compile-bf16; } ;;
      124|137) echo "torch.compile (Llama): skipped (it did not compile and run within $limit s)"
         rm -f "$out/torch-llama-compile-bf16.json" ;;
      125) rm -f "$out/torch-llama-compile-bf16.json" ;;
      *) echo "torch.compile (Llama): skipped (it failed):"; tail -3 "$out/torch-llama-compile.log"
         rm -f "$out/torch-llama-compile-bf16.json" ;;
    esac
  fi
fi

stamp "summary"
if (( dry )); then
  echo "dry run: would run: python3 $root/bench/gpu/summarize.py $plans/reference.json $out"
  stamp "done (dry run: prepared paths checked, nothing run on a GPU)"
  exit 0
fi
python3 "$root/bench/gpu/summarize.py" "$plans/reference.json" "$out"
status=$?
stamp "done"
exit $status

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
#   tiny-llama.plan, tiny-llama-bf16.plan  a Llama of 2 layers, dim 64, 4
#                   heads, 2 kv heads, ffn 172, byte vocabulary, seq 64,
#                   batch 8 (fp32; mixed precision)
#   llama-124m.plan, llama-124m-bf16.plan  a GPT-2-124M-sized Llama: 12
#                   layers, dim 768, 12 heads, 4 kv heads, ffn 2048, vocab
#                   32000, batch 4 x 1024 (124,668,672 parameters); fp32 and
#                   mixed precision (torch_llama.py trains the same shapes)
#   llama-tokens.bin  random token ids below 32000 (fixed seed)
#   llama-124m-params.json  the fsdp.param lines of llama-124m (name, shape,
#                   init, no_weight_decay), rope theta and RMSNorm epsilon,
#                   which torch_llama.py checks its model against
#   (and it checks bench/gpu/llama_forward_check.py: the pure-Python
#   forward of the Llama torch_llama.py writes, against the CPU backend)
#   reference.json  CPU losses: tiny for 30 steps on data/corpus.txt (fp32
#                   and, where the bf16 plan compiled and ran, bf16),
#                   gpt2-124m for 3 steps on tokens.bin; tiny-llama (fp32,
#                   bf16) for 30 steps on data/corpus.txt, llama-124m for 2
#                   steps on llama-tokens.bin; the model shapes and the
#                   Llama's parameter count as the plan reports it
# And, first, the runtime the GPU machine runs, built here so that the
# device's minutes go to measuring (docs/cuda.md, "Running the GPU check"):
#   bench/gpu/prebuilt/  (git-ignored; carry it with the plans)
#     bin/fsdp-run, lib/libfsdp-backend-cuda.so, bin/fsdp-cuda-kernels-test
#                   from `cmake -S runtime` (Release, CUDA architectures
#                   $PREBUILT_ARCHS, "80;90" by default; MPI off, so the
#                   binaries need no libmpi; no CUDA emulator module; the
#                   CPU BLAS is dlopen()ed at run time and nlohmann-json is
#                   header-only, so neither is a dependency), not stripped
#                   (17 MB in all)
#     manifest.txt  the commit, the hash of runtime/'s sources
#                   (runtime-hash.sh), nvcc's version, the architectures,
#                   each file's size, SHA-256 and NEEDED sonames, the
#                   newest GLIBC/GLIBCXX/CXXABI versions they need
#   check.sh uses them when they match its sources and load there, and
#   builds on the device otherwise. Without a CUDA toolkit here prepare.sh
#   warns and leaves bench/gpu/prebuilt out.
# Usage: bench/gpu/prepare.sh [OUT_DIR]   (default bench/gpu/plans, which
# git ignores; carry it to the GPU machine). Takes a few minutes (three
# gpt2-124m steps and two llama-124m steps on the CPU). A compiler or CPU
# backend that cannot build or run the Llama leaves its files out with a
# warning; check.sh then skips the Llama rows with a line saying so.
# Environment: PREBUILT_DIR (default bench/gpu/prebuilt), PREBUILT_BUILD_DIR
# (the runtime-only build folder, default build-prebuilt, git-ignored),
# PREBUILT_ARCHS ("80;90"), PREBUILT_ONLY=1 (the prebuilt runtime alone:
# no compiler build, no plans; about a minute), PREBUILT=0 (no prebuilt).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/bench/gpu/plans}"
build="${BUILD_DIR:-$root/build}"
prebuilt="${PREBUILT_DIR:-$root/bench/gpu/prebuilt}"
prebuilt_build="${PREBUILT_BUILD_DIR:-$root/build-prebuilt}"
prebuilt_archs="${PREBUILT_ARCHS:-80;90}"

# The runtime-only build for the GPU machine (see the header). Its own
# build folder, then only what check.sh runs, copied with a manifest.
build_prebuilt() {
  local nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
  command -v "$nvcc" > /dev/null 2>&1 || nvcc=$(command -v nvcc) || {
    echo "prepare: warning: no nvcc here: no $prebuilt (check.sh builds the runtime on the device)" >&2
    return 1
  }
  local t0=$SECONDS
  mkdir -p "$prebuilt_build"
  CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}" \
  cmake -G Ninja -S "$root/runtime" -B "$prebuilt_build" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="$prebuilt_archs" \
    -DFSDP_ENABLE_CUDA=ON -DFSDP_ENABLE_MPI=OFF -DFSDP_BUILD_CUDA_EMULATOR=OFF \
    > "$prebuilt_build/prepare-configure.log" 2>&1 \
    || { tail -20 "$prebuilt_build/prepare-configure.log" >&2; return 1; }
  grep -q "fsdp runtime: CUDA backend enabled" "$prebuilt_build/prepare-configure.log" || {
    grep "fsdp runtime" "$prebuilt_build/prepare-configure.log" >&2
    echo "prepare: warning: the runtime-only build has no CUDA backend: no $prebuilt" >&2
    return 1
  }
  CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}" \
  cmake --build "$prebuilt_build" -j "${PREBUILT_JOBS:-2}" \
    --target fsdp-run fsdp-cuda-kernels-test > "$prebuilt_build/prepare-build.log" 2>&1 \
    || { tail -30 "$prebuilt_build/prepare-build.log" >&2; return 1; }
  rm -rf "$prebuilt"
  mkdir -p "$prebuilt/bin" "$prebuilt/lib"
  local files=(bin/fsdp-run lib/libfsdp-backend-cuda.so bin/fsdp-cuda-kernels-test)
  local f
  for f in "${files[@]}"; do
    cp "$prebuilt_build/$f" "$prebuilt/$f" || return 1
  done
  {
    echo "# bench/gpu/prebuilt: the runtime for bench/gpu/check.sh, built by"
    echo "# bench/gpu/prepare.sh on a machine without a GPU (never run on one here)."
    echo "commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(
      [[ -n "$(git -C "$root" status --porcelain -- runtime 2>/dev/null)" ]] && echo " (runtime/ modified)")"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(( SECONDS - t0 )) s"
    echo "source_hash=$("$root/bench/gpu/runtime-hash.sh" "$root")"
    echo "cuda=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p')"
    echo "nvcc=$("$nvcc" --version | grep -m1 release)"
    echo "cuda_architectures=$prebuilt_archs"
    echo "cxx=$(grep -m1 'CMAKE_CXX_COMPILER:' "$prebuilt_build/CMakeCache.txt" | cut -d= -f2) ($(c++ --version | head -1))"
    echo "cmake_options=-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=$prebuilt_archs -DFSDP_ENABLE_CUDA=ON -DFSDP_ENABLE_MPI=OFF -DFSDP_BUILD_CUDA_EMULATOR=OFF"
    grep -E "fsdp runtime:" "$prebuilt_build/prepare-configure.log" | sed 's/^-- /configure: /'
    echo "needed=$(for f in "${files[@]}"; do readelf -d "$prebuilt/$f"; done \
      | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')"
    local family
    for family in GLIBC GLIBCXX CXXABI; do
      echo "needs_$family=$(for f in "${files[@]}"; do readelf -V "$prebuilt/$f"; done \
        | grep -oE "Name: ${family}_[0-9.]+" | sed 's/Name: //' | sort -uV | tail -1)"
    done
    for f in "${files[@]}"; do
      echo "file=$f size=$(stat -c %s "$prebuilt/$f") sha256=$(sha256sum "$prebuilt/$f" | cut -d' ' -f1) needed=$(
        readelf -d "$prebuilt/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ',' | sed 's/,$//')"
    done
    echo "total_bytes=$(du -cb "${files[@]/#/$prebuilt/}" | tail -1 | cut -f1)"
  } > "$prebuilt/manifest.txt"
  echo "prepare: runtime for the GPU machine in $prebuilt ($(du -sh "$prebuilt" | cut -f1), built in $(( SECONDS - t0 )) s)"
}
if [[ "${PREBUILT:-1}" != 0 ]]; then
  build_prebuilt || { rm -rf "$prebuilt"
    echo "prepare: warning: no prebuilt runtime: check.sh will build it on the device" >&2; }
fi
[[ "${PREBUILT_ONLY:-0}" == 1 ]] && exit 0

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
# The Llama: a tiny one for the GPU's losses against the CPU's, and one of
# GPT-2 124M's size for the timing against PyTorch (torch_llama.py).
tiny_llama=(llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn-dim 172
            --vocab 256 --seq 64 --batch 8)
llama_124m=(llama --layers 12 --dim 768 --heads 12 --kv-heads 4 --ffn-dim 2048
            --vocab 32000 --seq 1024 --batch 4)
rm -f "$out"/tiny-llama*.plan "$out"/llama-124m*.plan "$out"/tiny-llama*-cpu.json \
  "$out/llama-124m-cpu.json" "$out/llama-124m-params.json" \
  "$out/llama-124m-describe.txt" "$out/llama-tokens.bin"
llama_ok=1
"$bin/fsdp-gen" "${llama_124m[@]}" > "$out/llama-124m.mlir" \
  && "$bin/fsdp-opt" "$out/llama-124m.mlir" --fsdp-train-pipeline \
       -o "$out/llama-124m.plan" \
  && "$bin/fsdp-gen" "${tiny_llama[@]}" \
     | "$bin/fsdp-opt" --fsdp-train-pipeline="lr=1e-3" -o "$out/tiny-llama.plan" \
  && "$bin/fsdp-run" "$out/llama-124m.plan" --describe \
       > "$out/llama-124m-describe.txt" \
  || llama_ok=0
if (( llama_ok )); then
  # The Llama that torch_llama.py writes down, forward in pure Python,
  # against the CPU backend on a micro Llama: a mismatch stops here,
  # before any device time is spent on a baseline that is not ours.
  python3 "$root/bench/gpu/llama_forward_check.py" "$bin" "$root/data/corpus.txt"
  python3 - "$out/llama-124m.mlir" "$out/llama-124m-params.json" \
    "${llama_124m[@]}" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
# fsdp-gen's options as the model's shape: --kv-heads 4 -> kv_heads: 4.
flags = sys.argv[4:]
shape = {flags[i][2:].replace("-", "_"): int(flags[i + 1])
         for i in range(0, len(flags), 2)}
param = re.compile(r"fsdp\.param @([\w.]+) : tensor<([0-9x]+)x(\w+)> "
                   r"init <(\w+)(?:, std = ([^>]+))?>( no_weight_decay)?")
params = []
for name, dims, dtype, kind, std, nwd in param.findall(text):
    init = "normal(%g)" % float(std) if kind == "normal" else kind
    params.append([name, [int(d) for d in dims.split("x")], init, bool(nwd)])
def attr(op, key, default):
    values = {float(v) for v in re.findall(
        r"fsdp\.%s [^{\n]*\{[^}]*%s = ([-+.0-9eE]+)" % (op, key), text)}
    if len(values) > 1:
        sys.exit("prepare: the %s ops disagree on %s: %s" % (op, key, values))
    return values.pop() if values else default
json.dump({"source": "fsdp-gen " + " ".join(sys.argv[3:]),
           "shape": shape,
           "params": params,
           # fsdp.rope's and fsdp.rms_norm's defaults when not printed
           # (include/fsdp/Dialect/FSDP/IR/FSDPOps.td).
           "rope_theta": attr("rope", "theta", 10000.0),
           "norm_eps": attr("rms_norm", "epsilon", 1e-6)},
          open(sys.argv[2], "w"), indent=1)
PY
  python3 - "$out/llama-tokens.bin" <<'PY'
import random, struct, sys
rng = random.Random(1234)
count = 200_000
header = struct.pack("<256i", 20240520, 1, count, *([0] * 253))
tokens = struct.pack(f"<{count}H", *(rng.randrange(32000) for _ in range(count)))
open(sys.argv[1], "wb").write(header + tokens)
PY
  "$bin/fsdp-run" "$out/tiny-llama.plan" --steps 30 --log-every 100 \
    --data "$root/data/corpus.txt" --report-json "$out/tiny-llama-cpu.json" \
    > /dev/null
  "$bin/fsdp-run" "$out/llama-124m.plan" --steps 2 --data "$out/llama-tokens.bin" \
    --report-json "$out/llama-124m-cpu.json" > /dev/null
  if "$bin/fsdp-opt" "$out/llama-124m.mlir" --fsdp-train-pipeline="$mixed" \
       -o "$out/llama-124m-bf16.plan" \
     && "$bin/fsdp-gen" "${tiny_llama[@]}" \
       | "$bin/fsdp-opt" --fsdp-train-pipeline="lr=1e-3 $mixed" \
         -o "$out/tiny-llama-bf16.plan"; then
    "$bin/fsdp-run" "$out/tiny-llama-bf16.plan" --steps 30 --log-every 100 \
      --data "$root/data/corpus.txt" --report-json "$out/tiny-llama-bf16-cpu.json" \
      > /dev/null \
      || echo "prepare: warning: the CPU backend could not train tiny-llama-bf16.plan: no bf16 reference" >&2
  else
    rm -f "$out/llama-124m-bf16.plan" "$out/tiny-llama-bf16.plan"
    echo "prepare: warning: fsdp-opt did not compile the bf16 Llama plans: check.sh skips them" >&2
  fi
else
  rm -f "$out"/tiny-llama*.plan "$out"/llama-124m*.plan "$out/llama-124m-describe.txt"
  echo "prepare: warning: fsdp-gen/fsdp-opt did not build the Llama plans: check.sh skips the Llama rows" >&2
fi
rm -f "$out/llama-124m.mlir"
python3 - "$out" "${tiny_llama[@]}" <<'PY'
import json, os, re, sys
out = sys.argv[1]
# The tiny Llama's fsdp-gen options as its shape: --kv-heads 2 -> kv_heads.
flags = sys.argv[3:]
tiny_llama_shape = {flags[i][2:].replace("-", "_"): int(flags[i + 1])
                    for i in range(0, len(flags), 2)}
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
for name in ("tiny-llama", "tiny-llama-bf16", "llama-124m"):
    path = os.path.join(out, name + "-cpu.json")
    if os.path.exists(path):
        ref[name] = json.load(open(path))
if "tiny-llama" in ref:
    # What torch_llama.py --equivalence needs to train the same tiny Llama
    # from the same initial values on the same batches: the plan's lr
    # (fsdp-train-pipeline lr=1e-3), fsdp-run's default --seed, the data
    # file (relative to the repository root), fsdp-gen llama's defaults.
    ref["tiny-llama-shape"] = dict(tiny_llama_shape, lr=1e-3, seed=1,
                                   data="data/corpus.txt", rope_theta=10000.0,
                                   norm_eps=1e-6)
describe = os.path.join(out, "llama-124m-describe.txt")
if os.path.exists(describe):
    # fsdp-run --describe: "N parameters (E elements)", E the plan's count.
    m = re.search(r"(\d+) parameters \((\d+) elements\)", open(describe).read())
    if not m:
        sys.exit("prepare: no parameter count in " + describe)
    manifest = json.load(open(os.path.join(out, "llama-124m-params.json")))
    ref["llama-124m-shape"] = dict(manifest["shape"],
                                   rope_theta=manifest["rope_theta"],
                                   norm_eps=manifest["norm_eps"],
                                   param_tensors=int(m.group(1)),
                                   params=int(m.group(2)))
json.dump(ref, open(os.path.join(out, "reference.json"), "w"), indent=1)
PY
echo "prepare: plans and CPU reference losses in $out"
ls -l "$out"
if [[ -f "$prebuilt/manifest.txt" ]]; then
  echo "prepare: carried to the GPU machine: $(du -shc "$out" "$prebuilt" | tail -1 | cut -f1) ($out and $prebuilt; the device tool carries 64 MiB at most)"
fi

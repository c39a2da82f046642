#!/usr/bin/env bash
# Proves that runtime/ builds on its own, with no LLVM or MLIR anywhere, and
# with neither CUDA nor MPI nor nlohmann-json (the smallest runtime: CPU
# backend, one rank, no safetensors; what a GPU machine without the JSON
# package builds):
# configures and builds it alone (CMake + a C++ compiler + its backends'
# libraries), then checks that no compile command names an LLVM/MLIR include
# path and that fsdp-run links neither libLLVM nor libMLIR, and runs it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/runtime-standalone}"
# ccache hits across checkouts (a CI clone, a worktree), as in build.sh:
# without it every fresh clone compiled the runtime from scratch (2 min).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}"

cmake -G Ninja -S "$root/runtime" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DFSDP_ENABLE_CUDA=OFF -DFSDP_ENABLE_MPI=OFF -DFSDP_ENABLE_JSON=OFF \
  > "$build.configure.log"
# Every target but the emulated CUDA kernels' test: it needs neither MPI nor
# JSON, so it compiles here as in the main build, which builds and runs it
# (the cuda-emulation CTest), and it was 40% of this build's time. The
# emulated backend module stays: its NCCL compiles without MPI only here.
leaves() { # ninja's phony "DIR/all" targets, expanded
  ninja -C "$build" -t query "$1" |
    awk '/^  input:/ { inputs = 1; next } /^  outputs:/ { inputs = 0 }
         inputs { print $1 }' |
    while read -r target; do
      case "$target" in
        all | */all) leaves "$target" ;;
        *) echo "$target" ;;
      esac
    done
}
targets="$(leaves all | grep -v -x 'bin/fsdp-cuda-emulation-test')"
# shellcheck disable=SC2086 # one target a word
ninja -C "$build" $targets > "$build.build.log"
if grep -q -E 'llvm|mlir' "$build/compile_commands.json"; then
  echo "runtime-standalone: a compile command mentions LLVM or MLIR" >&2
  exit 1
fi
if ldd "$build/bin/fsdp-run" | grep -q -E 'libLLVM|libMLIR'; then
  echo "runtime-standalone: fsdp-run links LLVM or MLIR" >&2
  exit 1
fi
"$build/bin/fsdp-run" --help > /dev/null
# Without nlohmann-json the weights and checkpoint options fail with the
# reason, not the build.
for option in --init-from --export --checkpoint-dir --resume; do
  if "$build/bin/fsdp-run" none.plan "$option" w.safetensors \
      > "$build.weights.log" 2>&1 ||
    ! grep -q "built without nlohmann-json" "$build.weights.log"; then
    echo "runtime-standalone: fsdp-run $option without nlohmann-json:" >&2
    cat "$build.weights.log" >&2
    exit 1
  fi
done
echo "runtime-standalone: built alone, no LLVM or MLIR"

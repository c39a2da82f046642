#!/usr/bin/env bash
# Installs every package that fsdp-mlir's build, tests and demo need
# (GCC's sanitizer runtimes for scripts/build-sanitize.sh included).
# Non-interactive and idempotent: packages already present are skipped, so a
# second run costs one dpkg query.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache git python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libopenmpi-dev openmpi-bin libopenblas-dev libopenblas0-openmp libblis-dev
  libdnnl-dev
  libasan8 libubsan1 valgrind nlohmann-json3-dev python3-numpy
  librsvg2-bin python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"

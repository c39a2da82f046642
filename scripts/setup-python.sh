#!/usr/bin/env bash
# Installs the Python packages the tests compare against (torch on the CPU,
# transformers, safetensors, tokenizers, numpy: scripts/python-requirements.txt)
# from PyPI into the project's virtual environment, and prints its python.
#
# The environment lives outside the checkout, in
# ${FSDP_VENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/fsdp-mlir}/venv-<hash of the
# requirements>, so that every clone and worktree on a machine shares it and a
# second run costs nothing; <checkout>/.venv links to it (lit.cfg.py finds
# the python there). Non-interactive and idempotent: an environment counts only
# once its stamp is written, after every package installed, so an interrupted
# run is redone from scratch, never half-used. Concurrent runs wait on a lock.
# A fresh install downloads about 3 GB and takes 2 to 3 minutes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/scripts/python-requirements.txt"
cache="${FSDP_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fsdp-mlir}"
hash="$(sha256sum "$requirements" | cut -c1-12)"
venv="$cache/venv-$hash"
stamp="$venv/.fsdp-complete"
base_python="${FSDP_BASE_PYTHON:-python3}"

mkdir -p "$cache"
exec 9>"$cache/venv.lock"
flock 9

if [ ! -f "$stamp" ]; then
  start=$(date +%s)
  echo "setup-python: installing $(grep -cv '^#' "$requirements") packages" \
       "from PyPI into $venv" >&2
  rm -rf "$venv"
  "$base_python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-cache-dir --no-input -r "$requirements" >&2
  # The packages must import, not only be present (a torch without its
  # libraries fails here, not in the middle of the tests).
  "$venv/bin/python" -c "import torch, transformers, safetensors, tokenizers, numpy" >&2
  echo "$hash" > "$stamp"
  # Environments of older requirements are 5 GB each: keep only this one.
  find "$cache" -maxdepth 1 -name 'venv-*' ! -name "venv-$hash" \
    -exec rm -rf {} + 2>/dev/null || true
  echo "setup-python: done in $(( $(date +%s) - start )) s" >&2
fi
ln -sfn "$venv" "$root/.venv"
echo "$venv/bin/python"

#!/usr/bin/env python3
"""Budget fits of published MoE sizes with and without expert parallelism.

For Mixtral 8x7B and Qwen3-30B-A3B on 8, 16 and 64 GPUs of 80 GB (one
sequence of 4096 tokens a rank, h100-nvlink's one-level network, the CUDA
runtime's memory outside the arena), runs the training pipeline's budget
search three ways: at expert=1 (every expert FSDP-sharded over all ranks:
the baseline), with expert=auto (the search picks the expert degree, the
dropless bound), and with expert=auto moe-capacity-factor=1.25 (a step
past the capacity stops). Prints each fit's peak per rank and simulated
step, the chosen degree, or the smallest peak when nothing fits
(docs/moe.md's table).

Usage: bench/moe/budget.py [--build build]
"""
import argparse
import os
import re
import subprocess
import tempfile

MODELS = [("mixtral-8x7b", "Mixtral 8x7B"), ("qwen3-30b-a3b", "Qwen3-30B-A3B")]
GPUS = [8, 16, 64]
FIT = re.compile(r"peak ([0-9.]+) GB .*simulated step ([0-9.]+) ms")
MESH = re.compile(r"mesh: replicate=[0-9]+ shard=[0-9]+(?: expert=([0-9]+))?")
REFUSED = re.compile(r"smallest peak reachable is ([0-9]+) bytes")
SMALLEST = re.compile(r"smallest peak reachable \(.*?\) is ([0-9]+) bytes")


def fit(opt, model, n, extra):
    out = subprocess.run(
        [opt, model, "--fsdp-train-pipeline=world-size=%d memory-budget=80GB "
         "runtime=cuda %s" % (n, extra), "-o", os.devnull],
        capture_output=True, text=True).stderr
    found = FIT.search(out)
    if not found:
        small = REFUSED.search(out) or SMALLEST.search(out)
        return "refused (%.1f GB)" % (int(small.group(1)) / 1e9) if small \
            else "refused"
    mesh = MESH.search(out)
    ep = int(mesh.group(1)) if mesh and mesh.group(1) else 1
    prefix = "EP %d: " % ep if "expert=auto" in extra else ""
    return "%s%s GB, %s ms" % (prefix, found.group(1), found.group(2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    print("| model | GPUs | EP = 1 | expert=auto, dropless bound | "
          "expert=auto, capacity 1.25 |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for preset, name in MODELS:
            for n in GPUS:
                model = os.path.join(work, "model.mlir")
                subprocess.run([gen, "--preset", preset, "--seq", "4096",
                                "--batch", str(n), "-o", model], check=True)
                cells = [fit(opt, model, n, extra) for extra in (
                    "expert=1", "expert=auto",
                    "expert=auto moe-capacity-factor=1.25")]
                print("| %s | %d | %s |" % (name, n, " | ".join(cells)),
                      flush=True)


if __name__ == "__main__":
    main()

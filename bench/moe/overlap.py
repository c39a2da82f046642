#!/usr/bin/env python3
"""Simulated overlap of expert parallelism's all-to-alls.

For published MoE sizes at 16 and 64 GPUs of 80 GB (one sequence of 4096
tokens a rank, h100-nvlink), runs the budget search with expert=auto twice:
with the row all-to-alls started on their stream and the regions around
them split (overlap-all-to-all=true, the default), and with them in place
on the compute stream (the baseline, overlap-all-to-all=false). Each row
gives the search's choice and simulated step for both, then the same
sharded step at the overlapped run's expert degree (or the case's own
where that is 1 or the search refuses) under one fixed schedule (forward
and backward prefetch 1, no recomputation, no budget), so that the
overlap alone differs: the all-to-alls' busy time on their stream and
how much of it the overlap hid from the step. DeepSeek-V3's size (its
MoE over grouped-query attention, fsdp-gen's deepseek-v3-style) fits 80
GB at no mesh of 256 ranks, so its row is the fixed schedule alone: the
one model here with a shared expert beside its routed ones.

Usage: bench/moe/overlap.py [--build build] [--models mixtral-8x7b,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# (preset, GPUs, the fixed schedule's expert degree when the search's is 1
# or it refuses)
CASES = [("mixtral-8x7b", 16, 2), ("mixtral-8x7b", 64, 2),
         ("qwen3-30b-a3b", 16, 2), ("qwen3-30b-a3b", 64, 2),
         ("deepseek-v3-style", 256, 8)]
FIT = re.compile(r"simulated step ([0-9.]+) ms")
MESH = re.compile(r"expert=([0-9]+) ([0-9.]+) ms")
STEP = re.compile(r"step ([0-9.]+) ms, compute ([0-9.]+) ms, exposed "
                  r"communication ([0-9.]+) ms")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          **kw)


def search(opt, model, n, overlap):
    """The budget search's simulated step and chosen expert degree."""
    out = subprocess.run(
        [opt, model, "--fsdp-train-pipeline=world-size=%d memory-budget=80GB "
         "runtime=cuda expert=auto overlap-all-to-all=%s" % (n, overlap),
         "-o", os.devnull], capture_output=True, text=True)
    step = FIT.search(out.stderr)  # none: no mesh fits (the search says)
    if not step:
        return None, None
    chosen = re.search(
        r"mesh: replicate=[0-9]+ shard=[0-9]+(?: expert=([0-9]+))?",
        out.stderr)
    g = int(chosen.group(1)) if chosen and chosen.group(1) else 1
    return float(step.group(1)), g


def fixed(opt, model, n, g, work):
    """One fixed schedule, overlap on and off: steps and the a2a lane."""
    sharded = os.path.join(work, "sharded.mlir")
    mesh = "shard=%d" % n + (" expert=%d" % g if g > 1 else "")
    passes = ["--fsdp-mesh=" + mesh, "--fsdp-wrap", "--fsdp-data-parallel"]
    if g > 1:
        passes.append("--fsdp-expert-parallel")
    run([opt, model] + passes + ["--fsdp-autodiff", "--fsdp-shard", "-o",
                                 sharded])
    result = {}
    for overlap in ("true", "false"):
        trace = os.path.join(work, "trace.%s.json" % overlap)
        out = run([opt, sharded, "--fsdp-schedule=forward-prefetch=1 "
                   "backward-prefetch=1 overlap-all-to-all=" + overlap,
                   "--fsdp-simulate=hardware=h100-nvlink trace=" + trace,
                   "-o", os.devnull])
        step, compute, exposed = map(float, STEP.search(out.stderr).groups())
        events = json.load(open(trace))["traceEvents"]
        a2a = sum(e["dur"] for e in events if e["ph"] == "X" and
                  e["name"].startswith("all_to_all")) / 1000.0
        result[overlap] = (step, exposed, a2a)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--models", default="")
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    wanted = set(filter(None, args.models.split(",")))
    print("| model | GPUs | search, in place | search, overlapped | fixed "
          "schedule at that EP: in place | overlapped | all-to-all busy "
          "| hidden |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for preset, n, fallback in CASES:
            if wanted and preset not in wanted:
                continue
            model = os.path.join(work, "model.mlir")
            run([gen, "--preset", preset, "--seq", "4096", "--batch", str(n),
                 "-o", model])
            base, g0 = search(opt, model, n, "false")
            over, g1 = search(opt, model, n, "true")
            g = g1 if over is not None and g1 > 1 else fallback
            f = fixed(opt, model, n, g, work)
            inplace, overlapped = f["false"], f["true"]
            busy = overlapped[2]
            hidden = inplace[0] - overlapped[0]
            chosen = lambda g, step: (  # noqa: E731
                "refused" if step is None else "EP %d: %.1f ms" % (g, step))
            print("| %s | %d | %s | %s | EP %d: %.1f ms | %.1f ms | %.1f ms "
                  "| %.1f ms (%.0f%%) |" % (
                      preset, n, chosen(g0, base), chosen(g1, over), g,
                      inplace[0], overlapped[0], busy, hidden,
                      100.0 * hidden / busy if busy else 0.0))
            sys.stdout.flush()


if __name__ == "__main__":
    main()

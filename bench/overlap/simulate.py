#!/usr/bin/env python3
"""Simulated overlap: step time and exposed communication per schedule.

For gpt2-124m and llama-13b-shape at N = 8, 64, 512 ranks, on both hardware
presets of --fsdp-simulate (H100 NVLink 370 GB/s bus; 400 Gb/s InfiniBand,
47 GB/s per GPU), compares three schedules of the same sharded step:
no prefetch; a PyTorch-FSDP-like default (backward prefetch 1, no forward
prefetch, 2 gathers in flight); and the best our options give (searched
over forward and backward prefetch, the in-flight limit, and resharding
after the forward or not; "best (f,b,K,R)" names it, R = T reshards). The per-rank
batch is chosen large enough for communication to hide (3 x P x 4 bytes x
(N-1)/N of traffic against 6 x P x tokens of compute): 32 x 1024 tokens for
gpt2-124m (and 64 x 1024, to show where its fixed exposed time stops
mattering), 16 x 2048 for llama-13b-shape.

Each row also simulates the mixed-precision step (--fsdp-mixed-precision,
applied to the same sharded module just before --fsdp-schedule): bf16
gathers, compute and gradients over f32 master shards, with the full-size
gradients cast to f32 before their reduce-scatters ("bf16", FSDP2's
default reduce_dtype) or reduced in bf16 ("bf16+bf16 reduce"). These run
under the best f32 schedule found, not a schedule searched for bf16 (which
would triple the runtime); they are an upper bound on the bf16 step under
our options. "comm GB" is what one rank sends per step over all its
all-gathers and reduce-scatters (full flat tensor bytes x (N-1)/N, as the
ring collectives the simulator models move), counted from the scheduled IR
of f32 best, bf16 and bf16+bf16 reduce.

Usage: bench/overlap/simulate.py [--build build]
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile

# (model, sequences per rank, sequence length)
MODELS = [("gpt2-124m", 32, 1024), ("gpt2-124m", 64, 1024),
          ("llama-13b-shape", 16, 2048)]
HARDWARE = ("h100-nvlink", "ib-400g")
# forward prefetch, backward prefetch, in-flight limit, reshard after forward
DEFAULT = (0, 1, 2, True)
NONE = (0, 0, 0, True)
SEARCH = list(itertools.product((0, 1, 2), (1, 2), (0, 2, 4), (True, False)))


BF16 = "param-dtype=bf16 reduce-dtype=f32"
BF16_REDUCE = "param-dtype=bf16 reduce-dtype=bf16"
ELEMENT_BYTES = {"f32": 4, "bf16": 2}
COLLECTIVE = re.compile(r"fsdp\.(?:all_gather|reduce_scatter)(?:_start)?\b"
                        r"[^:]*: tensor<([0-9x]+)x(f32|bf16)>")


def collective_bytes(ir, n):
    """Bytes one rank sends per step over its gathers and reduce-scatters."""
    total = 0
    for shape, dtype in COLLECTIVE.findall(ir):
        elements = 1
        for d in shape.split("x"):
            elements *= int(d)
        total += elements * ELEMENT_BYTES[dtype]
    return total * (n - 1) / n


def simulate(opt, sharded, hw, schedule, precision=None, n=None):
    """Simulates one schedule; with n, also counts the collectives' bytes."""
    f, b, k, r = schedule
    mixed = [f"--fsdp-mixed-precision={precision}"] if precision else []
    proc = subprocess.run(
        [opt, sharded] + mixed + [
         f"--fsdp-schedule=forward-prefetch={f} backward-prefetch={b} "
         f"max-inflight-gathers={k} "
         f"reshard-after-forward={'true' if r else 'false'}",
         f"--fsdp-simulate=hardware={hw}", "-o", "-" if n else os.devnull],
        check=True, capture_output=True, text=True)
    err = proc.stderr
    m = re.search(r"step ([0-9.]+) ms, compute ([0-9.]+) ms, exposed "
                  r"communication ([0-9.]+) ms \(([0-9.]+)%\), peak "
                  r"([0-9.]+) GB", err)
    return dict(step=float(m.group(1)), exposed=float(m.group(3)),
                share=float(m.group(4)), peak=float(m.group(5)),
                comm=collective_bytes(proc.stdout, n) / 1e9 if n else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--build", default=os.path.join(root, "build"))
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    cols = ("model", "tokens/rank", "N", "hardware", "none: step ms", "exposed %",
            "default: step", "exposed %", "best: step", "exposed %",
            "best (f,b,K,R)", "peak GB", "bf16: step ms", "exposed %",
            "bf16+bf16 reduce: step", "exposed %", "bf16 peak GB",
            "f32 comm GB", "bf16 comm GB", "bf16+bf16 comm GB")
    print(" | ".join(f"{c:>15}" for c in cols))
    with tempfile.TemporaryDirectory() as tmp:
        for model, seqs, seq in MODELS:
            for n in (8, 64, 512):
                sharded = os.path.join(tmp, f"{model}-{seqs}-{n}.mlir")
                ir = subprocess.run([gen, "--preset", model, "--batch",
                                     str(seqs * n), "--seq", str(seq)],
                                    check=True, capture_output=True,
                                    text=True).stdout
                subprocess.run(
                    [opt, f"--fsdp-mesh=shard={n}", "--fsdp-wrap",
                     "--fsdp-data-parallel", "--fsdp-autodiff", "--fsdp-shard",
                     "-o", sharded], input=ir, check=True, text=True)
                for hw in HARDWARE:
                    none = simulate(opt, sharded, hw, NONE)
                    default = simulate(opt, sharded, hw, DEFAULT)
                    results = {s: simulate(opt, sharded, hw, s)
                               for s in SEARCH}
                    best_s = min(results, key=lambda s: results[s]["step"])
                    best = simulate(opt, sharded, hw, best_s, n=n)
                    bf16 = simulate(opt, sharded, hw, best_s, BF16, n)
                    bf16r = simulate(opt, sharded, hw, best_s, BF16_REDUCE, n)
                    cells = (model, f"{seqs}x{seq}", n, hw, f"{none['step']:.1f}",
                             f"{none['share']:.1f}", f"{default['step']:.1f}",
                             f"{default['share']:.1f}", f"{best['step']:.1f}",
                             f"{best['share']:.1f}", f"({best_s[0]},{best_s[1]},{best_s[2]},{'T' if best_s[3] else 'F'})",
                             f"{best['peak']:.1f}", f"{bf16['step']:.1f}",
                             f"{bf16['share']:.1f}", f"{bf16r['step']:.1f}",
                             f"{bf16r['share']:.1f}", f"{bf16['peak']:.1f}",
                             f"{best['comm']:.2f}", f"{bf16['comm']:.2f}",
                             f"{bf16r['comm']:.2f}")
                    print(" | ".join(f"{c:>15}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Hybrid sharding at scale, simulated: FSDP against HSDP and the meshes between.

LLaMA-13B (fsdp-gen --preset llama-13b: 40 blocks, embed and head units),
one sequence of 2048 tokens per rank, f32, prefetch 1 both ways, on 2, 8
and 64 nodes of 8 GPUs (16, 64, 512 ranks) on --fsdp-simulate's two-level
network (ranks-per-node=8: NVLink 370 GB/s inside a node, 8 x 47 GB/s
NICs a node). For every mesh RxS with R*S = N and S dividing 8 or a
multiple of 8 it compiles the step, runs --fsdp-memory-report (after the
schedule: its peak counts the prefetched gathers) and --fsdp-simulate on
it; it prints FSDP's, HSDP's and the mixed choice's rows; the baseline (FSDP, 1xN) is
measured in the same run as the others. "mixed" is the fastest mesh that
is neither 1xN nor (N/8)x8. Each network is run with both NIC shares
(group, the default; rank, the pessimistic bound: docs/overlap.md).

Usage: bench/hsdp/run.py [--build build] [--nodes 2,8,64] [--shares group,rank]
"""
import argparse
import os
import re
import subprocess
import sys

RANKS_PER_NODE = 8
SEQ = 2048
STEP = re.compile(r"step ([0-9.]+) ms, compute ([0-9.]+) ms, exposed "
                  r"communication ([0-9.]+) ms")
ACROSS = re.compile(r"([0-9]+) across nodes \(([0-9.]+) ms\)")
STEADY = re.compile(r"steady state\s+([0-9]+) bytes")
# The per-rank peak (the first "peak" line; the second is the total).
PEAK = re.compile(r"^  peak\s+([0-9]+) bytes", re.M)


def meshes(n):
    """(R, S) with R*S = n, S dividing the node or a multiple of it."""
    out = []
    for s in range(1, n + 1):
        if n % s == 0 and (RANKS_PER_NODE % s == 0 or s % RANKS_PER_NODE == 0):
            out.append((n // s, s))
    return out


def commands(build, r, s, share):
    n = r * s
    gen = [os.path.join(build, "bin", "fsdp-gen"), "--preset", "llama-13b",
           "--seq", str(SEQ), "--batch", str(n)]
    opt = [os.path.join(build, "bin", "fsdp-opt"),
           f"--fsdp-mesh=replicate={r} shard={s}", "--fsdp-wrap=policy=given",
           "--fsdp-data-parallel", "--fsdp-autodiff", "--fsdp-shard",
           "--fsdp-schedule=forward-prefetch=1 backward-prefetch=1",
           "--fsdp-memory-report",
           f"--fsdp-simulate=ranks-per-node={RANKS_PER_NODE} nic-share={share}",
           "-o", os.devnull]
    return gen, opt


def run(build, r, s, share):
    gen, opt = commands(build, r, s, share)
    model = subprocess.run(gen, check=True, capture_output=True).stdout
    out = subprocess.run(opt, input=model, capture_output=True)
    err = out.stderr.decode()
    if out.returncode != 0:
        sys.exit(f"{' '.join(opt)} failed:\n{err}")
    step, compute, exposed = map(float, STEP.search(err).groups())
    across = ACROSS.search(err)
    return {"step": step, "compute": compute, "exposed": exposed,
            "across": int(across.group(1)), "across_ms": float(across.group(2)),
            "steady": int(STEADY.search(err).group(1)) / 1e9,
            "peak": int(PEAK.search(err).group(1)) / 1e9}


def row(nodes, share, kind, r, s, m, base):
    speed = base["step"] / m["step"]
    print(f"| {nodes} | {r * s} | {share} | {kind} | {r}x{s} | "
          f"{m['step']:.3f} | {m['exposed']:.3f} | "
          f"{m['across']} ({m['across_ms']:.3f}) | {m['steady']:.3f} | "
          f"{m['peak']:.3f} | {speed:.2f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--nodes", default="2,8,64")
    ap.add_argument("--shares", default="group,rank")
    args = ap.parse_args()
    gen, opt = commands(args.build, 1, 16, "group")
    print("# " + " ".join(gen) + " | " +
          " ".join(a if " " not in a else f'"{a}"' for a in opt))
    print("# (mesh, batch = N and nic-share per row)")
    print("| nodes | ranks | nic-share | mesh kind | mesh RxS | step ms | "
          "exposed ms | across nodes: collectives (busy ms) | steady GB | "
          "peak GB | speed-up vs FSDP |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for share in args.shares.split(","):
        for nodes in map(int, args.nodes.split(",")):
            n = nodes * RANKS_PER_NODE
            results = {m: run(args.build, *m, share) for m in meshes(n)}
            fsdp, hsdp = (1, n), (n // RANKS_PER_NODE, RANKS_PER_NODE)
            base = results[fsdp]
            others = [m for m in results if m not in (fsdp, hsdp)]
            # Ties (equal step times) go to the larger shard group: less
            # memory per rank.
            mixed = min(others, key=lambda m: (results[m]["step"], -m[1]))
            row(nodes, share, "FSDP", *fsdp, base, base)
            row(nodes, share, "HSDP", *hsdp, results[hsdp], base)
            row(nodes, share, "mixed", *mixed, results[mixed], base)
            sys.stdout.flush()


if __name__ == "__main__":
    main()

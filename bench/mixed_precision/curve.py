#!/usr/bin/env python3
"""Mixed precision against f32: loss curves, step time and memory, measured.

Trains one small GPT-2 (4 layers, width 128, 4 heads, byte vocabulary,
16 x 64 tokens per step) for 300 steps on real text (Debian's licence
texts, ~240 KB, so that the model learns rather than memorises) with the
CPU backend, five ways in the same run: f32 and param-dtype=bf16 at 2 ranks
(mpirun), f32 and bf16 at 1 rank, and bf16 with reduce-dtype=bf16 at 2
ranks. f32 at 1 rank differs from f32 at 2 only in the order of the
gradient's sums: how far it drifts is the band within which a difference
says nothing about precision.
Prints the loss every 25 steps side by side, the mean of the last 20
losses and its difference to f32, and each run's step time, arena
high-water mark (measured, with the compiler's prediction) and heap above
the arena. The CPU backend is the test bed, not the target: a bf16 kernel
runs as the f32 one on widened copies, so bf16 is slower here; the table's
point is the losses and the bytes.

With several seeds (the default: 1 2 3; each seeds the initialisation and
the data order) the curve is the first seed's and the summary gives every
seed's final loss: runs that differ only in rounding drift apart over
hundreds of steps by about as much as runs of another seed, so one seed's
difference says little alone.

Usage: bench/mixed_precision/curve.py [--build build] [--steps 300]
                                      [--seeds 1 2 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

MODEL = ["gpt2", "--layers", "4", "--dim", "128", "--heads", "4",
         "--vocab", "256", "--seq", "64", "--batch", "16"]
# name, world size, pipeline options beyond lr and world size
RUNS = [("f32 N=2", 2, ""), ("f32 N=1", 1, ""),
        ("bf16 N=2", 2, "param-dtype=bf16"),
        ("bf16 N=1", 1, "param-dtype=bf16"),
        ("bf16+bf16 reduce N=2", 2, "param-dtype=bf16 reduce-dtype=bf16")]


def corpus(path):
    root = "/usr/share/common-licenses"
    with open(path, "wb") as out:
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if os.path.isfile(full) and not os.path.islink(full):
                out.write(open(full, "rb").read())


def train(build, tmp, text, name, world, options, steps, seed):
    bin_ = lambda tool: os.path.join(build, "bin", tool)
    plan = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".plan")
    model = subprocess.run([bin_("fsdp-gen")] + MODEL, check=True,
                           capture_output=True, text=True).stdout
    subprocess.run([bin_("fsdp-opt"), "-",
                    f"--fsdp-train-pipeline=lr=1e-3 world-size={world} "
                    f"{options}", "-o", plan],
                   input=model, check=True, text=True)
    report = f"{plan}.{seed}.json"
    run = [bin_("fsdp-run"), plan, "--data", text, "--steps", str(steps),
           "--threads", "1", "--seed", str(seed), "--report-json", report]
    if world > 1:
        run = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
               str(world)] + run
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    log = subprocess.run(run, check=True, capture_output=True, text=True,
                         env=env).stdout
    losses = json.load(open(report))["losses"]
    ms = float(re.search(r"([0-9.]+) ms/step", log).group(1))
    arena = re.search(r"arena high-water mark per rank (\d+) bytes .* "
                      r"(\d+) bytes .* predicted \((\w+)\)", log)
    heap = re.search(r"outside the arena per rank: (\d+) bytes", log)
    return dict(losses=losses, ms=ms, arena=int(arena.group(1)),
                predicted=int(arena.group(2)), match=arena.group(3),
                heap=int(heap.group(1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "licenses.txt")
        corpus(text)
        results = {(name, seed): train(args.build, tmp, text, name, world,
                                       options, args.steps, seed)
                   for seed in args.seeds for name, world, options in RUNS}
    names = [name for name, _, _ in RUNS]
    first = args.seeds[0]
    print(f"\nloss by step (seed {first})\n")
    print("| step | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for s in list(range(0, args.steps, 25)) + [args.steps - 1]:
        print(f"| {s + 1} | " + " | ".join(
            f"{results[(n, first)]['losses'][s]:.4f}" for n in names) + " |")
    last = lambda n, seed: statistics.mean(results[(n, seed)]["losses"][-20:])
    print("\nmean of the last 20 losses, and its difference to f32 N=2\n")
    print("| run | " + " | ".join(f"seed {s}" for s in args.seeds) +
          " | ms/step | arena high-water (measured, vs predicted) | "
          "heap above the arena |")
    print("|---" * (len(args.seeds) + 4) + "|")
    for n in names:
        cells = []
        for seed in args.seeds:
            ref = last(names[0], seed)
            cells.append(f"{last(n, seed):.4f} "
                         f"({100 * (last(n, seed) - ref) / ref:+.2f}%)")
        r = results[(n, first)]
        print(f"| {n} | " + " | ".join(cells) + f" | {r['ms']:.1f} | "
              f"{r['arena'] / 2**20:.2f} MiB ({r['match']}) | "
              f"{r['heap'] / 2**20:.1f} MiB |")


if __name__ == "__main__":
    sys.exit(main())

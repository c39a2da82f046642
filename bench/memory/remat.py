#!/usr/bin/env python3
"""Activation memory against recompute, measured on the CPU: a GPT-2 whose
attention dominates (6 layers, dim 256, 4 heads, T = 1024, batch 2, byte
vocabulary) trained on one rank in five forms, in the same run:
materialized attention without recomputation (the baseline), blocked
attention, blocked with selective and with full recomputation, and
materialized with full recomputation. Per form it prints the compiler's
prediction (the plan's arena, the simulator's compute time) next to the
measurement (the arena's high-water mark, the process's peak resident set,
the median step time), and both as ratios to the baseline: the peak falls
by what the plan predicts, and the step time grows by about what the
recompute predicts (the simulator charges the recomputed ops; its CPU
rates, --compute-tflops 0.25 and --memory-gbps 20, only scale the
prediction, the ratio is what matters). MiB = 2^20 bytes.
Usage: bench/memory/remat.py [--build build] [--steps 6] [--threads 2]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MODEL = ["gpt2", "--layers", "6", "--dim", "256", "--heads", "4", "--vocab",
         "256", "--seq", "1024", "--batch", "2"]
FORMS = [("materialized, none", "materialized", "none"),
         ("blocked, none", "blocked", "none"),
         ("blocked, selective", "blocked", "selective"),
         ("blocked, full", "blocked", "full"),
         ("materialized, full", "materialized", "full")]


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def simulated_compute_ms(bin_dir, ir, attention, remat):
    passes = (f"--fsdp-wrap --fsdp-data-parallel --fsdp-attention=impl={attention} "
              f"--fsdp-autodiff --fsdp-remat=policy={remat} --fsdp-shard "
              "--fsdp-schedule").split()
    out = subprocess.run(
        [os.path.join(bin_dir, "fsdp-opt"), *passes,
         "--fsdp-simulate=compute-tflops=0.25 memory-gbps=20", "-o", os.devnull],
        input=ir, check=True, capture_output=True, text=True).stderr
    return float(re.search(r"compute ([0-9.]+) ms", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    mib = 1 << 20
    ir = subprocess.run([os.path.join(bin_dir, "fsdp-gen"), *MODEL],
                        check=True, capture_output=True, text=True).stdout
    print(f"CPU: {cpu_name()}, 1 rank x {args.threads} threads, "
          f"{args.steps} steps; fsdp-gen {' '.join(MODEL)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, attention, remat in FORMS:
            plan = os.path.join(tmp, "model.plan")
            subprocess.run([os.path.join(bin_dir, "fsdp-opt"),
                            f"--fsdp-train-pipeline=attention={attention} "
                            f"remat={remat}", "-o", plan],
                           input=ir, check=True, text=True)
            report = os.path.join(tmp, "report.json")
            log = subprocess.run(
                [os.path.join(bin_dir, "fsdp-run"), plan, "--data",
                 os.path.join(root, "data", "corpus.txt"), "--steps",
                 str(args.steps), "--threads", str(args.threads),
                 "--report-json", report],
                check=True, capture_output=True, text=True).stdout
            if "(match)" not in log:
                sys.exit(f"remat.py: {label}: the arena did not match its plan")
            r = json.load(open(report))
            rows.append((label, r["arena_bytes_predicted"],
                         r["arena_bytes_measured"], r.get("rss_bytes_peak", 0),
                         r["ms_per_step"],
                         simulated_compute_ms(bin_dir, ir, attention, remat)))
    base = rows[0]
    print(f"{'form (attention, remat)':22} {'arena MiB':>10} {'measured':>9} "
          f"{'RSS MiB':>8} {'arena x':>8} {'ms/step':>8} {'step x':>7} "
          f"{'sim ms':>8} {'sim x':>6}")
    for label, arena, measured, rss, ms, sim in rows:
        print(f"{label:22} {arena / mib:10.1f} {measured / mib:9.1f} "
              f"{rss / mib:8.1f} {arena / base[1]:8.3f} {ms:8.1f} "
              f"{ms / base[4]:7.3f} {sim:8.2f} {sim / base[5]:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

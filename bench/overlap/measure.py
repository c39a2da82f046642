#!/usr/bin/env python3
"""Measured overlap on the CPU backend: step time with and without prefetch
next to a compute-only run of the same plan, in one run.

For N = 2 and 4 ranks (mpirun, one process per rank, the machine's cores
split between them), one GPT-2 (6 layers, dim 256, byte vocabulary, seq 64,
2 sequences per rank) is compiled with three schedules, as in simulate.py:
no prefetch; a PyTorch-FSDP-like default (backward prefetch 1, 2 gathers in
flight); and forward and backward prefetch 1. Each plan runs three ways:
  async    --collective-threads on: started collectives on a thread per
           stream (MPI_THREAD_MULTIPLE, a communicator per stream), waits
           where the plan has them (the default, auto, picks this only
           where each rank has a spare core, which this 2-core machine
           never has at N >= 2);
  sync     --sync-collectives: the same plan, every collective run where
           it starts, on the compute thread (no overlap);
  compute  --skip-collectives: the same plan with no communication at all
           (losses meaningless): the floor a perfect overlap reaches.
Exposed communication = step - compute. Each figure is the median of
--repeats runs of --steps steps (the first step of each run not counted).
It also checks that async and sync losses agree bitwise, step by step.

On a machine with fewer cores than ranks x threads the communication
threads compete with compute for cores; the table shows what that costs.

Usage: bench/overlap/measure.py [--build build] [--ranks 2 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# The small English text the token models train on.
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "data", "corpus.txt")

SCHEDULES = {
    "none": "forward-prefetch=0 backward-prefetch=0 max-inflight-gathers=0",
    "pytorch-like": "forward-prefetch=0 backward-prefetch=1 "
                    "max-inflight-gathers=2",
    "prefetch 1/1": "forward-prefetch=1 backward-prefetch=1 "
                    "max-inflight-gathers=0",
}
MODES = {"async": ["--collective-threads", "on"],
         "sync": ["--sync-collectives"],
         "compute": ["--skip-collectives"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cores = os.cpu_count() or 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in args.ranks:
            threads = max(1, cores // ranks)
            model = os.path.join(tmp, f"gpt2-{ranks}.mlir")
            subprocess.run(
                [os.path.join(bin_dir, "fsdp-gen"), "gpt2", "--layers", "6",
                 "--dim", "256", "--heads", "4", "--vocab", "256", "--seq",
                 "64", "--batch", str(2 * ranks), "-o", model], check=True)
            for name, schedule in SCHEDULES.items():
                plan = os.path.join(tmp, f"{ranks}-{len(rows)}.plan")
                subprocess.run(
                    [os.path.join(bin_dir, "fsdp-opt"), model,
                     f"--fsdp-train-pipeline=world-size={ranks} {schedule}",
                     "-o", plan], check=True)
                ms, losses = {}, {}
                for mode, flags in MODES.items():
                    times = []
                    for _ in range(args.repeats):
                        report = os.path.join(tmp, "report.json")
                        subprocess.run(
                            ["mpirun", "--oversubscribe", "--bind-to", "none",
                             "-np", str(ranks),
                             os.path.join(bin_dir, "fsdp-run"), plan,
                             "--data", CORPUS,
                             "--steps", str(args.steps), "--log-every",
                             "1000", "--threads", str(threads),
                             "--report-json", report] + flags,
                            check=True, env=env, stdout=subprocess.DEVNULL)
                        with open(report) as f:
                            data = json.load(f)
                        times.append(data["ms_per_step"])
                        losses[mode] = data["losses"]
                    ms[mode] = statistics.median(times)
                rows.append((ranks, threads, name, ms,
                             losses["async"] == losses["sync"]))
                print_row(rows[-1])
                sys.stdout.flush()
    print()
    print(f"| N | threads/rank | schedule | async ms/step | sync ms/step | "
          f"compute-only ms/step | exposed async | exposed sync | "
          f"losses async = sync |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print_row(row, markdown=True)


def print_row(row, markdown=False):
    ranks, threads, name, ms, same = row
    exposed = {m: ms[m] - ms["compute"] for m in ("async", "sync")}
    cells = [str(ranks), str(threads), name, f"{ms['async']:.1f}",
             f"{ms['sync']:.1f}", f"{ms['compute']:.1f}",
             f"{exposed['async']:.1f} ms ({100 * exposed['async'] / ms['async']:.1f}%)",
             f"{exposed['sync']:.1f} ms ({100 * exposed['sync'] / ms['sync']:.1f}%)",
             "bitwise" if same else "DIFFER"]
    if markdown:
        print("| " + " | ".join(cells) + " |")
    else:
        print("  ".join(cells))


if __name__ == "__main__":
    main()

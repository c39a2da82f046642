#!/usr/bin/env python3
"""What a rank allocates beyond the arena, measured: the process heap of
fsdp-run (its malloc counter, fsdp/runtime/support/HeapMeter.h) after setup and at
its peak while training, next to the arena the compiler planned.

For a small GPT-2 (6 layers, dim 64, byte vocabulary, corpus.txt) and
GPT-2 124M's shape (B 4, T 64, a synthetic llm.c token file of 200k ids),
both at 2 ranks, it runs fsdp-run twice: with the runtime's ring
reduce-scatter (no staging: the default) and, as the baseline measured in
the same run, with Open MPI's own MPI_Reduce_scatter
(FSDP_REDUCE_SCATTER=mpi), which allocates inside the library. Prints the
CPU and one row per run, with the compiler's prediction of the share
outside the arena (the plan's summary). MiB = 2^20 bytes.

Usage: bench/memory/heap.py [--build build] [--steps 3]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

MODELS = {
    "gpt2 6x64 (bytes)": (["gpt2", "--layers", "6", "--dim", "64", "--heads",
                           "4", "--vocab", "256", "--seq", "32", "--batch",
                           "4"], "corpus"),
    "gpt2-124m (B 4, T 64)": (["gpt2", "--preset", "gpt2-124m", "--batch",
                               "4", "--seq", "64"], "tokens"),
}


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def token_file(path, count=200000, vocab=50257):
    rng = random.Random(1)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
        f.write(struct.pack(f"<{count}H",
                            *(rng.randrange(vocab) for _ in range(count))))


def run(build, plan, data, steps, env_extra, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1",
               **env_extra)
    subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
                    "2", os.path.join(build, "bin", "fsdp-run"), plan,
                    "--data", data, "--steps", str(steps), "--threads", "1",
                    "--report-json", out], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return json.load(open(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    mib = 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.bin")
        token_file(tokens)
        data = {"corpus": os.path.join(root, "data", "corpus.txt"),
                "tokens": tokens}
        print(f"CPU: {cpu_name()}, 2 ranks x 1 thread, {args.steps} steps")
        print(f"{'model':24} {'reduce-scatter':16} {'arena MiB':>10} "
              f"{'heap setup':>11} {'heap peak':>10} {'step +KiB':>10} "
              f"{'above arena':>12} {'predicted':>10} {'% arena':>8} "
              f"{'RSS peak':>9} {'predicted':>10}")
        for name, (gen, source) in MODELS.items():
            ir = subprocess.run([os.path.join(args.build, "bin", "fsdp-gen"),
                                 *gen], check=True, capture_output=True,
                                text=True).stdout
            plan = os.path.join(tmp, "model.plan")
            subprocess.run([os.path.join(args.build, "bin", "fsdp-opt"),
                            "--fsdp-train-pipeline=world-size=2", "-o", plan],
                           input=ir, check=True, text=True)
            for label, env in (("ring (ours)", {}),
                               ("MPI's (baseline)",
                                {"FSDP_REDUCE_SCATTER": "mpi"})):
                r = run(args.build, plan, data[source], args.steps, env,
                        os.path.join(tmp, "report.json"))
                arena = r["arena_bytes_predicted"]
                setup, peak = r["heap_bytes_after_setup"], r["heap_bytes_peak"]
                print(f"{name:24} {label:16} {arena / mib:10.1f} "
                      f"{setup / mib:11.1f} {peak / mib:10.1f} "
                      f"{(peak - setup) / 1024:10.1f} "
                      f"{(peak - arena) / mib:12.2f} "
                      f"{r['outside_arena_bytes_predicted'] / mib:10.2f} "
                      f"{100 * (peak - arena) / arena:8.2f} "
                      f"{r['rss_bytes_peak'] / mib:9.1f} "
                      f"{r['rss_bytes_predicted'] / mib:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

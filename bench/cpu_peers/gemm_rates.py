#!/usr/bin/env python3
"""GPT-2 124M's GEMMs, bare, on each library: OpenBLAS and oneDNN (through
fsdp-gemm-bench) against PyTorch's f32 matmul (MKL in PyPI's x86-64
wheels), on the same shapes and threads.

issue 32 asks for the in-step GEMM rate next to the library's own rate on
the step's shapes and next to MKL's. `fsdp-gemm-bench PLAN --blas X` times
each distinct GEMM of the plan's linear kernels alone; this script runs it
for openblas and onednn, then times torch.matmul on the same shapes and
layouts (a transposed operand as a transposed view, which PyTorch hands
to its BLAS as a transpose flag, as fsdp-run does) with
torch.set_num_threads(--threads), and prints one table: GFLOP/s per shape
and for the whole step, each shape weighted by how often a step runs it.

Usage: bench/cpu_peers/gemm_rates.py [--build build] [--threads 2]
           [--seconds 1]
PyTorch comes from bench/cpu_peers/run.py's environment (created if
missing). OPENBLAS_CORETYPE is left as the environment sets it.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as peers  # noqa: E402  (the peers' environment and CPU line)

LINE = re.compile(r"gemm-bench: (N|T)(N|T) M=(\d+)\s+N=(\d+)\s+K=(\d+)\s+"
                  r"x(\d+)\s+([0-9.]+) ms\s+([0-9.]+) GFLOP/s")

TORCH_TIMER = r"""
import json, sys, time, torch
shapes, threads, seconds = json.loads(sys.argv[1]), int(sys.argv[2]), \
    float(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = []
for ta, tb, M, N, K in shapes:
    a = torch.randn(K, M).t() if ta == "T" else torch.randn(M, K)
    b = torch.randn(N, K).t() if tb == "T" else torch.randn(K, N)
    c = torch.empty(M, N)
    torch.matmul(a, b, out=c)  # warm-up: threads, packing buffers
    runs, start = 0, time.perf_counter()
    while runs < 3 or time.perf_counter() - start < seconds:
        torch.matmul(a, b, out=c)
        runs += 1
    out.append((time.perf_counter() - start) / runs * 1e3)
import re
config = torch.__config__.show()
info = re.search(r"BLAS_INFO=(\w+)", config)
mkl = re.search(r"Intel\(R\) (?:oneAPI )?Math Kernel Library[^\n]*", config)
print(json.dumps({"ms": out, "blas": (info.group(1) if info else "?") +
                  (" (" + mkl.group(0).strip() + ")" if mkl else "")}))
"""


def gemm_bench(bin_dir, plan, library, args):
    out = subprocess.run(
        [os.path.join(bin_dir, "fsdp-gemm-bench"), plan, "--blas", library,
         "--threads", str(args.threads), "--seconds", str(args.seconds)],
        check=True, capture_output=True, text=True).stdout
    rows = {}
    for m in LINE.finditer(out):
        ta, tb, M, N, K, count, ms, _ = m.groups()
        rows[(ta, tb, int(M), int(N), int(K))] = (int(count), float(ms))
    return rows


def gflops(shape, ms):
    _, _, M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e6)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    python = peers.environment()
    with tempfile.TemporaryDirectory() as work:
        model, plan = os.path.join(work, "gpt2.mlir"), \
            os.path.join(work, "gpt2.plan")
        subprocess.run([os.path.join(bin_dir, "fsdp-gen"), "--preset",
                        "gpt2-124m", "--batch", str(peers.B), "--seq",
                        str(peers.T), "-o", model], check=True)
        subprocess.run([os.path.join(bin_dir, "fsdp-opt"), model,
                        "--fsdp-train-pipeline=", "-o", plan], check=True)
        libraries = {lib: gemm_bench(bin_dir, plan, lib, args)
                     for lib in ("openblas", "onednn")}
    shapes = sorted(libraries["openblas"])
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    torch = json.loads(subprocess.run(
        [python, "-c", TORCH_TIMER, json.dumps(shapes), str(args.threads),
         str(args.seconds)], check=True, capture_output=True, text=True,
        env=env).stdout.strip().splitlines()[-1])
    columns = list(libraries) + ["torch"]
    times = {lib: {s: libraries[lib][s][1] for s in shapes}
             for lib in libraries}
    times["torch"] = dict(zip(shapes, torch["ms"]))
    print("GPT-2 124M's GEMMs (batch %d x seq %d, f32), bare, %d threads"
          % (peers.B, peers.T, args.threads))
    print("CPU: " + peers.cpu_description() + "; OPENBLAS_CORETYPE=" +
          os.environ.get("OPENBLAS_CORETYPE", "(unset)"))
    print("PyTorch's BLAS: " + torch["blas"])
    print("| shape | per step | " + " | ".join(
        c + " GFLOP/s" for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for s in shapes:
        print("| %s%s %d x %d x %d | %d | %s |" % (
            s[0], s[1], s[2], s[3], s[4], libraries["openblas"][s][0],
            " | ".join("%.1f" % gflops(s, times[c][s]) for c in columns)))
    flops = sum(2.0 * s[2] * s[3] * s[4] * libraries["openblas"][s][0]
                for s in shapes)
    totals = []
    for c in columns:
        ms = sum(times[c][s] * libraries["openblas"][s][0] for s in shapes)
        totals.append("%.1f ms, %.1f" % (ms, flops / (ms * 1e6)))
    print("| a step (%.1f GFLOP) | | %s |" % (flops / 1e9,
                                             " | ".join(totals)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""CPU training-step benchmark: GPT-2 124M shape, batch 4, sequence 64.

Compiles `fsdp-gen --preset gpt2-124m --batch 4 --seq 64` once, then for each
CBLAS library (OpenBLAS, BLIS), in the same run:
  * the bare sgemm rate of that library on exactly the plan's GEMM shapes,
    weighted as one step calls them (fsdp-gemm-bench), the baseline;
  * a real training step with fsdp-run --profile on one rank and 2 threads:
    ms/step, tokens/s, the GEMM rate inside the step and the share of the
    step spent outside GEMMs.
Prints one table naming the library and the kernel it runs, and checks the
targets: GEMMs at >= 100 GFLOP/s, non-GEMM kernels < 20% of the step.

Usage: bench/cpu_step/run.py [--build build] [--steps 6] [--threads 2]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# The small English text the token models train on.
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "data", "corpus.txt")

GEMM_KERNELS = ("linear", "linear_grad_input", "linear_grad_weight")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True,
                          **kw).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--libraries", default="openblas,blis")
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    tool = lambda name: os.path.join(bin_dir, name)

    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "gpt2-124m.plan")
        model = run([tool("fsdp-gen"), "--preset", "gpt2-124m", "--batch", "4",
                     "--seq", "64"])
        subprocess.run([tool("fsdp-opt"), "--fsdp-train-pipeline", "-o", plan],
                       input=model, text=True, check=True)
        rows = []
        for lib in args.libraries.split(","):
            bench = run([tool("fsdp-gemm-bench"), plan, "--blas", lib,
                         "--threads", str(args.threads)])
            kernel = re.search(r"gemm-bench: (.*), \d+ threads", bench).group(1)
            m = re.search(r"per step ([0-9.]+) GFLOP in ([0-9.]+) ms: "
                          r"([0-9.]+) GFLOP/s", bench)
            step_gflop, bare_rate = float(m.group(1)), float(m.group(3))
            out = run([tool("fsdp-run"), plan, "--data", CORPUS,
                       "--steps", str(args.steps),
                       "--threads", str(args.threads), "--blas", lib,
                       "--profile", "--log-every", str(args.steps)])
            ms = float(re.search(r"summary: .* ([0-9.]+) ms/step", out).group(1))
            tok = float(re.search(r"ms/step, ([0-9.]+) tok/s", out).group(1))
            kernels = {}
            for name, calls, total in re.findall(
                    r"profile: (\S+) +(\d+) calls +([0-9.]+) ms", out):
                # The profile covers steps 2.. (step 1 is warm-up).
                kernels[name] = float(total) / (args.steps - 1)
            total = sum(kernels.values())
            gemm = sum(kernels.get(k, 0.0) for k in GEMM_KERNELS)
            attention = kernels.get("attention", 0) + kernels.get(
                "attention_backward", 0)
            rows.append(dict(lib=lib, kernel=kernel, ms=ms, tok=tok,
                             gemm_ms=gemm, step_gflop=step_gflop,
                             rate=step_gflop / (gemm / 1e3),
                             bare=bare_rate,
                             other_share=(total - gemm) / total * 100,
                             attention_share=attention / total * 100,
                             kernels=kernels, total=total))

    print(f"GPT-2 124M shape, batch 4 x seq 64, 1 rank, {args.threads} "
          f"threads, mean of steps 2..{args.steps}")
    header = ("library", "ms/step", "tok/s", "GEMM ms", "GEMM GFLOP/s",
              "bare sgemm GFLOP/s", "non-GEMM %", "(attention %)")
    print(" | ".join(f"{h:>18}" for h in header))
    for r in rows:
        cells = (r["lib"], f"{r['ms']:.1f}", f"{r['tok']:.0f}",
                 f"{r['gemm_ms']:.1f}", f"{r['rate']:.1f}", f"{r['bare']:.1f}",
                 f"{r['other_share']:.1f}", f"{r['attention_share']:.1f}")
        print(" | ".join(f"{c:>18}" for c in cells))
    for r in rows:
        print(f"{r['lib']}: {r['kernel']}")
    best = max(rows, key=lambda r: r["tok"])
    print(f"\nfastest step: {best['lib']}")
    print("non-GEMM kernels, ms per step (fastest library):")
    for name, ms in sorted(best["kernels"].items(), key=lambda kv: -kv[1]):
        if name not in GEMM_KERNELS:
            print(f"  {name:<24} {ms:8.2f} ms  {ms / best['total'] * 100:5.1f}%")
    ok_rate = best["rate"] >= 100
    ok_share = best["other_share"] < 20
    print(f"target GEMM >= 100 GFLOP/s: {'met' if ok_rate else 'MISSED'} "
          f"({best['rate']:.1f})")
    print(f"target non-GEMM < 20% of the step: "
          f"{'met' if ok_share else 'MISSED'} ({best['other_share']:.1f}%)")
    return 0 if ok_rate and ok_share else 1


if __name__ == "__main__":
    sys.exit(main())

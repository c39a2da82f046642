#!/usr/bin/env python3
"""CPU training-step benchmark: GPT-2 124M and a Llama of the same size.

Compiles each model once, batch 4, sequence 64:
  * gpt2:  `fsdp-gen --preset gpt2-124m --batch 4 --seq 64` (123.7M
    parameters at seq 64, vocabulary 50257, head tied to the embedding);
  * llama: `fsdp-gen llama --layers 12 --dim 768 --heads 12 --kv-heads 4
    --ffn-dim 2048 --vocab 32000 --seq 64 --batch 4` (124.7M parameters:
    GPT-2 124M's depth and width, RMSNorm, rope, grouped-query attention
    with 4 kv heads, a SwiGLU MLP of GPT-2's MLP size, an untied head);
then for each CBLAS library (OpenBLAS, BLIS), in the same run:
  * the bare sgemm rate of that library on exactly that plan's GEMM shapes,
    weighted as one step calls them (fsdp-gemm-bench), the baseline;
  * a real training step with fsdp-run --profile on one rank and 2 threads:
    ms/step, tokens/s, the GEMM rate inside the step and the share of the
    step spent outside GEMMs.
Prints one table per model naming the library and the kernel it runs, the
non-GEMM kernels of the fastest library, and checks the targets for each
model: GEMMs at >= 100 GFLOP/s, non-GEMM kernels < 20% of the step.

Usage: bench/cpu_step/run.py [--build build] [--steps 6] [--threads 2]
                             [--libraries openblas,blis] [--models gpt2,llama]
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

# name -> (title, fsdp-gen arguments)
MODELS = {
    "gpt2": ("GPT-2 124M shape",
             ["--preset", "gpt2-124m", "--batch", "4", "--seq", "64"]),
    "llama": ("Llama 124.7M (12 x 768, 12 heads, 4 kv heads, SwiGLU 2048, "
              "vocab 32000)",
              ["llama", "--layers", "12", "--dim", "768", "--heads", "12",
               "--kv-heads", "4", "--ffn-dim", "2048", "--vocab", "32000",
               "--seq", "64", "--batch", "4"]),
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True,
                          **kw).stdout


def baseline(tool, plan, lib, args):
    """The bare sgemm rate of `lib` on the plan's GEMM shapes."""
    bench = run([tool("fsdp-gemm-bench"), plan, "--blas", lib,
                 "--threads", str(args.threads)])
    kernel = re.search(r"gemm-bench: (.*), \d+ threads", bench).group(1)
    shapes = len(re.findall(r"gemm-bench: [NT][NT] M=", bench))
    m = re.search(r"per step ([0-9.]+) GFLOP in ([0-9.]+) ms: "
                  r"([0-9.]+) GFLOP/s", bench)
    return dict(lib=lib, kernel=kernel, shapes=shapes,
                step_gflop=float(m.group(1)), bare=float(m.group(3)))


def step(tool, plan, row, args):
    """Adds to `row` the training step of its library on the plan."""
    out = run([tool("fsdp-run"), plan, "--data", CORPUS,
               "--steps", str(args.steps),
               "--threads", str(args.threads), "--blas", row["lib"],
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
    # Materialized (attention, attention_backward) or blocked
    # (attention_blocked, attention_backward_blocked), whichever the plan
    # runs.
    attention = sum(v for k, v in kernels.items() if k.startswith("attention"))
    row.update(ms=ms, tok=tok, gemm_ms=gemm,
               rate=row["step_gflop"] / (gemm / 1e3),
               other_share=(total - gemm) / total * 100,
               attention_share=attention / total * 100,
               kernels=kernels, total=total)


def measure(tool, plan, args):
    """Every library's baseline and step on one plan."""
    rows = []
    for lib in args.libraries.split(","):
        row = baseline(tool, plan, lib, args)
        step(tool, plan, row, args)
        rows.append(row)
    return rows


def report(title, rows, args):
    """Prints one model's table; returns whether it met both targets."""
    print(f"{title}, batch 4 x seq 64, 1 rank, {args.threads} threads, "
          f"mean of steps 2..{args.steps}")
    print(f"baseline: {rows[0]['shapes']} GEMM shapes, "
          f"{rows[0]['step_gflop']:.1f} GFLOP per step")
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
            print(f"  {name:<26} {ms:8.2f} ms  {ms / best['total'] * 100:5.1f}%")
    ok_rate = best["rate"] >= 100
    ok_share = best["other_share"] < 20
    print(f"target GEMM >= 100 GFLOP/s: {'met' if ok_rate else 'MISSED'} "
          f"({best['rate']:.1f})")
    print(f"target non-GEMM < 20% of the step: "
          f"{'met' if ok_share else 'MISSED'} ({best['other_share']:.1f}%)")
    return ok_rate and ok_share


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--libraries", default="openblas,blis")
    parser.add_argument("--models", default="gpt2,llama",
                        help="comma-separated, of: " + ", ".join(MODELS))
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (step 1 is warm-up)")
    models = args.models.split(",")
    for name in models:
        if name not in MODELS:
            parser.error(f"unknown model '{name}', expected one of "
                         + ", ".join(MODELS))
    bin_dir = os.path.join(args.build, "bin")
    tool = lambda name: os.path.join(bin_dir, name)

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(models):
            title, gen_args = MODELS[name]
            plan = os.path.join(tmp, f"{name}.plan")
            model = run([tool("fsdp-gen")] + gen_args)
            subprocess.run([tool("fsdp-opt"), "--fsdp-train-pipeline", "-o",
                            plan], input=model, text=True, check=True)
            rows = measure(tool, plan, args)
            if i:
                print()
            ok = report(title, rows, args) and ok
            sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

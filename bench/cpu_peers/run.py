#!/usr/bin/env python3
"""GPT-2 124M's CPU training step against PyTorch and JAX, interleaved.

One model, one step: GPT-2 124M (12 layers, 768 wide, 12 heads, GPT-2's
vocabulary of 50257, the head tied to the token embedding), batch 4 x
sequence 64, AdamW (lr 3e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1
on the matrices), random token ids of a fixed seed, on one process with
`--threads` threads. The systems, each started afresh in every round and
the rounds interleaved (so that a noisy neighbour hits all of them):

  fsdp-run f32      fsdp-opt --fsdp-train-pipeline, one rank, the default
                    --blas auto (f32 GEMMs on OpenBLAS)
  fsdp-run bf16     the same with param-dtype=bf16 (f32 master weights):
                    --blas auto runs its GEMMs on oneDNN's bf16 matmul
                    where the CPU has bf16 units (AVX512-BF16, AMX)
  fsdp-run bf16, openblas   the bf16 plan with --blas openblas: every bf16
                    GEMM widened to f32, a CPU without bf16 units' path
  fsdp-run f32, onednn / bf16, onednn   the two plans with --blas onednn
                    (oneDNN's matmul for f32 too: AVX-512 whatever
                    OPENBLAS_CORETYPE says)
  PyTorch eager     torch.optim.AdamW, F.scaled_dot_product_attention
  torch.compile     the same model and step under torch.compile
  PyTorch bf16      eager under torch.autocast("cpu", dtype=torch.bfloat16)
  JAX jit           the same model in jax.numpy, the whole step jitted

Each run warms up for --warmup steps and times --steps more; a round's
figure is that run's mean step, the table's the median over the rounds.
Prints the table with each system's ratio to fsdp-run f32, the CPU (model
and the flags that matter here) and the GEMM kernel fsdp-run names.

PyTorch and JAX come from PyPI into this script's own virtual
environment (~/.cache/fsdp-mlir/bench-peers-venv). Where the project's
environment (scripts/setup-python.sh) already holds the pinned torch,
the new environment layers on it (a .pth file) instead of downloading
torch's 5.6 GB again; JAX (about 100 MB) is installed either way.
OPENBLAS_CORETYPE is left as the environment sets it.

Usage: bench/cpu_peers/run.py [--build build] [--rounds 3] [--steps 5]
           [--warmup 2] [--threads 2] [--systems fsdp-f32,eager,...]
"""
import argparse
import glob
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
VENV = os.path.expanduser("~/.cache/fsdp-mlir/bench-peers-venv")
JAX = "jax[cpu]==0.10.2"
B, T, VOCAB = 4, 64, 50257
SYSTEMS = ["fsdp-f32", "fsdp-bf16", "fsdp-bf16-gathers", "fsdp-bf16-openblas",
           "fsdp-f32-onednn", "eager", "compile", "eager-bf16", "jax"]
LIBRARIES = ("-onednn", "-openblas")  # a suffix: that --blas, else auto
TITLES = {"fsdp-f32": "fsdp-run f32", "fsdp-bf16": "fsdp-run bf16",
          "fsdp-bf16-gathers": "fsdp-run bf16, shard-copy=false",
          "fsdp-bf16-openblas": "fsdp-run bf16, --blas openblas",
          "fsdp-f32-onednn": "fsdp-run f32, --blas onednn",
          "fsdp-bf16-onednn": "fsdp-run bf16, --blas onednn",
          "eager": "PyTorch eager", "compile": "torch.compile",
          "eager-bf16": "PyTorch eager, autocast bf16", "jax": "JAX jit"}


def pinned_torch():
    for line in open(os.path.join(ROOT, "scripts", "python-requirements.txt")):
        if line.startswith("torch=="):
            return line.strip()
    return "torch"


def project_site_packages():
    """The project environment's site-packages, when it has torch."""
    python = os.environ.get("FSDP_PYTHON")
    candidates = [os.path.dirname(os.path.dirname(python))] if python else []
    candidates += glob.glob(os.path.expanduser("~/.cache/fsdp-mlir/venv-*"))
    for venv in candidates:
        for site in glob.glob(os.path.join(venv, "lib", "python3*",
                                           "site-packages")):
            if glob.glob(os.path.join(site, "torch-*.dist-info")):
                return site
    return None


def environment():
    """This benchmark's interpreter, with torch and JAX importable."""
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    site = subprocess.run([python, "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True)
    shared = project_site_packages()
    if shared:
        with open(os.path.join(site.stdout.strip(), "fsdp_project.pth"),
                  "w") as pth:
            pth.write(shared + "\n")
    subprocess.run([python, "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", pinned_torch(), JAX,
                    "numpy"], check=True)
    return python


def cpu_description():
    model, flags = "unknown CPU", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
        elif line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    wanted = ["avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]
    return "%s, %d cores online; %s" % (
        model, os.cpu_count(),
        " ".join(f for f in wanted if f in flags) or "no AVX2")


def write_tokens(path, count):
    """llm.c's token file: a 256-int32 header, then uint16 ids."""
    import random
    rng = random.Random(1234)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
        f.write(struct.pack("<%dH" % count,
                            *(rng.randrange(VOCAB) for _ in range(count))))


# fsdp-run's first line under --blas auto, by plan: it names the GEMM
# kernels (and, for bf16, where its bf16 GEMMs run and why).
GEMM_LINES = {}


def run_fsdp(bin_dir, plan, tokens, args, blas=None):
    report_path = plan + ".report.json"
    out = subprocess.run(
        [os.path.join(bin_dir, "fsdp-run"), plan, "--data", tokens,
         "--steps", str(args.warmup + args.steps), "--threads",
         str(args.threads), "--report-json", report_path] +
        (["--blas", blas] if blas else []),
        check=True, capture_output=True, text=True).stdout
    if not blas:
        GEMM_LINES[os.path.basename(plan)] = next(
            (line for line in out.splitlines() if "GEMM" in line), "")
    with open(report_path) as f:
        report = json.load(f)
    # fsdp-run's mean leaves out the first step; the warm-up's others are
    # few and as fast as the rest.
    return report["ms_per_step"]


def run_peer(python, system, tokens, args):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=true "
                         "intra_op_parallelism_threads=%d" % args.threads)
    out = subprocess.run(
        [python, os.path.join(HERE, "peers.py"), system, tokens,
         str(args.warmup), str(args.steps), str(args.threads)],
        check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    bin_dir = os.path.join(args.build, "bin")
    python = environment()
    times = {s: [] for s in systems}
    with tempfile.TemporaryDirectory() as work:
        tokens = os.path.join(work, "tokens.bin")
        write_tokens(tokens, 200000)
        model = os.path.join(work, "gpt2.mlir")
        subprocess.run([os.path.join(bin_dir, "fsdp-gen"), "--preset",
                        "gpt2-124m", "--batch", str(B), "--seq", str(T),
                        "-o", model], check=True)
        plans = {}
        # fsdp-bf16-gathers: the bf16 step without its shard copies, each
        # region rounding the f32 shard into a gathered buffer instead.
        for system, options in (("fsdp-f32", ""),
                                ("fsdp-bf16", "param-dtype=bf16"),
                                ("fsdp-bf16-gathers",
                                 "param-dtype=bf16 shard-copy=false")):
            if any(system + s in systems for s in ("",) + LIBRARIES):
                plans[system] = os.path.join(work, system + ".plan")
                subprocess.run([os.path.join(bin_dir, "fsdp-opt"), model,
                                "--fsdp-train-pipeline=" + options, "-o",
                                plans[system]], check=True)
        for r in range(args.rounds):
            for system in systems:
                library = next((s[1:] for s in LIBRARIES
                                if system.endswith(s)), None)
                base_plan = system[:-len(library) - 1] if library else system
                ms = (run_fsdp(bin_dir, plans[base_plan], tokens, args,
                               library)
                      if base_plan in plans else
                      run_peer(python, system, tokens, args))
                times[system].append(ms)
                print("round %d: %-30s %9.1f ms/step" % (
                    r + 1, TITLES[system], ms), file=sys.stderr, flush=True)
    print("GPT-2 124M, batch %d x seq %d, f32 AdamW, %d threads, %d rounds "
          "of %d steps after %d warm-up" % (B, T, args.threads, args.rounds,
                                            args.steps, args.warmup))
    print("CPU: " + cpu_description() + "; OPENBLAS_CORETYPE=" +
          os.environ.get("OPENBLAS_CORETYPE", "(unset)"))
    for plan, line in sorted(GEMM_LINES.items()):
        gemm = re.search(r"GEMM (\S+ \([^;)]*)", line)
        bf16 = re.search(r"(bf16 GEMMs (?:from|widened)[^)]*\))", line)
        if gemm:
            print("fsdp-run's GEMM (%s): %s)%s" % (
                plan, gemm.group(1), "; " + bf16.group(1) if bf16 else ""))
    base = statistics.median(times["fsdp-f32"]) if "fsdp-f32" in times \
        else None
    print("| system | ms/step (median) | rounds | vs fsdp-run f32 |")
    print("|---|---|---|---|")
    for system in systems:
        med = statistics.median(times[system])
        ratio = ("%.2fx" % (med / base)) if base else "-"
        print("| %s | %.1f | %s | %s |" % (
            TITLES[system], med,
            " ".join("%.0f" % t for t in times[system]), ratio))


if __name__ == "__main__":
    main()

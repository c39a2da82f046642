#!/usr/bin/env python3
"""Trains one plan on the CPU backend and on the CUDA backend under the
emulator (FSDP_CUDA_EMULATOR=1) with the same options, and compares them.

usage: cuda_vs_cpu.py --name NAME --ranks N [--mpirun CMD] --tol REL
                      [--out DIR] -- PLAN FSDP-RUN-OPTIONS...

Checks, and prints one line saying so (or exits non-zero naming the
difference):
  - the CUDA run says it ran on the emulator (never silently a GPU);
  - losses and gradient norms step by step within REL (relative):
    docs/cuda.md says why the backends differ in the last bits;
    the CUDA run is pedantic fp32 (--tf32 off) unless the options name
    --tf32: the emulator's cuBLAS computes in fp32 whatever the math mode,
    but our blocked attention runs on (emulated) TF32 tensor cores under
    --tf32 on, which is rounding of another size;
  - the arena's measured high-water mark equals the compiler's prediction
    on both backends;
  - the emulated device reports its memory (the device-memory line).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--name", required=True)
parser.add_argument("--ranks", type=int, default=1)
parser.add_argument("--mpirun", default="mpirun --oversubscribe --bind-to none -np")
parser.add_argument("--tol", type=float, required=True)
parser.add_argument("--out", default=None)
parser.add_argument("--fsdp-run", default="fsdp-run")
parser.add_argument("run", nargs=argparse.REMAINDER)
args = parser.parse_args()
run = args.run[1:] if args.run and args.run[0] == "--" else args.run
out = args.out or os.environ.get("TMPDIR", "/tmp")
os.makedirs(out, exist_ok=True)


def train(backend):
    report = os.path.join(out, f"{args.name}.{backend}.json")
    command = [args.fsdp_run] + run + ["--report-json", report]
    env = dict(os.environ)
    env.pop("FSDP_CUDA_EMULATOR", None)
    if backend == "cuda":
        command += ["--backend", "cuda"]
        if "--tf32" not in run:
            command += ["--tf32", "off"]
        env["FSDP_CUDA_EMULATOR"] = "1"
    if args.ranks > 1:
        command = shlex.split(args.mpirun) + [str(args.ranks)] + command
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"cuda_vs_cpu: {args.name}: the {backend} run failed "
                 f"({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return json.load(open(report)), done.stdout + done.stderr


cpu, _ = train("cpu")
cuda, cuda_log = train("cuda")
if "CUDA emulator on the CPU" not in cuda["backend"]:
    sys.exit(f"cuda_vs_cpu: {args.name}: the CUDA run's backend is "
             f"{cuda['backend']!r}, not the emulator")
if "device memory per rank" not in cuda_log:
    sys.exit(f"cuda_vs_cpu: {args.name}: no device-memory line in the CUDA log")
worst = 0.0
for key in ("losses", "grad_norms"):
    a, b = cpu.get(key) or [], cuda.get(key) or []
    if len(a) != len(b):
        sys.exit(f"cuda_vs_cpu: {args.name}: {len(a)} {key} on the CPU, "
                 f"{len(b)} on the emulated GPU")
    for step, (x, y) in enumerate(zip(a, b), 1):
        if x is None or y is None:
            continue
        rel = abs(x - y) / max(abs(x), 1e-30)
        worst = max(worst, rel)
        if rel > args.tol:
            what = {"losses": "loss", "grad_norms": "gradient norm"}[key]
            sys.exit(f"cuda_vs_cpu: {args.name}: step {step} {what} "
                     f"{x!r} on the CPU, {y!r} on the emulated GPU: relative "
                     f"difference {rel:.2e} > {args.tol:g}")
for name, report in (("CPU", cpu), ("emulated GPU", cuda)):
    if report["arena_bytes_measured"] != report["arena_bytes_predicted"]:
        sys.exit(f"cuda_vs_cpu: {args.name}: {name} arena high-water mark "
                 f"{report['arena_bytes_measured']} bytes, predicted "
                 f"{report['arena_bytes_predicted']}")
print(f"cuda_vs_cpu: {args.name}: {len(cpu['losses'])} steps at "
      f"{args.ranks} rank(s), losses and grad norms within {args.tol:g} "
      f"(worst {worst:.1e}), arena {cuda['arena_bytes_measured']} bytes "
      f"as predicted")

#!/usr/bin/env python3
"""Predicted per-rank memory for the presets at N = 1, 8, 64, 512 ranks.

For gpt2-124m, llama-13b-shape and gpt3-175b-shape with one sequence per
rank (global batch N), runs the compiler up to --fsdp-shard and
--fsdp-memory-report (nothing is allocated) and prints, per rank: the
steady state next to the seed's 16P/N, the peak next to the seed's
16P/N + 4P/M (plus the report's activations and full-size gradient), and
the DDP baseline 16P measured in the same run. GB = 10^9 bytes.

Usage: bench/memory/run.py [--build build]
"""
import argparse
import os
import re
import subprocess
import sys

PRESETS = ("gpt2-124m", "llama-13b-shape", "gpt3-175b-shape")


def report(build, preset, n):
    gen = subprocess.run([os.path.join(build, "bin", "fsdp-gen"), "--preset",
                          preset, "--batch", str(n)],
                         check=True, capture_output=True, text=True).stdout
    out = subprocess.run(
        [os.path.join(build, "bin", "fsdp-opt"), f"--fsdp-mesh=shard={n}",
         "--fsdp-wrap", "--fsdp-data-parallel", "--fsdp-autodiff",
         "--fsdp-shard", "--fsdp-memory-report",
         "-o", os.devnull],
        input=gen, check=True, capture_output=True, text=True).stderr

    def value(label):
        m = re.search(rf"^  {re.escape(label)} +(\d+) bytes", out, re.M)
        return int(m.group(1))

    head = re.search(r"(\d+) units, (\d+) parameters", out)
    peak_line = re.search(r"^  peak +\d+ bytes .*?in the (\w+)", out, re.M)
    # The breakdown under the phase where the overall peak falls.
    section = out.split(f"  {peak_line.group(1)} peak")[1]
    part = lambda label: int(re.search(rf"^    {label} +(\d+) bytes",
                                        section, re.M).group(1))
    return dict(units=int(head.group(1)), P=int(head.group(2)),
                steady=value("steady state"), peak=value("peak"),
                gathered=value("largest gathered unit"),
                ddp=value("DDP baseline"), where=peak_line.group(1),
                activations=part("activations"),
                fullgrads=part("full-size gradients"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--build", default=os.path.join(root, "build"))
    args = parser.parse_args()
    gb = lambda b: b / 1e9
    print("per-rank memory, GB (10^9 bytes); one sequence per rank; "
          "P parameters, M units")
    cols = ("preset", "N", "steady", "16P/N", "peak", "activations",
            "full grads", "peak-act-grads", "16P/N+4P/M", "DDP 16P")
    print(" | ".join(f"{c:>14}" for c in cols))
    ok = True
    for preset in PRESETS:
        for n in (1, 8, 64, 512):
            r = report(args.build, preset, n)
            seed_steady = 16 * r["P"] / n
            seed_peak = seed_steady + 4 * r["P"] / r["units"]
            # Shards are ceil(P_u / N): at most 16 bytes per unit above 16P/N.
            ok &= 0 <= r["steady"] - seed_steady <= 16 * r["units"]
            cells = (preset, n, f"{gb(r['steady']):.3f}",
                     f"{gb(seed_steady):.3f}", f"{gb(r['peak']):.3f}",
                     f"{gb(r['activations']):.3f}",
                     f"{gb(r['fullgrads']):.3f}",
                     f"{gb(r['peak'] - r['activations'] - r['fullgrads']):.3f}",
                     f"{gb(seed_peak):.3f}", f"{gb(r['ddp']):.3f}")
            print(" | ".join(f"{c:>14}" for c in cells))
    print("peak-act-grads: the peak less its activations and full-size "
          "gradients, to compare with the seed's 16P/N + 4P/M (the gathered "
          "unit at the peak is the largest, not the mean, unit)")
    print("steady state = 16P/N up to the ceil(P_u/N) rounding of each "
          f"shard: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

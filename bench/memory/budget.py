#!/usr/bin/env python3
"""The compiler against a memory budget: for each preset, world size and
budget, compiles `fsdp-gen --preset P --batch N` with
--fsdp-train-pipeline="world-size=N memory-budget=B runtime=cuda" and
prints what --fsdp-fit-memory chose (attention's form, how many units it
recomputes in full and selectively), the peak per rank before (no
recomputation, materialized attention) and after (with the CUDA runtime's
share outside the arena), and the simulated step time on h100-nvlink
before and after; or, when nothing fits, the smallest reachable peak. The
compile time of each search is in the last column. GB = 10^9 bytes.
Usage: bench/memory/budget.py [--build build]
"""
import argparse
import os
import re
import subprocess
import sys
import time

CASES = [("llama-13b-shape", 8, "80GB"), ("llama-13b-shape", 8, "40GB"),
         ("llama-13b-shape", 8, "20GB"), ("llama-13b-shape", 64, "40GB"),
         ("gpt3-175b-shape", 64, "80GB"), ("gpt3-175b-shape", 512, "80GB"),
         ("gpt3-175b-shape", 512, "40GB"), ("gpt2-124m", 8, "2GB")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    print(f"{'preset':16} {'N':>4} {'budget':>7} {'attention':>12} "
          f"{'full':>5} {'sel':>4} {'none':>5} {'peak before':>12} "
          f"{'peak after':>11} {'step ms before':>15} {'after':>9} "
          f"{'search s':>9}")
    for preset, ranks, budget in CASES:
        ir = subprocess.run([os.path.join(bin_dir, "fsdp-gen"), "--preset",
                             preset, "--batch", str(ranks)], check=True,
                            capture_output=True, text=True).stdout
        start = time.perf_counter()
        r = subprocess.run(
            [os.path.join(bin_dir, "fsdp-opt"),
             f"--fsdp-train-pipeline=world-size={ranks} "
             f"memory-budget={budget} runtime=cuda", "-o", os.devnull],
            input=ir, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        err = r.stderr
        if r.returncode != 0:
            m = re.search(r"smallest peak reachable .* is (\d+) bytes", err)
            smallest = f"{int(m.group(1)) / 1e9:.1f} GB" if m else "?"
            print(f"{preset:16} {ranks:4} {budget:>7} does not fit: the "
                  f"smallest reachable peak is {smallest} {'':>30} "
                  f"{seconds:9.2f}")
            continue
        head = re.search(r"peak ([0-9.]+) GB \(arena.*simulated step "
                         r"([0-9.]+) ms on \S+ \(([0-9.+-]+) ms against .*peak "
                         r"([0-9.]+) GB\)", err)
        attention = re.search(r"attention: (\w+)", err).group(1)
        policies = re.findall(r"^  @\S+\s+(none|full|selective)\s", err, re.M)
        after_ms = float(head.group(2))
        print(f"{preset:16} {ranks:4} {budget:>7} {attention:>12} "
              f"{policies.count('full'):5} {policies.count('selective'):4} "
              f"{policies.count('none'):5} {float(head.group(4)):9.1f} GB "
              f"{float(head.group(1)):8.1f} GB "
              f"{after_ms - float(head.group(3)):15.1f} {after_ms:9.1f} "
              f"{seconds:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compile-time benchmark: fsdp-gen | fsdp-opt --fsdp-train-pipeline.

Times the gpt3-175b-shape preset at 12, 24, 48 and 96 layers (the preset has
96), each the median of several runs, next to a baseline measured in the same
run: fsdp-opt parsing, verifying and printing the same model with no pass.
The difference is what the passes themselves cost. Prints one table and
checks the targets: 96 layers in under 1 s, growth linear in layers.

Usage: bench/compile_time/run.py [--build build] [--repeat 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, stdin=None, stdout=subprocess.DEVNULL):
    start = time.perf_counter()
    subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                   check=True)
    return time.perf_counter() - start


def median_time(cmd, repeat, stdin_path=None):
    samples = []
    for _ in range(repeat):
        if stdin_path:
            with open(stdin_path) as f:
                samples.append(timed(cmd, stdin=f))
        else:
            samples.append(timed(cmd))
    return statistics.median(samples)


def count_train_step_ops(opt, model):
    out = subprocess.run([opt, model, "--fsdp-train-pipeline",
                          "--fsdp-summary", "-o", os.devnull],
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    for line in out.splitlines():
        if "func @train_step:" in line:
            return int(line.split(":")[1].split()[0])
    return -1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "build"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in (12, 24, 48, 96):
            model = os.path.join(tmp, f"gpt3-{layers}.mlir")
            gen_cmd = [gen, "--preset", "gpt3-175b-shape", "--layers",
                       str(layers), "-o", model]
            t_gen = median_time(gen_cmd, args.repeat)
            t_parse = median_time([opt, model], args.repeat)
            t_opt = median_time([opt, model, "--fsdp-train-pipeline"],
                                args.repeat)
            # The command the issue names, end to end through a pipe.
            pipe = (f"{gen} --preset gpt3-175b-shape --layers {layers} | "
                    f"{opt} --fsdp-train-pipeline > /dev/null")
            t_pipe = statistics.median(
                timed(["bash", "-c", "set -o pipefail; " + pipe])
                for _ in range(args.repeat))
            rows.append((layers, count_train_step_ops(opt, model),
                         os.path.getsize(model), t_gen, t_parse, t_opt,
                         t_pipe))

    print("fsdp-gen --preset gpt3-175b-shape --layers L | fsdp-opt "
          f"--fsdp-train-pipeline   (median of {args.repeat} runs)")
    header = ("layers", "train ops", "input KB", "gen ms", "parse+print ms",
              "pipeline ms", "passes ms", "gen|opt ms", "ms/layer")
    print("  ".join(f"{h:>14}" for h in header))
    for layers, ops, size, t_gen, t_parse, t_opt, t_pipe in rows:
        cells = (layers, ops, size // 1024, f"{t_gen*1e3:.1f}",
                 f"{t_parse*1e3:.1f}", f"{t_opt*1e3:.1f}",
                 f"{(t_opt - t_parse)*1e3:.1f}", f"{t_pipe*1e3:.1f}",
                 f"{t_pipe*1e3/layers:.2f}")
        print("  ".join(f"{c:>14}" for c in cells))

    # Linear growth: the per-layer slope between 12 and 96 layers predicts
    # the 48-layer time; compare with the measured one.
    (l0, *_, p0), (l1, *_, p1) = rows[0], rows[-1]
    slope = (p1 - p0) / (l1 - l0)
    intercept = p0 - slope * l0
    predicted48 = intercept + slope * 48
    measured48 = rows[2][-1]
    deviation = abs(measured48 - predicted48) / measured48
    print(f"\nlinear fit: {slope*1e3:.2f} ms/layer + {intercept*1e3:.1f} ms; "
          f"48 layers predicted {predicted48*1e3:.1f} ms, measured "
          f"{measured48*1e3:.1f} ms ({deviation*100:.1f}% off)")
    full = rows[-1][-1]
    ok_time = full < 1.0
    ok_linear = deviation < 0.25
    print(f"target 96 layers < 1 s: {'met' if ok_time else 'MISSED'} "
          f"({full*1e3:.0f} ms)")
    print(f"target linear growth:   {'met' if ok_linear else 'MISSED'}")
    return 0 if ok_time and ok_linear else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compile-time benchmark: fsdp-gen | fsdp-opt --fsdp-train-pipeline.

Times the gpt3-175b-shape preset (the preset has 96 layers) from 12 up to
4096 layers, each the median CPU time of several runs, next to a baseline measured
in the same run: fsdp-opt parsing, verifying and printing the same model
with no pass. The difference is what the passes themselves cost. Every op
count of the IR grows linearly with the layers, so a compiler that is
linear in the number of ops costs the same per layer at every depth.

Prints one table (with the cost per layer added since the previous row)
and checks the targets: 96 layers in under 1 s, and a flat cost per layer:
the marginal cost per layer of every row within a factor of 2 of the
median marginal cost (a quadratic pass would double it every row here).

Usage: bench/compile_time/run.py [--build build] [--repeat 5]
                                 [--layers 12,24,...,4096]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

DEFAULT_LAYERS = (12, 24, 48, 96, 192, 384, 768, 1536, 3072, 4096)


def timed(cmd, stdin=None, stdout=subprocess.DEVNULL):
    """CPU seconds (user + system) of `cmd` and every process it waited for.

    CPU time, not wall time: the development machine's two cores are
    shared, and other work there stretches wall time by up to 2x from one
    run to the next while leaving the CPU time of this one nearly alone.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                 before.ru_stime)


def median_time(cmd, repeat):
    return statistics.median(timed(cmd) for _ in range(repeat))


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
    parser.add_argument("--layers", default=",".join(map(str, DEFAULT_LAYERS)),
                        help="comma-separated layer counts, increasing")
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    layer_counts = [int(l) for l in args.layers.split(",")]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in layer_counts:
            model = os.path.join(tmp, f"gpt3-{layers}.mlir")
            gen_cmd = [gen, "--preset", "gpt3-175b-shape", "--layers",
                       str(layers), "-o", model]
            t_gen = median_time(gen_cmd, args.repeat)
            t_parse = median_time([opt, model, "-o", os.devnull], args.repeat)
            t_opt = median_time([opt, model, "--fsdp-train-pipeline", "-o",
                                 os.devnull], args.repeat)
            # The command the issue names, end to end through a pipe.
            pipe = (f"{gen} --preset gpt3-175b-shape --layers {layers} | "
                    f"{opt} --fsdp-train-pipeline > /dev/null")
            t_pipe = median_time(["bash", "-c", "set -o pipefail; " + pipe],
                                 args.repeat)
            rows.append((layers, count_train_step_ops(opt, model),
                         os.path.getsize(model), t_gen, t_parse, t_opt,
                         t_pipe))
            os.remove(model)

    print("fsdp-gen --preset gpt3-175b-shape --layers L | fsdp-opt "
          f"--fsdp-train-pipeline   (CPU ms, median of {args.repeat} runs)")
    header = ("layers", "train ops", "input KB", "gen ms", "parse+print ms",
              "pipeline ms", "passes ms", "gen|opt ms", "ms/layer",
              "added ms/layer")
    print("  ".join(f"{h:>14}" for h in header))
    marginals = []
    previous = None
    for layers, ops, size, t_gen, t_parse, t_opt, t_pipe in rows:
        # What each layer added since the previous row: the fixed cost
        # (process start-up, loading libMLIR) cancels out.
        added = ""
        if previous:
            marginal = (t_pipe - previous[1]) / (layers - previous[0])
            marginals.append((layers, marginal))
            added = f"{marginal*1e3:.2f}"
        previous = (layers, t_pipe)
        cells = (layers, ops, size // 1024, f"{t_gen*1e3:.1f}",
                 f"{t_parse*1e3:.1f}", f"{t_opt*1e3:.1f}",
                 f"{(t_opt - t_parse)*1e3:.1f}", f"{t_pipe*1e3:.1f}",
                 f"{t_pipe*1e3/layers:.2f}", added)
        print("  ".join(f"{c:>14}" for c in cells))

    # Flat per-layer cost: every marginal within 2x of the median one. The
    # rows at a few dozen layers differ by little time, so only intervals
    # of at least 48 added layers are judged (noise dominates below).
    judged = [(l, m) for (l, m), prev in zip(marginals, layer_counts)
              if l - prev >= 48]
    median = statistics.median(m for _, m in judged) if judged else 0.0
    worst = max(judged, key=lambda lm: abs(lm[1] / median - 1)) \
        if judged else (0, 0.0)
    print(f"\nadded cost per layer: median {median*1e3:.2f} ms over "
          f"{len(judged)} intervals; furthest from it {worst[1]*1e3:.2f} ms "
          f"(up to {worst[0]} layers)")
    at96 = [r for r in rows if r[0] == 96]
    ok_time = bool(at96) and at96[0][-1] < 1.0
    ok_flat = bool(judged) and all(0.5 * median <= m <= 2.0 * median
                                   for _, m in judged)
    if at96:
        print(f"target 96 layers < 1 s:   {'met' if ok_time else 'MISSED'} "
              f"({at96[0][-1]*1e3:.0f} ms)")
    print(f"target flat cost per layer: {'met' if ok_flat else 'MISSED'} "
          "(every interval within 2x of the median)")
    return 0 if ok_time and ok_flat else 1


if __name__ == "__main__":
    sys.exit(main())

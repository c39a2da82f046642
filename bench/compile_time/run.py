#!/usr/bin/env python3
"""Compile-time benchmark: fsdp-gen | fsdp-opt --fsdp-train-pipeline.

Times the gpt3-175b-shape preset (the preset has 96 layers) from 12 up to
4096 layers, each the median CPU time of several runs, next to a baseline measured
in the same run: fsdp-opt parsing, verifying and printing the same model
with no pass. The difference is what the passes themselves cost. Every op
count of the IR grows linearly with the layers, so a compiler that is
linear in the number of ops costs the same per layer at every depth.

Then the published Llamas, with the same columns and the same baseline:
the llama3-8b and llama-13b presets at their own depth (32 and 40 layers),
and llama3-8b from 32 up to 2048 layers (its RMSNorm, rope, grouped-query
attention and SwiGLU ops, its embedding and head in units of their own).

Prints one table per sweep (with the cost per layer added since the
previous row) and checks the targets: 96 layers of GPT-3 and each Llama
preset at its own depth in under 1 s, and a flat cost per layer in each
sweep: the marginal cost per layer of every row within a factor of 2 of
the sweep's median marginal cost (a quadratic pass would double it every
row here).

Usage: bench/compile_time/run.py [--build build] [--repeat 5]
                                 [--layers 12,24,...,4096]
                                 [--llama-layers 32,64,...,2048]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

DEFAULT_LAYERS = (12, 24, 48, 96, 192, 384, 768, 1536, 3072, 4096)
DEFAULT_LLAMA_LAYERS = (32, 64, 128, 256, 512, 1024, 2048)
# The published Llamas, timed at the depth their preset gives.
LLAMA_PRESETS = ("llama3-8b", "llama-13b")


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


def count_layers(model):
    """The blocks of a generated model: its units other than embed/head."""
    with open(model) as f:
        units = [l for l in f if l.lstrip().startswith("fsdp.unit ")]
    return sum(1 for u in units if u.split()[1] not in ("@embed", "@head"))


def measure(gen, opt, tmp, preset, layers, repeat):
    """One row: the preset at `layers` blocks (None: the preset's own)."""
    depth = [] if layers is None else ["--layers", str(layers)]
    model = os.path.join(tmp, f"{preset}-{layers}.mlir")
    gen_cmd = [gen, "--preset", preset] + depth + ["-o", model]
    t_gen = median_time(gen_cmd, repeat)
    if layers is None:
        layers = count_layers(model)
    t_parse = median_time([opt, model, "-o", os.devnull], repeat)
    t_opt = median_time([opt, model, "--fsdp-train-pipeline", "-o",
                         os.devnull], repeat)
    # The command the issue names, end to end through a pipe.
    pipe = (f"{gen} --preset {preset} {' '.join(depth)} | "
            f"{opt} --fsdp-train-pipeline > /dev/null")
    t_pipe = median_time(["bash", "-c", "set -o pipefail; " + pipe], repeat)
    row = (preset, layers, count_train_step_ops(opt, model),
           os.path.getsize(model), t_gen, t_parse, t_opt, t_pipe)
    os.remove(model)
    return row


def print_table(title, rows, first_column):
    """Prints rows; returns the added cost per layer between rows."""
    print(title)
    sweep = first_column == "layers"
    header = (first_column, "train ops", "input KB", "gen ms",
              "parse+print ms", "pipeline ms", "passes ms", "gen|opt ms",
              "ms/layer") + (("added ms/layer",) if sweep else ())
    width = 14 if sweep else 16
    print("  ".join(f"{h:>{width}}" for h in header))
    marginals = []
    previous = None
    for preset, layers, ops, size, t_gen, t_parse, t_opt, t_pipe in rows:
        # What each layer added since the previous row: the fixed cost
        # (process start-up, loading libMLIR) cancels out. Only within a
        # sweep of one preset.
        added = ""
        if previous and previous[0] == preset and sweep:
            marginal = (t_pipe - previous[2]) / (layers - previous[1])
            marginals.append((layers, layers - previous[1], marginal))
            added = f"{marginal*1e3:.2f}"
        previous = (preset, layers, t_pipe)
        first = layers if sweep else f"{preset} ({layers})"
        cells = (first, ops, size // 1024, f"{t_gen*1e3:.1f}",
                 f"{t_parse*1e3:.1f}", f"{t_opt*1e3:.1f}",
                 f"{(t_opt - t_parse)*1e3:.1f}", f"{t_pipe*1e3:.1f}",
                 f"{t_pipe*1e3/layers:.2f}") + ((added,) if sweep else ())
        print("  ".join(f"{c:>{width}}" for c in cells))
    return marginals


def judge_flat(marginals):
    """Every marginal within 2x of the median one. The rows at a few dozen
    layers differ by little time, so only intervals of at least 48 added
    layers are judged (noise dominates below)."""
    judged = [(l, m) for l, added, m in marginals if added >= 48]
    median = statistics.median(m for _, m in judged) if judged else 0.0
    worst = max(judged, key=lambda lm: abs(lm[1] / median - 1)) \
        if judged else (0, 0.0)
    print(f"\nadded cost per layer: median {median*1e3:.2f} ms over "
          f"{len(judged)} intervals; furthest from it {worst[1]*1e3:.2f} ms "
          f"(up to {worst[0]} layers)")
    ok = bool(judged) and all(0.5 * median <= m <= 2.0 * median
                              for _, m in judged)
    print(f"target flat cost per layer: {'met' if ok else 'MISSED'} "
          "(every interval within 2x of the median)")
    return ok


def layer_list(text):
    return [int(l) for l in text.split(",") if l]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    parser.add_argument("--build", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "build"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", default=",".join(map(str, DEFAULT_LAYERS)),
                        help="gpt3-175b-shape: comma-separated layer counts, "
                             "increasing")
    parser.add_argument("--llama-layers",
                        default=",".join(map(str, DEFAULT_LLAMA_LAYERS)),
                        help="llama3-8b: comma-separated layer counts, "
                             "increasing (empty: no Llama sweep)")
    args = parser.parse_args()
    gen = os.path.join(args.build, "bin", "fsdp-gen")
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    layer_counts = layer_list(args.layers)
    llama_counts = layer_list(args.llama_layers)

    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(gen, opt, tmp, "gpt3-175b-shape", layers, args.repeat)
                for layers in layer_counts]
        presets = [measure(gen, opt, tmp, preset, None, args.repeat)
                   for preset in LLAMA_PRESETS]
        llama_rows = [measure(gen, opt, tmp, "llama3-8b", layers, args.repeat)
                      for layers in llama_counts]

    unit = f"(CPU ms, median of {args.repeat} runs)"
    ok = True
    if rows:
        marginals = print_table("fsdp-gen --preset gpt3-175b-shape --layers L "
                                f"| fsdp-opt --fsdp-train-pipeline   {unit}",
                                rows, "layers")
        ok = judge_flat(marginals) and ok
        at96 = [r for r in rows if r[1] == 96]
        if at96:
            ok_time = at96[0][-1] < 1.0
            print(f"target 96 layers < 1 s:   {'met' if ok_time else 'MISSED'}"
                  f" ({at96[0][-1]*1e3:.0f} ms)")
            ok = ok_time and ok
        print()
    print_table("fsdp-gen --preset P | fsdp-opt --fsdp-train-pipeline   "
                f"(the preset's own depth) {unit}", presets, "preset (layers)")
    for preset, layers, *_, t_pipe in presets:
        ok_time = t_pipe < 1.0
        print(f"target {preset} ({layers} layers) < 1 s: "
              f"{'met' if ok_time else 'MISSED'} ({t_pipe*1e3:.0f} ms)")
        ok = ok_time and ok
    if llama_rows:
        print()
        marginals = print_table("fsdp-gen --preset llama3-8b --layers L | "
                                f"fsdp-opt --fsdp-train-pipeline   {unit}",
                                llama_rows, "layers")
        ok = judge_flat(marginals) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

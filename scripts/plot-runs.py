#!/usr/bin/env python3
"""Draws one or more `fsdp-run --report-json` files side by side: the loss
per step (and the validation loss where a report has one), tokens per
second, and memory per rank (the arena predicted and measured, the heap's
and the resident set's peaks where measured).

  scripts/plot-runs.py REPORT.json [REPORT.json ...] -o OUT.(png|svg|pdf)
      [--label NAME ...] [--start STEP ...] [--title TEXT]

--label names each run (default: the file's name); --start gives the step
of each run's first loss (default: the report's "first_step", else 1), so
that a resumed run is drawn on top of the uninterrupted one. Validation
losses are read from the key "validation", a list of {"step", "loss"}.

matplotlib is optional: where it is missing the script says how to
install it (Debian: apt-get install python3-matplotlib; or pip install
matplotlib) and exits with status 2. A report it cannot read is named with
the reason, status 1, and nothing is written.
"""
import argparse
import json
import math
import os
import sys
import tempfile


def fail(why, status=1):
    print("plot-runs: " + why, file=sys.stderr)
    sys.exit(status)


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_run(path, label, start):
    """The figures of one report, checked."""
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        fail("%s: cannot read it (%s)" % (path, e.strerror or e))
    except ValueError as e:
        fail("%s: not JSON (%s)" % (path, e))
    if not isinstance(report, dict):
        fail("%s: not an fsdp-run report (no JSON object)" % path)
    losses = report.get("losses")
    if not isinstance(losses, list) or not losses or \
            not all(v is None or number(v) for v in losses):
        fail("%s: not an fsdp-run report (no list of losses)" % path)
    validation = report.get("validation", [])
    if not isinstance(validation, list) or not all(
            isinstance(v, dict) and number(v.get("step")) and "loss" in v and
            (v["loss"] is None or number(v["loss"]))
            for v in validation):
        fail("%s: \"validation\" is not a list of {step, loss}" % path)
    first = start if start is not None else report.get("first_step", 1)
    if not number(first):
        fail("%s: first_step is not a number" % path)
    return {
        "label": label or os.path.basename(path),
        "steps": [first + i for i in range(len(losses))],
        "losses": [math.nan if v is None else v for v in losses],
        "validation": [(v["step"], math.nan if v["loss"] is None else v["loss"])
                       for v in validation],
        "tokens_per_s": report.get("tokens_per_s"),
        "memory": [(name, report.get(key)) for name, key in [
            ("arena predicted", "arena_bytes_predicted"),
            ("arena measured", "arena_bytes_measured"),
            ("heap peak", "heap_bytes_peak"),
            ("resident peak", "rss_bytes_peak")]],
    }


def draw(runs, out, title):
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "fsdp-plot-runs"  # stable ids
    import matplotlib.pyplot as plt

    fig, (loss, rate, memory) = plt.subplots(
        1, 3, figsize=(15, 4.5), gridspec_kw={"width_ratios": [2.2, 1, 1.4]})
    for i, run in enumerate(runs):
        color = "C%d" % i
        loss.plot(run["steps"], run["losses"], color=color, lw=1.2,
                  label=run["label"])
        if run["validation"]:
            steps, values = zip(*run["validation"])
            loss.plot(steps, values, color=color, marker="o", ls="--", ms=4,
                      label=run["label"] + " (validation)")
    loss.set_xlabel("step")
    loss.set_ylabel("loss")
    loss.set_title("loss per step")
    loss.grid(alpha=0.3)
    loss.legend(fontsize=8)

    names = [run["label"] for run in runs]
    rates = [run["tokens_per_s"] if number(run["tokens_per_s"]) else 0
             for run in runs]
    rate.bar(range(len(runs)), rates, color=["C%d" % i for i in range(len(runs))])
    rate.set_xticks(range(len(runs)), names, rotation=20, ha="right", fontsize=8)
    rate.set_ylabel("tokens/s")
    rate.set_title("throughput")
    rate.grid(alpha=0.3, axis="y")

    kinds = [name for name, _ in runs[0]["memory"]]
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        values = [v / 2**20 if number(v) else 0 for _, v in run["memory"]]
        memory.bar([k + i * width for k in range(len(kinds))], values, width,
                   color="C%d" % i, label=run["label"])
    memory.set_xticks([k + width * (len(runs) - 1) / 2 for k in range(len(kinds))],
                      kinds, rotation=20, ha="right", fontsize=8)
    memory.set_ylabel("MiB per rank (max over ranks)")
    memory.set_title("memory")
    memory.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    # Written beside OUT, then renamed: no half-written picture.
    directory = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=os.path.splitext(out)[1])
    os.close(fd)
    try:
        fig.savefig(tmp, metadata={"Date": None} if out.endswith(".svg")
                    else None, dpi=100)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is private
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    parser = argparse.ArgumentParser(
        description="Plot fsdp-run --report-json files side by side.")
    parser.add_argument("reports", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--label", action="append", default=[])
    parser.add_argument("--start", action="append", type=int, default=[])
    parser.add_argument("--title")
    a = parser.parse_args()
    if len(a.label) > len(a.reports) or len(a.start) > len(a.reports):
        parser.error("more --label or --start than reports")
    if os.path.splitext(a.output)[1] not in (".png", ".svg", ".pdf"):
        parser.error("the output must end in .png, .svg or .pdf")
    runs = [load_run(path,
                     a.label[i] if i < len(a.label) else None,
                     a.start[i] if i < len(a.start) else None)
            for i, path in enumerate(a.reports)]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail("matplotlib is not installed; install it with "
             "`apt-get install python3-matplotlib` (Debian) or "
             "`pip install matplotlib`", status=2)
    draw(runs, a.output, a.title)
    print("plot-runs: wrote %s (%d runs)" % (a.output, len(runs)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU check's table and verdicts, from the files check.sh wrote.

usage: summarize.py REFERENCE_JSON OUT_DIR
       summarize.py --row KEY REFERENCE_JSON OUT_DIR

--row prints, as soon as a stage of check.sh has ended, that stage's lines
of the table (prefixed with the model) or its PASS/FAIL checks, and always
exits 0; KEY is one of ROW_KEYS below. MFU there is against the default
peaks (the PyTorch runs, which report the GPU's, come later); the full
summary at the end recomputes it.

Prints one table (ms/step, tokens/s, MFU by the PaLM formula, peak device
memory next to the compiler's prediction) for our CUDA backend and PyTorch
eager on gpt2-124m, in TF32 and in bf16 mixed precision (our plan compiled
with param-dtype=bf16 reduce-dtype=f32 against torch.autocast(bfloat16),
eager and, where it compiled in time, torch.compile), then the checks:
kernel parity; the GPU's losses against the CPU backend's on the same
plans and data (fp32 GEMMs: the two differ only by summation order, so
they agree to well under 1e-3 relative for the steps checked; bf16: the
CPU rounds as the GPU does, but a summation order that flips one bf16
rounding moves the loss by more, hence a looser tolerance); and our bf16
losses against our fp32 ones over the same steps (a sanity bound: mixed
precision must train like fp32 over a few steps); and gpt2-124m's peak
device memory (TF32, bf16) against the compiler's arena plus outside-the-
arena figure, at most it and within MEMORY_TOL, with the bytes each setup
stage took (the run report's device_stages). Exits 1 when a check
fails, 0 otherwise; whether our step time beats PyTorch's is reported, not
enforced.

Then, where prepare.sh compiled the Llama (reference.json has
"llama-124m-shape"), a second table: llama-124m (a GPT-2-124M-sized Llama)
on our CUDA backend, TF32 and bf16, against bench/gpu/torch_llama.py
(PyTorch eager, manual and sdpa attention, TF32 and autocast bf16, and
torch.compile where it ran in time), MFU by 6 (N - V C) + 12 L H hs T
FLOPs per token (the token embedding is a lookup); and its checks: the
tiny Llama's GPU losses against the CPU's (fp32, bf16), llama-124m's fp32
losses against the CPU's, our bf16 losses against our TF32 ones, the
PyTorch Llama's losses from our initial values against the CPU's
(torch_llama.py --equivalence), and PyTorch's parameter count against the
plan's. A plans directory without
the Llama prints one SKIP line instead and fails nothing.
"""
import json
import os
import re
import sys

LOSS_TOL = {"tiny": 5e-3, "gpt2-124m": 2e-3, "tiny-bf16": 3e-2,
            "tiny-llama": 5e-3, "llama-124m": 2e-3, "tiny-llama-bf16": 3e-2}
# bf16 against fp32, the same plan and data: the largest relative
# difference of a step's loss.
MIXED_TOL = 5e-2
# The timed TF32 runs (TF32 GEMMs, the blocked attention on TF32 tensor
# cores) against the CPU's fp32 losses over the CPU's first steps (3 of
# gpt2-124m, 2 of llama-124m). With the attention in fp32 FMAs gpt2-124m
# was 2.4e-6 off (2026-12-04); a mean over 4096 tokens averages TF32's
# rounding out, so 2e-4 leaves room for the tensor cores and still
# catches a wrong tile.
FIRST_STEPS = {"gpt2-124m TF32": 2e-4, "llama-124m TF32": 2e-4}
LOSS_TOL.update(FIRST_STEPS)
PEAK_BF16 = 989.4  # dense bf16, H100/H200 SXM, TFLOP/s


QUIET = False  # --row: a missing file shows as "missing run" / "no result"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        if not QUIET or not isinstance(e, FileNotFoundError):
            print(f"summarize: {path}: {e}")
        return None


def flops_per_step(shape):
    # PaLM / nanoGPT: 6 N + 12 L NH hs T per token (N: all parameters).
    L, C, V, T, B = (shape[k] for k in ("layers", "dim", "vocab", "seq",
                                        "batch"))
    n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return (6 * n + 12 * L * C * T) * B * T


def llama_flops_per_step(shape):
    # 6 N' + 12 L H hs T per token, N' = all parameters less the token
    # embedding (torch_llama.py's flops_per_token).
    L, C, H, V, T, B = (shape[k] for k in ("layers", "dim", "heads", "vocab",
                                           "seq", "batch"))
    return (6 * (shape["params"] - V * C) + 12 * L * C * T) * B * T


def compare(name, ours, ref, tol=None, what="GPU vs CPU"):
    tol = LOSS_TOL[name] if tol is None else tol
    if not ours or not ref:
        return False, f"{name}: missing run"
    a, b = ours["losses"], ref["losses"][:len(ours["losses"])]
    if name in FIRST_STEPS:  # a longer timed run against the CPU's steps
        a = a[:len(b)]
    if len(a) != len(b) or not a or any(x is None for x in a):
        return False, f"{name}: losses missing or not finite: {a}"
    worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
    ok = worst <= tol
    return ok, (f"{name}: {len(a)} steps, {what} loss max rel diff "
                f"{worst:.2e} (tolerance {tol:.0e}); first "
                f"{a[0]:.6f} vs {b[0]:.6f}, last {a[-1]:.6f} vs {b[-1]:.6f}")


def our_row(name, run, flops, peak):
    ms = run["ms_per_step"]
    return (name, ms, run["tokens_per_s"], flops / (ms * 1e-3) / (peak * 1e12),
            f"{run['arena_bytes_measured'] / 2**30:.2f} GiB arena high-water",
            f"{run['arena_bytes_predicted'] / 2**30:.2f} GiB")


MEMORY_TOL = 0.05  # the device's peak against the compiler's figure


def device_memory(name, run):
    """The device's peak (its total less its free bytes) against the
    compiler's arena plus outside-the-arena prediction: at most the
    prediction, and within MEMORY_TOL of it; with the setup stages."""
    if not run or "device_bytes_peak" not in run:
        return False, f"{name} device memory: not measured"
    measured = run["device_bytes_peak"]
    predicted = (run["arena_bytes_predicted"] +
                 run["outside_arena_bytes_predicted"])
    ok = measured <= predicted <= measured * (1 + MEMORY_TOL)
    stages = run.get("device_stages", [])
    grown = [(s["stage"], s["bytes_in_use"] - (stages[i - 1]["bytes_in_use"]
                                               if i else 0))
             for i, s in enumerate(stages)]
    return ok, (f"{name} device memory: peak {measured / 2**20:,.1f} MiB, "
                f"predicted {predicted / 2**20:,.1f} MiB (at most, within "
                f"{MEMORY_TOL:.0%}); by stage: " +
                (", ".join(f"{n} {b / 2**20:+,.1f}" for n, b in grown) or
                 "none reported"))


def torch_row(name, run, flops):
    ms = run["ms_per_step_median"]
    return (name, ms, run["tokens_per_s"],
            flops / (ms * 1e-3) / (run["peak_tflops"] * 1e12),
            f"{run['peak_allocated_bytes'] / 2**30:.2f} GiB allocated", "-")


def table_rows(out, flops):
    """Ours and PyTorch's, TF32 then bf16; and the runs by name."""
    ours = load(os.path.join(out, "gpt2-124m-tf32.json"))
    ours_bf16 = load(os.path.join(out, "gpt2-124m-bf16.json"))
    names = ("manual", "sdpa", "manual-bf16", "sdpa-bf16", "compile-bf16")
    torch = {n: load(os.path.join(out, f"torch-{n}.json")) for n in names}
    peak = next((torch[n]["peak_tflops"] for n in ("manual", "sdpa")
                 if torch[n]), 494.7)
    peak_bf16 = next((torch[n]["peak_tflops"] for n in names[2:]
                      if torch[n]), PEAK_BF16)
    rows = []
    if ours:
        rows.append(our_row("fsdp-run --backend cuda (TF32)", ours, flops,
                            peak))
    for n in ("manual", "sdpa"):
        if torch[n]:
            rows.append(torch_row(f"PyTorch eager, {n} attention (TF32)",
                                  torch[n], flops))
    if ours_bf16:
        rows.append(our_row("fsdp-run --backend cuda (bf16 params, f32 "
                            "reduce)", ours_bf16, flops, peak_bf16))
    for n, label in (("manual-bf16", "PyTorch eager, manual attention"),
                     ("sdpa-bf16", "PyTorch eager, sdpa attention"),
                     ("compile-bf16", "torch.compile, sdpa attention")):
        if torch[n]:
            rows.append(torch_row(f"{label} (autocast bf16)", torch[n], flops))
    return rows, ours, ours_bf16, torch


def targets(ours, ours_bf16, torch):
    """Our step time against PyTorch's (reported, not enforced)."""
    pairs = [("TF32", ours, "manual", "PyTorch eager"),
             ("bf16", ours_bf16, "manual-bf16", "PyTorch eager autocast"),
             ("bf16", ours_bf16, "sdpa-bf16", "PyTorch eager autocast sdpa"),
             ("bf16", ours_bf16, "compile-bf16", "torch.compile autocast")]
    for kind, mine, name, label in pairs:
        if mine and torch.get(name):
            ratio = mine["ms_per_step"] / torch[name]["ms_per_step_median"]
            print(f"target ({kind} step time at or below {label}'s): "
                  f"{'met' if ratio <= 1 else 'NOT met'} ({ratio:.2f}x)")


LLAMA_TORCH = (("manual", "PyTorch eager, manual attention (TF32)"),
               ("sdpa", "PyTorch eager, sdpa attention (TF32)"),
               ("manual-bf16", "PyTorch eager, manual attention (autocast bf16)"),
               ("sdpa-bf16", "PyTorch eager, sdpa attention (autocast bf16)"),
               ("compile-bf16", "torch.compile, sdpa attention (autocast bf16)"))


def llama_section(ref, out):
    """Prints the Llama's table; returns its checks and target lines."""
    shape = ref.get("llama-124m-shape")
    if not shape:
        print("\nSKIP llama-124m: reference.json has no \"llama-124m-shape\" "
              "(prepare.sh predates the Llama or could not compile it)")
        return [], []
    flops = llama_flops_per_step(shape)
    ours = load(os.path.join(out, "llama-124m-tf32.json"))
    ours_bf16 = load(os.path.join(out, "llama-124m-bf16.json"))
    torch = {n: load(os.path.join(out, f"torch-llama-{n}.json"))
             for n, _ in LLAMA_TORCH}
    peak = next((torch[n]["peak_tflops"] for n in ("manual", "sdpa")
                 if torch[n]), 494.7)
    peak_bf16 = next((torch[n]["peak_tflops"] for n, _ in LLAMA_TORCH[2:]
                      if torch[n]), PEAK_BF16)
    rows = []
    if ours:
        rows.append(our_row("fsdp-run --backend cuda (TF32)", ours, flops,
                            peak))
    rows += [torch_row(label, torch[n], flops) for n, label in LLAMA_TORCH[:2]
             if torch[n]]
    if ours_bf16:
        rows.append(our_row("fsdp-run --backend cuda (bf16 params, f32 "
                            "reduce)", ours_bf16, flops, peak_bf16))
    rows += [torch_row(label, torch[n], flops) for n, label in LLAMA_TORCH[2:]
             if torch[n]]
    print(f"\nllama-124m ({shape['layers']} layers, dim {shape['dim']}, "
          f"{shape['heads']} heads, {shape['kv_heads']} kv heads, ffn "
          f"{shape['ffn_dim']}, vocab {shape['vocab']}, untied head; "
          f"{shape['params']:,} parameters), batch {shape['batch']} x "
          f"{shape['seq']} tokens, one GPU; MFU as above, FLOPs 6 (N - V C) "
          f"+ 12 L H hs T per token; {flops / 1e12:.2f} TFLOP/step")
    print("| run | ms/step | tokens/s | MFU | peak device memory | compiler's prediction |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(format_row(*row))

    checks = []
    for name in ("tiny-llama", "tiny-llama-bf16"):
        if name in ref:
            checks.append(compare(name, load(os.path.join(
                out, f"{name}-cuda.json")), ref[name]))
    checks.append(compare("llama-124m",
                          load(os.path.join(out, "llama-124m-fp32.json")),
                          ref.get("llama-124m")))
    if "tiny-llama-bf16" in ref:
        checks.append(compare("tiny-llama bf16 vs fp32",
                              load(os.path.join(out, "tiny-llama-bf16-cuda.json")),
                              load(os.path.join(out, "tiny-llama-cuda.json")),
                              MIXED_TOL, "GPU bf16 vs GPU fp32"))
    checks.append(compare("llama-124m bf16 vs TF32", ours_bf16, ours,
                          MIXED_TOL, "GPU bf16 vs GPU TF32"))
    checks.append(compare("llama-124m TF32", ours, ref.get("llama-124m"),
                          what="GPU TF32 vs CPU fp32"))
    if "tiny-llama-shape" in ref:
        eq = load(os.path.join(out, "torch-llama-equivalence.json"))
        checks.append((bool(eq) and eq["ok"],
                       "tiny-llama PyTorch (our initial values, our batches, "
                       "fp32) vs CPU: " + (
                           f"{len(eq['losses'])} steps, loss max rel diff "
                           f"{eq['max_rel_diff']:.2e} (tolerance "
                           f"{eq['tolerance']:.0e}; step 1 "
                           f"{eq['step1_rel_diff']:.2e})" if eq else
                           "missing run")))
    counts = {t["params"] for t in torch.values() if t}
    if counts:
        checks.append((counts == {shape["params"]},
                       f"llama-124m parameters: PyTorch {sorted(counts)}, "
                       f"the plan {shape['params']}"))
    else:
        checks.append((False, "llama-124m parameters: no PyTorch run"))
    pairs = [("TF32", ours, "manual", "PyTorch eager"),
             ("TF32", ours, "sdpa", "PyTorch eager sdpa"),
             ("bf16", ours_bf16, "manual-bf16", "PyTorch eager autocast"),
             ("bf16", ours_bf16, "sdpa-bf16", "PyTorch eager autocast sdpa"),
             ("bf16", ours_bf16, "compile-bf16", "torch.compile autocast")]
    targets = []
    for kind, mine, name, label in pairs:
        if mine and torch.get(name):
            ratio = mine["ms_per_step"] / torch[name]["ms_per_step_median"]
            targets.append(f"llama target ({kind} step time at or below "
                           f"{label}'s): {'met' if ratio <= 1 else 'NOT met'} "
                           f"({ratio:.2f}x)")
    return checks, targets


def format_row(name, ms, tps, mfu, mem, pred):
    return (f"| {name} | {ms:.1f} | {tps:,.0f} | {100 * mfu:.1f}% | {mem} "
            f"| {pred} |")


def check_line(ok, text):
    return ("PASS " if ok else "FAIL ") + text


def row_lines(key, ref, out):
    """One stage's lines for check.sh, printed when the stage ends."""
    shape = ref.get("gpt2-124m-shape", {"layers": 12, "dim": 768,
                                        "vocab": 50257, "seq": 1024,
                                        "batch": 4})
    flops = flops_per_step(shape)
    path = lambda name: os.path.join(out, name)
    lines = []
    if key == "parity":
        try:
            parity = open(path("parity.log")).read()
        except OSError:
            parity = ""
        m = re.search(r"cuda-kernels: (\d+) passed, (\d+) failed", parity)
        lines.append(check_line(bool(m) and m.group(2) == "0"
                                and "parity exit: 0" in parity,
                                "kernel parity: " + (m.group(0) if m else
                                                     "no result")))
    elif key == "tiny":
        lines.append(check_line(*compare("tiny", load(path("tiny-cuda.json")),
                                         ref.get("tiny"))))
    elif key == "gpt2-124m-fp32":
        lines.append(check_line(*compare(
            "gpt2-124m", load(path("gpt2-124m-fp32.json")),
            ref.get("gpt2-124m"))))
    elif key in ("gpt2-124m-tf32", "gpt2-124m-bf16"):
        run = load(path(key + ".json"))
        if run:
            bf16 = key.endswith("bf16")
            label = ("fsdp-run --backend cuda (bf16 params, f32 reduce)"
                     if bf16 else "fsdp-run --backend cuda (TF32)")
            lines.append(format_row(*our_row(
                "gpt2-124m: " + label, run, flops,
                PEAK_BF16 if bf16 else 494.7)))
            if bf16:
                lines.append(check_line(*compare(
                    "gpt2-124m bf16 vs TF32", run,
                    load(path("gpt2-124m-tf32.json")), MIXED_TOL,
                    "GPU bf16 vs GPU TF32")))
            else:
                lines.append(check_line(*compare(
                    "gpt2-124m TF32", run, ref.get("gpt2-124m"),
                    what="GPU TF32 vs CPU fp32")))
            lines.append(check_line(*device_memory(key, run)))
    elif key == "tiny-bf16":
        tiny_bf16 = load(path("tiny-bf16-cuda.json"))
        lines.append(check_line(*compare("tiny-bf16", tiny_bf16,
                                         ref.get("tiny-bf16"))))
        lines.append(check_line(*compare(
            "tiny bf16 vs fp32", tiny_bf16, load(path("tiny-cuda.json")),
            MIXED_TOL, "GPU bf16 vs GPU fp32")))
    elif key in ("tiny-llama", "tiny-llama-bf16"):
        lines.append(check_line(*compare(key, load(path(key + "-cuda.json")),
                                         ref.get(key))))
    elif key == "llama-124m-fp32":
        lines.append(check_line(*compare(
            "llama-124m", load(path("llama-124m-fp32.json")),
            ref.get("llama-124m"))))
    elif key in ("llama-124m-tf32", "llama-124m-bf16"):
        run = load(path(key + ".json"))
        lshape = ref.get("llama-124m-shape")
        if run and lshape:
            bf16 = key.endswith("bf16")
            label = ("fsdp-run --backend cuda (bf16 params, f32 reduce)"
                     if bf16 else "fsdp-run --backend cuda (TF32)")
            lines.append(format_row(*our_row(
                "llama-124m: " + label, run, llama_flops_per_step(lshape),
                PEAK_BF16 if bf16 else 494.7)))
            if not bf16:
                lines.append(check_line(*compare(
                    "llama-124m TF32", run, ref.get("llama-124m"),
                    what="GPU TF32 vs CPU fp32")))
    elif key.startswith("torch-llama"):
        lshape = ref.get("llama-124m-shape")
        names = [n for n, _ in LLAMA_TORCH]
        if key != "torch-llama":
            names = [key[len("torch-llama-"):]]
        for n, label in LLAMA_TORCH:
            run = load(path(f"torch-llama-{n}.json")) if n in names and \
                os.path.exists(path(f"torch-llama-{n}.json")) else None
            if run and lshape:
                lines.append(format_row(*torch_row(
                    "llama-124m: " + label, run, llama_flops_per_step(lshape))))
        eq_path = path("torch-llama-equivalence.json")
        if key == "torch-llama" and os.path.exists(eq_path):
            eq = load(eq_path)
            if eq:
                lines.append(check_line(
                    eq["ok"], "tiny-llama PyTorch (our initial values) vs "
                    f"CPU: max rel diff {eq['max_rel_diff']:.2e} "
                    f"(tolerance {eq['tolerance']:.0e})"))
    elif key.startswith("torch-"):
        n = key[len("torch-"):]
        labels = {"manual": "PyTorch eager, manual attention (TF32)",
                  "sdpa": "PyTorch eager, sdpa attention (TF32)",
                  "manual-bf16": "PyTorch eager, manual attention "
                                 "(autocast bf16)",
                  "sdpa-bf16": "PyTorch eager, sdpa attention (autocast bf16)",
                  "compile-bf16": "torch.compile, sdpa attention "
                                  "(autocast bf16)"}
        run = load(path(key + ".json")) if n in labels and \
            os.path.exists(path(key + ".json")) else None
        if run:
            lines.append(format_row(*torch_row("gpt2-124m: " + labels[n], run,
                                               flops)))
    else:
        lines.append(f"summarize: unknown row {key!r} (one of "
                     f"{', '.join(ROW_KEYS)})")
    if not lines:
        lines.append(f"{key}: no result")
    return lines


ROW_KEYS = ("parity", "tiny", "gpt2-124m-fp32", "gpt2-124m-tf32", "tiny-bf16",
            "gpt2-124m-bf16", "tiny-llama", "tiny-llama-bf16",
            "llama-124m-fp32", "llama-124m-tf32", "llama-124m-bf16",
            "torch-manual", "torch-sdpa", "torch-manual-bf16",
            "torch-sdpa-bf16", "torch-compile-bf16", "torch-llama",
            "torch-llama-compile-bf16")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--row":
        global QUIET
        QUIET = True
        ref = load(sys.argv[3]) or {}
        for line in row_lines(sys.argv[2], ref, sys.argv[4]):
            print("row: " + line)
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ref = load(sys.argv[1]) or {}
    out = sys.argv[2]
    shape = ref.get("gpt2-124m-shape", {"layers": 12, "dim": 768, "vocab": 50257,
                                        "seq": 1024, "batch": 4})
    flops = flops_per_step(shape)
    rows, ours, ours_bf16, torch = table_rows(out, flops)
    print(f"\ngpt2-124m, batch {shape['batch']} x {shape['seq']} tokens, one "
          f"GPU; MFU against the dense TF32 peak for TF32 rows, the bf16 "
          f"peak for bf16 rows; {flops / 1e12:.2f} TFLOP/step")
    print("| run | ms/step | tokens/s | MFU | peak device memory | compiler's prediction |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(format_row(*row))

    checks = []
    parity = ""
    try:
        parity = open(os.path.join(out, "parity.log")).read()
    except OSError:
        pass
    m = re.search(r"cuda-kernels: (\d+) passed, (\d+) failed", parity)
    checks.append((bool(m) and m.group(2) == "0" and "parity exit: 0" in parity,
                   "kernel parity: " + (m.group(0) if m else "no result")))
    checks.append(compare("tiny", load(os.path.join(out, "tiny-cuda.json")),
                          ref.get("tiny")))
    checks.append(compare("gpt2-124m",
                          load(os.path.join(out, "gpt2-124m-fp32.json")),
                          ref.get("gpt2-124m")))
    tiny_bf16 = load(os.path.join(out, "tiny-bf16-cuda.json"))
    checks.append(compare("tiny-bf16", tiny_bf16, ref.get("tiny-bf16")))
    checks.append(compare("tiny bf16 vs fp32", tiny_bf16,
                          load(os.path.join(out, "tiny-cuda.json")),
                          MIXED_TOL, "GPU bf16 vs GPU fp32"))
    checks.append(compare("gpt2-124m bf16 vs TF32", ours_bf16, ours,
                          MIXED_TOL, "GPU bf16 vs GPU TF32"))
    checks.append(compare("gpt2-124m TF32", ours, ref.get("gpt2-124m"),
                          what="GPU TF32 vs CPU fp32"))
    checks.append(device_memory("gpt2-124m-tf32", ours))
    checks.append(device_memory("gpt2-124m-bf16", ours_bf16))
    llama_checks, llama_targets = llama_section(ref, out)
    print()
    for ok, text in checks + llama_checks:
        print(("PASS " if ok else "FAIL ") + text)
    targets(ours, ours_bf16, torch)
    for line in llama_targets:
        print(line)
    sys.exit(0 if all(ok for ok, _ in checks + llama_checks) else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU check's table and verdicts, from the files check.sh wrote.

usage: summarize.py REFERENCE_JSON OUT_DIR

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
precision must train like fp32 over a few steps). Exits 1 when a check
fails, 0 otherwise; whether our step time beats PyTorch's is reported, not
enforced.
"""
import json
import os
import re
import sys

LOSS_TOL = {"tiny": 5e-3, "gpt2-124m": 2e-3, "tiny-bf16": 3e-2}
# bf16 against fp32, the same plan and data: the largest relative
# difference of a step's loss.
MIXED_TOL = 5e-2
PEAK_BF16 = 989.4  # dense bf16, H100/H200 SXM, TFLOP/s


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize: {path}: {e}")
        return None


def flops_per_step(shape):
    # PaLM / nanoGPT: 6 N + 12 L NH hs T per token (N: all parameters).
    L, C, V, T, B = (shape[k] for k in ("layers", "dim", "vocab", "seq",
                                        "batch"))
    n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return (6 * n + 12 * L * C * T) * B * T


def compare(name, ours, ref, tol=None, what="GPU vs CPU"):
    tol = LOSS_TOL[name] if tol is None else tol
    if not ours or not ref:
        return False, f"{name}: missing run"
    a, b = ours["losses"], ref["losses"][:len(ours["losses"])]
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


def main():
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
    for name, ms, tps, mfu, mem, pred in rows:
        print(f"| {name} | {ms:.1f} | {tps:,.0f} | {100 * mfu:.1f}% | {mem} | {pred} |")

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
    print()
    for ok, text in checks:
        print(("PASS " if ok else "FAIL ") + text)
    targets(ours, ours_bf16, torch)
    sys.exit(0 if all(ok for ok, _ in checks) else 1)


if __name__ == "__main__":
    main()

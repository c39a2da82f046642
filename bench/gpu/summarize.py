#!/usr/bin/env python3
"""The GPU check's table and verdicts, from the files check.sh wrote.

usage: summarize.py REFERENCE_JSON OUT_DIR

Prints one table (ms/step, tokens/s, MFU by the PaLM formula, peak device
memory next to the compiler's prediction) for our CUDA backend and PyTorch
eager on gpt2-124m, then the checks: kernel parity, and the GPU's losses
against the CPU backend's on the same plans and data (fp32 GEMMs: the two
differ only by summation order, so they agree to well under 1e-3 relative
for the steps checked). Exits 1 when a check fails, 0 otherwise; whether
our step time beats PyTorch's is reported, not enforced.
"""
import json
import os
import re
import sys

LOSS_TOL = {"tiny": 5e-3, "gpt2-124m": 2e-3}


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


def compare(name, ours, ref):
    if not ours or not ref:
        return False, f"{name}: missing run"
    a, b = ours["losses"], ref["losses"][:len(ours["losses"])]
    if len(a) != len(b) or not a or any(x is None for x in a):
        return False, f"{name}: losses missing or not finite: {a}"
    worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
    ok = worst <= LOSS_TOL[name]
    return ok, (f"{name}: {len(a)} steps, GPU vs CPU loss max rel diff "
                f"{worst:.2e} (tolerance {LOSS_TOL[name]:.0e}); first "
                f"{a[0]:.6f} vs {b[0]:.6f}, last {a[-1]:.6f} vs {b[-1]:.6f}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ref = load(sys.argv[1]) or {}
    out = sys.argv[2]
    shape = ref.get("gpt2-124m-shape", {"layers": 12, "dim": 768, "vocab": 50257,
                                        "seq": 1024, "batch": 4})
    ours = load(os.path.join(out, "gpt2-124m-tf32.json"))
    torch_runs = [(name, load(os.path.join(out, f"torch-{name}.json")))
                  for name in ("manual", "sdpa")]
    peak = next((t["peak_tflops"] for _, t in torch_runs if t), 494.7)
    flops = flops_per_step(shape)

    rows = []
    if ours:
        ms = ours["ms_per_step"]
        rows.append(("fsdp-run --backend cuda (TF32)", ms,
                     ours["tokens_per_s"], flops / (ms * 1e-3) / (peak * 1e12),
                     f"{ours['arena_bytes_measured'] / 2**30:.2f} GiB arena "
                     f"high-water", f"{ours['arena_bytes_predicted'] / 2**30:.2f} GiB"))
    for name, t in torch_runs:
        if t:
            rows.append((f"PyTorch eager, {name} attention (TF32)",
                         t["ms_per_step_median"], t["tokens_per_s"],
                         flops / (t["ms_per_step_median"] * 1e-3) / (peak * 1e12),
                         f"{t['peak_allocated_bytes'] / 2**30:.2f} GiB allocated",
                         "-"))
    print(f"\ngpt2-124m, batch {shape['batch']} x {shape['seq']} tokens, one "
          f"GPU; MFU against {peak} TFLOP/s, {flops / 1e12:.2f} TFLOP/step")
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
    print()
    for ok, text in checks:
        print(("PASS " if ok else "FAIL ") + text)
    torch_manual = dict(torch_runs).get("manual")
    if ours and torch_manual:
        ratio = ours["ms_per_step"] / torch_manual["ms_per_step_median"]
        print(f"target (step time at or below PyTorch eager's): "
              f"{'met' if ratio <= 1 else 'NOT met'} ({ratio:.2f}x PyTorch's)")
    sys.exit(0 if all(ok for ok, _ in checks) else 1)


if __name__ == "__main__":
    main()

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
    for name, ms, tps, mfu, mem, pred in rows:
        print(f"| {name} | {ms:.1f} | {tps:,.0f} | {100 * mfu:.1f}% | {mem} | {pred} |")

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

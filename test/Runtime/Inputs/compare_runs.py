"""Compares fsdp-run logs and exported weights of the same model trained at
several world sizes: losses step by step within a relative tolerance, and
the final full parameters (gathered from the ranks, written by --export as
safetensors, by either naming) within a tolerance.

usage: compare_runs.py [--param-tol TOL] [--param-norm TOL]
                       REL_TOL LOG0 WEIGHTS0 [LOG WEIGHTS]...
The first pair is the reference (world size 1). The losses agree within
REL_TOL (relative), step by step. --param-tol: each parameter's largest
element difference over the parameter's largest magnitude within TOL
(default 100 REL_TOL: AdamW divides by the root of a gradient's second
moment, so a last-bit difference in a near-zero gradient can move one
element by a good part of lr). --param-norm: also each parameter's
difference in the 2-norm, over its 2-norm, within TOL.
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402


def losses(path):
    found = [float(m.group(1)) for m in re.finditer(
        r"^step +\d+/\d+ \| loss ([0-9.e+-]+)", open(path).read(), re.M)]
    if not found:
        sys.exit(f"compare_runs: no losses in {path}")
    return found


def params(path):
    """Every tensor of an --export file by name, as f32 values."""
    tensors, _ = st.read(path)
    if not tensors:
        sys.exit(f"compare_runs: {path} holds no tensors")
    return {name: st.floats(dtype, raw) for name, dtype, _, raw in tensors}


args = sys.argv[1:]
param_tol, norm_tol = None, None
while args[:1] in (["--param-tol"], ["--param-norm"]):
    if args[0] == "--param-tol":
        param_tol = float(args[1])
    else:
        norm_tol = float(args[1])
    args = args[2:]
tol = float(args[0])
if param_tol is None:
    param_tol = 100 * tol
runs = list(zip(args[1::2], args[2::2]))
ref_loss, ref_params = losses(runs[0][0]), params(runs[0][1])
failed = False
for log, dump in runs[1:]:
    got = losses(log)
    if len(got) != len(ref_loss):
        sys.exit(f"compare_runs: {log} has {len(got)} steps, "
                 f"reference {len(ref_loss)}")
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(got, ref_loss))
    got_params = params(dump)
    worst_param, worst_norm, norm_name = 0.0, 0.0, ""
    if set(got_params) != set(ref_params):
        sys.exit(f"compare_runs: {dump} has tensors "
                 f"{sorted(set(got_params) ^ set(ref_params))} that "
                 f"{runs[0][1]} has not, or the other way round")
    for name, ref in ref_params.items():
        values = got_params[name]
        scale = max(1e-3, max(abs(v) for v in ref))
        worst_param = max(worst_param, max(abs(a - b) for a, b in
                                           zip(values, ref)) / scale)
        norm = math.sqrt(sum(a * a for a in ref))
        diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(values, ref)))
        if diff / max(norm, 1e-30) > worst_norm:
            worst_norm, norm_name = diff / max(norm, 1e-30), name
    ok = worst_loss <= tol and worst_param <= param_tol
    norm_text = ""
    if norm_tol is not None:
        ok &= worst_norm <= norm_tol
        norm_text = f", in norm {worst_norm:.2e} ({norm_name})"
    failed |= not ok
    print(f"compare_runs: {log}: worst loss rel diff {worst_loss:.2e}, "
          f"worst parameter diff {worst_param:.2e}{norm_text} "
          f"{'ok' if ok else 'FAILED'}")
sys.exit(1 if failed else 0)

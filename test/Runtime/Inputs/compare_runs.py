"""Compares fsdp-run logs and parameter dumps of the same model trained at
several world sizes: losses step by step within a relative tolerance, and
the final full parameters (gathered from the ranks) within a tolerance.

usage: compare_runs.py [--param-tol TOL] [--param-norm TOL]
                       REL_TOL LOG0 PARAMS0 [LOG PARAMS]...
The first pair is the reference (world size 1). The losses agree within
REL_TOL (relative), step by step. --param-tol: each parameter's largest
element difference over the parameter's largest magnitude within TOL
(default 100 REL_TOL: AdamW divides by the root of a gradient's second
moment, so a last-bit difference in a near-zero gradient can move one
element by a good part of lr). --param-norm: also each parameter's
difference in the 2-norm, over its 2-norm, within TOL.
"""
import math
import re
import struct
import sys


def losses(path):
    found = [float(m.group(1)) for m in re.finditer(
        r"^step +\d+/\d+ \| loss ([0-9.e+-]+)", open(path).read(), re.M)]
    if not found:
        sys.exit(f"compare_runs: no losses in {path}")
    return found


def params(path):
    data = open(path, "rb").read()
    if data[:8] != b"FSDPPARM":
        sys.exit(f"compare_runs: {path} is not a parameter dump")
    (count,), at = struct.unpack_from("<I", data, 8), 12
    out = {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, at); at += 4
        name = data[at:at + n].decode(); at += n
        (rank,) = struct.unpack_from("<I", data, at); at += 4
        dims = struct.unpack_from(f"<{rank}q", data, at); at += 8 * rank
        size = 1
        for d in dims:
            size *= d
        out[name] = struct.unpack_from(f"<{size}f", data, at); at += 4 * size
    return out


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

#!/usr/bin/env python3
"""Checks a `fsdp-run --blas auto` log of a bf16 plan (run with
ONEDNN_VERBOSE=1): usage check_auto_blas.py LOG [--shrinks].

* The start-up line says where the bf16 GEMMs run: on oneDNN (`bf16 GEMMs
  from F FLOPs on onednn ...`) or widened to f32, with the reason.
* oneDNN's verbose log has bf16 matmuls exactly when it said oneDNN, and
  then no f32 matmul (auto keeps f32 GEMMs on OpenBLAS) and no primitive
  made after the first step started (they are made at setup).
* Where fsdp-run counts its heap (not under a sanitizer), taken bf16
  GEMMs leave the widening buffer at most the compiler's figure
  (below it with --shrinks: a plan whose widest widened kernel is a
  linear) and the summary says so; widened ones leave the compiler's.

Prints "bf16 GEMMs as announced" or exits 1 naming what differs.
"""
import re
import sys

text = open(sys.argv[1]).read()
must_shrink = sys.argv[2:3] == ["--shrinks"]
where = re.search(r"bf16 GEMMs (from \S+ FLOPs on onednn|widened to f32 \()",
                  text)
if not where:
    sys.exit("check_auto_blas: the start-up line does not say where bf16 "
             "GEMMs run")
on_dnnl = where.group(1).startswith("from")
runs = re.findall(r"exec,cpu,matmul,.*", text)
bf16_runs = [r for r in runs if "src_bf16" in r]
if bool(bf16_runs) != on_dnnl:
    sys.exit(f"check_auto_blas: announced {where.group(1)!r}, oneDNN ran "
             f"{len(bf16_runs)} bf16 matmuls")
if len(bf16_runs) != len(runs):
    sys.exit(f"check_auto_blas: oneDNN ran {len(runs) - len(bf16_runs)} "
             "matmuls that are not bf16: auto keeps f32 GEMMs on OpenBLAS")
first_step = text.find("step     1/")
late = [m for m in re.finditer(r"create(:cache_miss)?,cpu,matmul", text)
        if m.start() > first_step]
if first_step >= 0 and late:
    sys.exit(f"check_auto_blas: {len(late)} oneDNN primitives made during "
             "training, not at setup")
if "heap not counted" in text:  # a sanitizer build: no memory summary
    print("bf16 GEMMs as announced")
    sys.exit(0)
shrunk = re.search(r"bf16 widening buffer ([0-9.]+) MiB \(the compiler's "
                   r"([0-9.]+) MiB: (\d+) bf16 GEMMs run unwidened", text)
if on_dnnl and not (shrunk and int(shrunk.group(3)) > 0):
    sys.exit("check_auto_blas: bf16 GEMMs on oneDNN, but the summary does "
             "not say how many nor the widening buffer's size")
if on_dnnl and float(shrunk.group(1)) > float(shrunk.group(2)):
    sys.exit(f"check_auto_blas: the widening buffer grew: {shrunk.group(0)}")
if on_dnnl and must_shrink and not float(shrunk.group(1)) < float(
        shrunk.group(2)):
    sys.exit(f"check_auto_blas: the widening buffer did not shrink: "
             f"{shrunk.group(0)}")
if not on_dnnl and shrunk:
    sys.exit("check_auto_blas: bf16 GEMMs widened, yet the widening buffer "
             "shrank")
print("bf16 GEMMs as announced")

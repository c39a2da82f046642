#!/usr/bin/env python3
"""Asserts that fsdp-run reports (--report-json) hold the same losses within
a relative tolerance, step by step, as the first one.

  close_losses.py REL_TOL REPORT REPORT...

For runs that differ only in how the work is split (expert parallelism:
the same GEMMs over rows in another grouping may round differently), where
same_losses.py's bitwise test is too strict.
"""
import json
import sys

tol = float(sys.argv[1])
reports = [(path, json.load(open(path))["losses"]) for path in sys.argv[2:]]
first_path, first = reports[0]
if not first:
    sys.exit(f"{first_path}: no losses")
worst = 0.0
for path, losses in reports[1:]:
    if len(losses) != len(first):
        sys.exit(f"{path}: {len(losses)} steps, {first_path}: {len(first)}")
    for step, (a, b) in enumerate(zip(first, losses), 1):
        rel = abs(a - b) / max(abs(a), 1e-30)
        worst = max(worst, rel)
        if rel > tol:
            sys.exit(f"{path}: step {step} loss {b!r} against {a!r} in "
                     f"{first_path}: {rel:.3g} relative, over {tol:g}")
print(f"close losses: {len(reports)} runs, {len(first)} steps each, "
      f"worst {worst:.3g} relative")

#!/usr/bin/env python3
"""Compares the losses and global gradient norms of fsdp-run reports
(--report-json) of one model at several world sizes, step by step, within a
relative tolerance; the first report is the reference. Every report must
carry gradient norms (a plan that clips).

  compare_norms.py REL_TOL [--steps K] REFERENCE REPORT...
"""
import json
import sys

args = sys.argv[1:]
tol = float(args.pop(0))
steps = None
if args and args[0] == "--steps":
    steps = int(args[1])
    args = args[2:]


def load(path):
    report = json.load(open(path))
    losses, norms = report["losses"][:steps], report["grad_norms"][:steps]
    if not norms or len(norms) != len(losses):
        sys.exit(f"compare_norms: {path}: {len(losses)} losses, "
                 f"{len(norms)} gradient norms")
    return losses, norms


def worst(got, want):
    return max(abs(a - b) / abs(b) for a, b in zip(got, want))


ref_losses, ref_norms = load(args[0])
failed = False
for path in args[1:]:
    losses, norms = load(path)
    if len(losses) != len(ref_losses):
        sys.exit(f"compare_norms: {path} has {len(losses)} steps, the "
                 f"reference {len(ref_losses)}")
    loss_err, norm_err = worst(losses, ref_losses), worst(norms, ref_norms)
    ok = loss_err <= tol and norm_err <= tol
    failed |= not ok
    print(f"compare_norms: {path}: {len(losses)} steps, worst loss "
          f"{loss_err:.2e}, worst norm {norm_err:.2e} "
          f"{'ok' if ok else 'FAILED'}")
sys.exit(1 if failed else 0)

#!/usr/bin/env python3
"""Checks the validation points of fsdp-run reports (--report-json).

  check_validation.py steps REPORT S1,S2,...   the points follow these steps
  check_validation.py same REPORT REPORT       bitwise-equal validation losses
  check_validation.py close REPORT REPORT TOL  losses within TOL (relative)
  check_validation.py forward REPORT_A REPORT_B
      A's last validation loss equals B's first training loss bitwise (B
      trained from A's exported weights on A's validation batch)

Reports print losses with 9 significant digits, which round-trips a float
exactly: equal text is equal bits.
"""
import json
import sys


def points(path):
    report = json.load(open(path))
    if "validation" not in report:
        sys.exit(f"{path}: no validation in the report")
    return report["validation"]


def main(argv):
    what = argv[1]
    if what == "steps":
        got = [p["step"] for p in points(argv[2])]
        want = [int(s) for s in argv[3].split(",")]
        if got != want:
            sys.exit(f"{argv[2]}: validation after steps {got}, want {want}")
    elif what in ("same", "close"):
        a, b = points(argv[2]), points(argv[3])
        if [p["step"] for p in a] != [p["step"] for p in b]:
            sys.exit(f"validation steps differ: {a} vs {b}")
        tol = float(argv[4]) if what == "close" else 0.0
        for p, q in zip(a, b):
            if abs(p["loss"] - q["loss"]) > tol * abs(p["loss"]):
                sys.exit(f"validation after step {p['step']}: {p['loss']} vs "
                         f"{q['loss']} (tolerance {tol})")
    elif what == "forward":
        last = points(argv[2])[-1]["loss"]
        first = json.load(open(argv[3]))["losses"][0]
        if last != first:
            sys.exit(f"validation loss {last} is not the forward's {first}")
    else:
        sys.exit(f"unknown check {what}")
    print(f"check_validation {what}: ok")


main(sys.argv)

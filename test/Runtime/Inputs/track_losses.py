#!/usr/bin/env python3
"""Checks that one training run tracks another (fsdp-run --report-json):

  track_losses.py REFERENCE OTHER [--final REL] [--no-worse REL]
                  [--early STEPS REL]

--final: the mean of the last 20 losses within REL of the reference's
(one hard batch at the end does not decide); --no-worse: that mean at
most REL above the reference's, one-sided (another model may do better:
a Llama against the GPT-2 of its size; a negative REL asks for at least
-REL below); --early: each of the first
STEPS losses within REL of the reference's, where runs that differ only by
rounding have not yet drifted apart. Prints both figures.
"""
import argparse
import json
import statistics
import sys

parser = argparse.ArgumentParser()
parser.add_argument("reference")
parser.add_argument("other")
parser.add_argument("--final", type=float)
parser.add_argument("--no-worse", type=float)
parser.add_argument("--early", nargs=2, type=float, metavar=("STEPS", "REL"))
args = parser.parse_args()
if args.final is None and args.no_worse is None and args.early is None:
    parser.error("nothing to check: give --final, --no-worse or --early")
ref = json.load(open(args.reference))["losses"]
other = json.load(open(args.other))["losses"]
if len(ref) != len(other) or len(ref) < 20:
    sys.exit(f"track_losses: {len(ref)} and {len(other)} losses")
a, b = statistics.mean(ref[-20:]), statistics.mean(other[-20:])
final = abs(b - a) / a
print(f"track_losses: final {a:.4f} vs {b:.4f} ({100 * (b - a) / a:+.2f}%)")
failed = args.final is not None and final > args.final
if args.no_worse is not None:
    failed |= b > a * (1 + args.no_worse)
if args.early:
    steps, rel = int(args.early[0]), args.early[1]
    worst = max(abs(y - x) / x for x, y in zip(ref[:steps], other[:steps]))
    print(f"track_losses: first {steps} steps within {100 * worst:.3f}%")
    failed |= worst > rel
if failed:
    sys.exit("track_losses: FAILED")
print("track_losses: ok")

#!/usr/bin/env python3
"""Checks that every mutant's pattern in test/mutation/mutants.txt occurs
exactly once in its file, without building anything: the cheap half of
scripts/mutate.py, run in CI (test.sh) so that moved code cannot leave a
stale mutant behind unnoticed.

  scripts/check-mutants.py [--mutants FILE]
"""
import argparse
import importlib.util
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "mutate", os.path.join(root, "scripts", "mutate.py"))
mutate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutate)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", default=os.path.join(
        root, "test", "mutation", "mutants.txt"))
    args = parser.parse_args()
    bad = 0
    mutants = mutate.parse(args.mutants)
    for m in mutants:
        path = os.path.join(root, m.file)
        if not os.path.exists(path):
            print(f"{m.id}: {m.file}: no such file")
            bad += 1
            continue
        count = open(path, encoding="utf-8").read().count(m.find)
        if count != 1:
            print(f"{m.id}: {m.file}: pattern found {count} times")
            bad += 1
    print(f"check-mutants: {len(mutants) - bad} of {len(mutants)} patterns "
          f"occur exactly once")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Lists source files longer than a limit (the architecture rule: no source
file over 800 lines, so that a file has one job a reader can hold).

  scripts/long-files.py [--limit N] [--allow FILE] ROOT

Scans the files git tracks under ROOT (every file under it, build trees
left out, where ROOT is no git checkout) that are sources: C++, CUDA,
TableGen, Python, CMake and shell. Generated files are exempt: those that
say so in their first lines ("generated ... do not edit", as fsdp-tblgen
writes them). Docs and test inputs (.md, .mlir, .txt) are not sources.

Exits 1 when a file over the limit is not in the allow file (one path from
ROOT a line, `#` comments), so CI can hold the rule.
"""
import argparse
import os
import re
import subprocess
import sys

SOURCE_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".inc", ".td", ".py",
                   ".cmake", ".sh")
SOURCE_NAMES = ("CMakeLists.txt",)
GENERATED = re.compile(r"generated\b.*?do not edit", re.I | re.S)


def tracked_files(root):
    """Paths from `root` of the files git tracks there, else of every
    file outside build trees and .git."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"],
                             capture_output=True, check=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs
                       if d != ".git" and not d.startswith("build")]
            paths += [os.path.relpath(os.path.join(dirpath, n), root)
                      for n in names]
        return paths


def is_source(path):
    name = os.path.basename(path)
    return name.endswith(SOURCE_SUFFIXES) or name in SOURCE_NAMES


def is_generated(text):
    head = "\n".join(text.split("\n")[:5])
    return bool(GENERATED.search(head))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--limit", type=int, default=800)
    parser.add_argument("--allow", help="file of paths allowed over it")
    args = parser.parse_args()
    allowed = set()
    if args.allow:
        for entry in open(args.allow):
            entry = entry.split("#")[0].strip()
            if entry:
                allowed.add(entry)
    failures = 0
    for path in sorted(tracked_files(args.root)):
        full = os.path.join(args.root, path)
        if not is_source(path) or not os.path.isfile(full):
            continue
        text = open(full, encoding="utf-8", errors="replace").read()
        lines = text.count("\n") + (not text.endswith("\n") and text != "")
        if lines <= args.limit or is_generated(text):
            continue
        ok = path in allowed
        failures += not ok
        print(f"{'allowed' if ok else 'TOO LONG'}: {path} ({lines} lines)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

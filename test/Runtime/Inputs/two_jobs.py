#!/usr/bin/env python3
"""Runs two jobs on one checkpoint directory, the second while the first
runs (standard library only).

  two_jobs.py LOCKFILE -- FIRST... -- SECOND...

Starts FIRST; once LOCKFILE exists (or FIRST has ended) starts SECOND and
waits for both. Prints each job's output lines prefixed with "first job: "
or "second job: ", then "second job: exit N" and "first job: exit N".
Either job running past 120 s is killed (exit -9).
"""
import os
import subprocess
import sys
import time


def run_lines(name, proc):
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    for line in out.splitlines():
        print(f"{name}: {line}")
    return proc.returncode


def main():
    args = sys.argv[1:]
    if len(args) < 5 or args[1] != "--" or "--" not in args[2:]:
        sys.exit(__doc__)
    lock = args[0]
    rest = args[2:]
    split = rest.index("--")
    first_cmd, second_cmd = rest[:split], rest[split + 1:]
    first = subprocess.Popen(first_cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not os.path.exists(lock) and first.poll() is None and \
            time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.Popen(second_cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    second_rc = run_lines("second job", second)
    first_rc = run_lines("first job", first)
    print(f"second job: exit {second_rc}")
    print(f"first job: exit {first_rc}")


if __name__ == "__main__":
    main()

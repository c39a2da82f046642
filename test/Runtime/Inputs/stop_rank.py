#!/usr/bin/env python3
"""Runs an mpirun command and stops one rank (SIGSTOP, as a debugger would)
once rank 0 has printed a step line at or past a step drawn at random.

  stop_rank.py --rank R --steps LO:HI [--seed S] [--timeout SEC] -- CMD...

Prints the command's output (stdout and stderr merged), then exits with its
exit code. The stopped rank is continued and killed at the end, so that
nothing is left behind; the whole run is bounded by --timeout.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time


def rank_pid(launcher, rank):
    """The pid of the process of rank `rank` that `launcher` started."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent != launcher:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(entry)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--steps", required=True, help="LO:HI")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    lo, hi = (int(x) for x in args.steps.split(":"))
    seed = args.seed if args.seed is not None else int(time.time())
    when = random.Random(seed).randint(lo, hi)
    print(f"stop_rank: stopping rank {args.rank} after step {when} (seed {seed})",
          flush=True)

    proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    stopped = None
    step_line = re.compile(r"^step\s+(\d+)/")
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        match = step_line.match(line)
        if stopped is None and match and int(match.group(1)) >= when:
            stopped = rank_pid(proc.pid, args.rank)
            if stopped is None:
                print(f"stop_rank: no process of rank {args.rank} found",
                      flush=True)
                proc.kill()
                break
            os.kill(stopped, signal.SIGSTOP)
            print(f"stop_rank: rank {args.rank} (pid {stopped}) stopped",
                  flush=True)
    code = proc.wait()
    timer.cancel()
    if stopped is not None:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(stopped, sig)
            except ProcessLookupError:
                pass
    if stopped is None:
        print("stop_rank: the run ended before the rank was stopped", flush=True)
        return 99
    return code


if __name__ == "__main__":
    sys.exit(main())

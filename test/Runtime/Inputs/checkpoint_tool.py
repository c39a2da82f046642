#!/usr/bin/env python3
"""Helpers for the checkpoint tests (standard library only).

  checkpoint_tool.py suffix-losses FULL.json PART.json [REL_TOL]
      PART's losses (--report-json) are bitwise the last ones of FULL's (a
      resumed run against the uninterrupted one; 9 significant digits
      round-trip a float, so equal text is equal bits)
  checkpoint_tool.py join-logs OUT LOG...
      the step lines of the logs in order, into OUT (a run and its resumed
      continuation, for compare_runs.py)
  checkpoint_tool.py check-manifest STEPDIR
      every file the manifest lists has its size and CRC-32 (zlib's)
  checkpoint_tool.py flip FILE OFFSET
      flips the bits of the byte at OFFSET (negative: from the end)
  checkpoint_tool.py signal [--rank R] [--after REGEX] [--delay S]
                     [--signal TERM|INT] [--twice] [--timeout S] -- CMD...
      runs CMD (output merged and printed), and once a line matches REGEX
      ("^step +2/" by default) waits DELAY seconds and sends the signal to
      CMD (or, under mpirun, to rank R's process), twice with --twice;
      exits with CMD's exit code (128 + signal for a process it killed)
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib

# The rank-finding of the tool that stops ranks, beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stop_rank import rank_pid  # noqa: E402


def suffix_losses(full_path, part_path, tol=None):
    full = json.load(open(full_path))["losses"]
    part = json.load(open(part_path))["losses"]
    suffix = full[-len(part):] if part else []
    if tol is None:
        same = suffix == part
    else:  # another backend: within a relative tolerance
        same = all(abs(a - b) <= float(tol) * abs(a)
                   for a, b in zip(suffix, part))
    if not part or len(part) > len(full) or not same:
        sys.exit(f"losses differ:\n  {full_path}: {full}\n  {part_path}: {part}")
    print(f"same losses: the last {len(part)} of {len(full)} steps"
          + ("" if tol is None else f" (within {tol} relative)"))


def join_logs(out, logs):
    with open(out, "w") as f:
        for log in logs:
            for line in open(log):
                if re.match(r"^step +\d+/", line):
                    f.write(line)


def check_manifest(step_dir):
    manifest = json.load(open(os.path.join(step_dir, "manifest.json")))
    for f in manifest["files"]:
        data = open(os.path.join(step_dir, f["name"]), "rb").read()
        crc = f"{zlib.crc32(data):08x}"
        if len(data) != f["bytes"] or crc != f["crc32"]:
            sys.exit(f"{f['name']}: {len(data)} bytes, CRC-32 {crc}; the "
                     f"manifest says {f['bytes']}, {f['crc32']}")
    print(f"manifest ok: {len(manifest['files'])} files")


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        at = f.tell()
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


def send_signal(args, command):
    sig = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}[args.signal]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    sent = False
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if sent or not re.search(args.after, line):
            continue
        sent = True
        time.sleep(args.delay)
        pid = proc.pid if args.rank is None else rank_pid(proc.pid, args.rank)
        for _ in range(2 if args.twice else 1):
            print(f"checkpoint_tool: SIG{args.signal} to pid {pid}", flush=True)
            os.kill(pid, sig)
            time.sleep(0.2)
    code = proc.wait()
    timer.cancel()
    if not sent:
        print("checkpoint_tool: the run ended before the signal", flush=True)
        return 99
    print(f"checkpoint_tool: exit code {code if code >= 0 else 128 - code}",
          flush=True)
    return code if code >= 0 else 128 - code


def main():
    if sys.argv[1] == "suffix-losses":
        return suffix_losses(*sys.argv[2:5])
    if sys.argv[1] == "join-logs":
        return join_logs(sys.argv[2], sys.argv[3:])
    if sys.argv[1] == "check-manifest":
        return check_manifest(sys.argv[2])
    if sys.argv[1] == "flip":
        return flip(sys.argv[2], int(sys.argv[3]))
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["signal"])
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--after", default=r"^step +2/")
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--signal", default="TERM")
    parser.add_argument("--twice", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0)
    split = sys.argv.index("--")
    args = parser.parse_args(sys.argv[1:split])
    command = sys.argv[split + 1:]
    return send_signal(args, command)


if __name__ == "__main__":
    sys.exit(main())

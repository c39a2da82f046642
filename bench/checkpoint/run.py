#!/usr/bin/env python3
"""Checkpoint write and read rates per rank against a plain sequential file.

For each world size, in the same run:
  * fsdp-run trains one step with --checkpoint-dir: its line gives the
    checkpoint's bytes, the whole write's time (every rank file, the
    barrier, the manifest, every fsync) and rank 0's file's time;
  * the rank files are dropped from the page cache (posix_fadvise
    DONTNEED after their fsync) and fsdp-run --resume runs: rank 0 reads
    every file once to check its size and CRC-32 (a cold sequential read),
    then each rank loads its shards through the mapped files;
  * the baseline: one file of the same bytes as a rank's file, held in
    memory, written sequentially in 1 MiB chunks and fsynced, dropped from the cache and
    read back in 1 MiB chunks.
Prints one table (GB/s = 1e9 bytes per second).

Usage: bench/checkpoint/run.py [--build build] [--ranks 1,2] [--dim 512]
           [--layers 4]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CORPUS = os.path.join(ROOT, "data", "corpus.txt")
CHUNK = 1 << 20


def run(cmd, env=None):
    done = subprocess.run(cmd, text=True, capture_output=True, env=env)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def baseline(tmp, size):
    """(write GB/s, read GB/s) of one plain file of `size` bytes."""
    path = os.path.join(tmp, "baseline.bin")
    # The bytes in memory first, as a rank's shards are (not one cached
    # block written over and over).
    data = memoryview((os.urandom(CHUNK) * (size // CHUNK + 1))[:size])
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    at = 0
    while at < size:
        at += os.write(fd, data[at:at + CHUNK])
    os.fsync(fd)
    os.close(fd)
    write = size / (time.perf_counter() - start) / 1e9
    drop_cache(path)
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, CHUNK):
        pass
    os.close(fd)
    read = size / (time.perf_counter() - start) / 1e9
    os.unlink(path)
    return write, read


def launcher(ranks):
    if ranks == 1:
        return []
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
            str(ranks)]


def measure(args, tool, tmp, ranks):
    mlir = run([tool("fsdp-gen"), "gpt2", "--layers", str(args.layers),
                "--dim", str(args.dim), "--heads", "8", "--vocab", "256",
                "--seq", "32", "--batch", "2"])
    plan = os.path.join(tmp, f"{ranks}.plan")
    subprocess.run([tool("fsdp-opt"),
                    f"--fsdp-train-pipeline=world-size={ranks}", "-o", plan],
                   input=mlir, text=True, check=True)
    ck = os.path.join(tmp, f"ck{ranks}")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    common = launcher(ranks) + [tool("fsdp-run"), plan, "--data", CORPUS,
                                "--threads", "1"]
    out = run(common + ["--steps", "1", "--checkpoint-dir", ck], env)
    m = re.search(r"written: \d+ rank files, ([0-9.]+) MiB, ([0-9.]+) s "
                  r"\(rank 0's file ([0-9.]+) s\)", out)
    total, whole, file0 = float(m[1]) * (1 << 20), float(m[2]), float(m[3])
    step = os.path.join(ck, "step-1")
    for name in os.listdir(step):
        drop_cache(os.path.join(step, name))
    out = run(common + ["--steps", "2", "--resume", ck], env)
    m = re.search(r"checked in ([0-9.]+) s, rank 0's shards loaded in "
                  r"([0-9.]+) s", out)
    checked, loaded = float(m[1]), float(m[2])
    per_rank = total / ranks
    base_write, base_read = baseline(tmp, int(per_rank))
    return {"ranks": ranks, "mib": total / (1 << 20),
            "write": per_rank / file0 / 1e9, "whole": total / whole / 1e9,
            "base_write": base_write, "check": total / checked / 1e9,
            "load": per_rank / loaded / 1e9, "base_read": base_read}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dir", default=None,
                        help="where the files go (default: a temporary "
                             "directory under $TMPDIR)")
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.build, "bin", name)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for ranks in (int(r) for r in args.ranks.split(",")):
            rows.append(measure(args, tool, tmp, ranks))
    print("| ranks | checkpoint MiB | write GB/s per rank (rank 0's file) "
          "| whole write GB/s (all ranks, barrier, manifest) "
          "| plain write GB/s (a rank's bytes, fsync) "
          "| check GB/s (rank 0 reads all, CRC-32, cold) "
          "| load GB/s per rank (mapped, after the check) "
          "| plain read GB/s (cold) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['ranks']} | {r['mib']:.1f} | {r['write']:.2f} | "
              f"{r['whole']:.2f} | {r['base_write']:.2f} | {r['check']:.2f} | "
              f"{r['load']:.2f} | {r['base_read']:.2f} |")


if __name__ == "__main__":
    main()

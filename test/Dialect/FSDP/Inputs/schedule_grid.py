#!/usr/bin/env python3
"""Compiles models under a grid of schedule options; each must compile and
verify (fsdp-opt runs the IR verifier, dominance included, after every
pass, and the pipeline ends in --fsdp-verify).

  schedule_grid.py FSDP_OPT OUT_DIR MODEL [MODEL...]

The grid crosses every bucket-bytes (none, one unit per bucket, a few,
everything) with every mesh (2 ranks, 2x2 hybrid) and parameter dtype;
the other options (forward/backward prefetch, max-inflight-gathers,
grad-clip) take every value in turn, shifted per row, so that each value
meets each bucket size (a full product would take minutes). Prints one
line per model and exits non-zero, naming the options and the first
error line, when any compile fails.
"""
import itertools
import os
import subprocess
import sys

BUCKETS = [0, 1, 20000, 10**9]
MESHES = ["world-size=2", "mesh=2x2"]
DTYPES = ["f32", "bf16"]
# (forward-prefetch, backward-prefetch, max-inflight-gathers, grad-clip)
OTHERS = [(0, 0, 0, 0), (1, 1, 2, 1.0), (2, 1, 1, 0), (1, 0, 0, 0.5),
          (0, 2, 3, 0), (2, 2, 0, 1.0)]


def grid():
    rows = itertools.product(BUCKETS, MESHES, DTYPES)
    for i, (bucket, mesh, dtype) in enumerate(rows):
        for shift in (0, 3):
            fwd, bwd, inflight, clip = OTHERS[(i + shift) % len(OTHERS)]
            opts = (f"{mesh} bucket-bytes={bucket} param-dtype={dtype} "
                    f"forward-prefetch={fwd} backward-prefetch={bwd} "
                    f"max-inflight-gathers={inflight}")
            if clip:
                opts += f" grad-clip={clip}"
            yield opts


def main():
    fsdp_opt, out_dir, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    for model in models:
        count = 0
        for opts in grid():
            result = subprocess.run(
                [fsdp_opt, model, f"--fsdp-train-pipeline={opts}",
                 "-o", os.path.join(out_dir, "grid.plan")],
                capture_output=True, text=True, timeout=120)
            count += 1
            if result.returncode != 0:
                failed += 1
                first = (result.stderr.strip().splitlines() or ["no output"])
                print(f"FAIL {os.path.basename(model)} \"{opts}\": {first[0]}")
        print(f"{os.path.basename(model)}: {count} option sets compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes three broken variants of a plan whose units keep shard copies.

  shard_copy_edits.py PLAN UNWRITTEN FOREIGN WIDE OVERWRITE
  shard_copy_edits.py --stray PLAN STRAY

UNWRITTEN: the first adamw_shard no longer writes its unit's copy (its
fourth output dropped), which would leave the copy the regions read stale.
FOREIGN: the first adamw_shard writes the last adamw_shard's unit's copy
instead of its own.
WIDE: the first adamw_shard's copy holds f32 (its size in bytes to match).
OVERWRITE: the first linear writes its result into a unit's copy.
STRAY (of a plan without copies): the first adamw_shard writes a fourth
output, a bf16 buffer of its shard's size that is no unit's copy.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_tool import DTYPES, OPCODES, parse, serialise  # noqa: E402


def main(path, unwritten, foreign, wide, overwrite):
    data = open(path, "rb").read()
    adamw = OPCODES.index("adamw_shard")

    plan = parse(data)
    updates = [k for k in plan["kernels"] if k["opcode"] == adamw]
    if len(updates) < 2 or any(len(k["outs"]) != 4 for k in updates):
        sys.exit(f"{path}: expected two or more adamw_shard kernels that "
                 "write shard copies")
    updates[0]["outs"] = updates[0]["outs"][:3]
    open(unwritten, "wb").write(serialise(plan))

    plan = parse(data)
    updates = [k for k in plan["kernels"] if k["opcode"] == adamw]
    updates[0]["outs"][3] = updates[-1]["outs"][3]
    open(foreign, "wb").write(serialise(plan))

    plan = parse(data)
    updates = [k for k in plan["kernels"] if k["opcode"] == adamw]
    copy = plan["buffers"][updates[0]["outs"][3]]
    copy["dtype"] = DTYPES.index("f32")
    copy["size"] *= 2
    open(wide, "wb").write(serialise(plan))

    plan = parse(data)
    updates = [k for k in plan["kernels"] if k["opcode"] == adamw]
    linear = next(k for k in plan["kernels"]
                  if k["opcode"] == OPCODES.index("linear"))
    linear["outs"][0] = updates[0]["outs"][3]
    open(overwrite, "wb").write(serialise(plan))


def stray(path, out):
    plan = parse(open(path, "rb").read())
    adamw = OPCODES.index("adamw_shard")
    update = next(k for k in plan["kernels"] if k["opcode"] == adamw)
    grad = plan["buffers"][update["ins"][0]]
    if grad["dtype"] != DTYPES.index("bf16") or len(update["outs"]) != 3:
        sys.exit(f"{path}: expected an adamw_shard of a bf16 gradient, "
                 "without a copy")
    update["outs"].append(update["ins"][0])  # bf16, the shard's shape
    open(out, "wb").write(serialise(plan))


if __name__ == "__main__":
    if sys.argv[1] == "--stray":
        stray(*sys.argv[2:4])
    else:
        main(*sys.argv[1:6])

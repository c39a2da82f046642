#!/usr/bin/env python3
"""A bounded mutation fuzzer of plan files (docs/testing.md).

Compiles a few small models into seed plans, then per case applies one to
three mutations: truncation at any point (raw, or with the header's size
and CRC fixed up), bit flips (CRC fixed up or not), integer fields of the
header, summary, buffers, units, parameters and kernels set to extremes (0,
-1, 2^31, 2^63 - 1, 2^64 - 1, ...), shape dimensions likewise, operand ids
swapped or replaced, kernel parameters set to NaN, infinities or huge
values, record counts changed, kernels duplicated, dropped or swapped.
Each mutant runs `fsdp-run --describe`; one that loads (with a small
arena) also runs a step. Every run must succeed or reject cleanly
(fuzzlib.py); failures are saved under test/fuzz/crashers/.

    fuzz_plans.py --bin build-asan/bin [--seed 1] [--cases 1500]
                  [--time-budget 240] [--replay]
"""

import copy
import os
import random
import struct
import sys
import tempfile
import threading
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "Runtime", "Inputs"))
import fuzzlib  # noqa: E402
import plan_tool  # noqa: E402

EXTREMES = [0, 1, -1, 2, 3, 63, 64, 255, 256, 2**31 - 1, 2**31, 2**32 - 1,
            2**32, 2**48, 2**48 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1,
            -2**31, -2**63]
FLOATS = [float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 0.0,
          -1.0, 0.5, 3.0, 2.0**31, 2.0**32, 2.0**63, 1e-300]
# Seeds: small models of each kernel family, with and without a schedule.
SEEDS = [
    ("mlp", ["mlp", "--layers", "2", "--width", "8", "--in-features", "4",
             "--classes", "3", "--batch", "2"], "--fsdp-train-pipeline"),
    ("mlp2", ["mlp", "--layers", "1", "--width", "4", "--in-features", "4",
              "--classes", "2", "--batch", "2"],
     "--fsdp-train-pipeline=world-size=2"),
    ("gpt2", ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2",
              "--vocab", "256", "--seq", "4", "--batch", "2"],
     "--fsdp-train-pipeline"),
    # Gradient clipping: sums of squares (chained), the scalar all-reduce,
    # the coefficient, AdamW's scale, the norm buffer.
    ("mlp2-clip", ["mlp", "--layers", "2", "--width", "4", "--in-features",
                   "4", "--classes", "2", "--batch", "2"],
     "--fsdp-train-pipeline=world-size=2 grad-clip=1.0"),
    # Mixed precision: bf16 buffers, casts, f32-to-bf16 gathers.
    ("gpt2-bf16", ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2",
                   "--vocab", "256", "--seq", "4", "--batch", "2"],
     "--fsdp-train-pipeline=param-dtype=bf16 reduce-dtype=bf16"),
    # Hybrid sharding: the summary's shard size, collectives' axes, the
    # replica all-reduce in place on stream 3.
    ("mlp-hsdp", ["mlp", "--layers", "2", "--width", "4", "--in-features",
                  "4", "--classes", "2", "--batch", "4"],
     "--fsdp-train-pipeline=mesh=2x2 grad-clip=1.0"),
    # A mixture of experts (DeepSeek-V3's form): i32 index buffers between
    # kernels, the grouped linears, a selection bias's update, clipping's
    # sums over a unit's other segments. The plan fuzzer found a segfault
    # on a tiny Mixtral (an index buffer's arena bytes reused before a
    # cloned reader): every index is checked before it addresses memory.
    ("moe", ["--preset", "deepseek-v3-tiny", "--layers", "2", "--dim", "16",
             "--heads", "2", "--ffn-dim", "16", "--seq", "4", "--batch", "2"],
     "--fsdp-train-pipeline=grad-clip=1.0"),
    # Expert parallelism: the summary's expert groups, expert-parallel
    # units' flags and slices, collectives over the expert shard group, the
    # all-to-alls and their counts (loaded and described: a 1-rank step
    # refuses its world size).
    ("moe-ep", ["--preset", "deepseek-v3-tiny", "--layers", "2", "--dim",
                "16", "--heads", "2", "--ffn-dim", "16", "--seq", "4",
                "--batch", "2"],
     "--fsdp-train-pipeline=world-size=2 expert=2"),
]
MAX_RUN_ARENA = 16 << 20  # mutants that load run a step below this


def make_seeds(bin_dir, work):
    return [open(fuzzlib.compile_plan(bin_dir, work, name, gen, pipeline),
                 "rb").read() for name, gen, pipeline in SEEDS]


def fix_header(data):
    """Header size and CRC made to match the (mutated) payload."""
    if len(data) < plan_tool.HEADER.size:
        return data
    data = bytearray(data)
    struct.pack_into("<Q", data, 16, len(data) - plan_tool.HEADER.size)
    crc = plan_tool.crc_of(bytes(data[:48]), bytes(data[48:]))
    struct.pack_into("<I", data, 24, crc)
    return bytes(data)


def mutate_bytes(rng, data):
    kind = rng.randrange(4)
    if kind == 0:  # truncate anywhere
        return data[:rng.randrange(len(data))]
    if kind == 1:  # truncate the payload, header fixed up
        return fix_header(data[:rng.randrange(48, len(data))])
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return fix_header(bytes(data)) if kind == 2 else bytes(data)


def extreme(rng, old):
    if rng.random() < 0.3 and isinstance(old, int):
        return old + rng.choice([-1, 1, old, -old])
    return rng.choice(EXTREMES)


def mutate_records(rng, plan):
    """One structural mutation of a parsed plan, in place."""
    tables = [t for t in ("buffers", "units", "params", "kernels")
              if plan[t]]
    what = rng.randrange(10)
    if what == 0 and rng.random() < 0.3:
        field = rng.choice(plan_tool.HEADER_FIELDS[1:])
        plan["header"][field] = extreme(rng, plan["header"][field])
        if field == "payload_size":
            plan["keep_payload_size"] = True
    elif what == 1:
        field = rng.choice(plan_tool.SUMMARY_FIELDS)
        plan["summary"][field] = extreme(rng, plan["summary"][field])
    elif what == 0:  # a kernel's opcode (operand checks see it first)
        rng.choice(plan["kernels"])["opcode"] = rng.randrange(
            len(plan_tool.OPCODES) + 1)
    elif what in (2, 3):  # an integer field of a record
        table = rng.choice(tables)
        record = rng.choice(plan[table])
        fields = [k for k, v in record.items() if isinstance(v, int)]
        field = rng.choice(fields)
        record[field] = extreme(rng, record[field])
    elif what == 4:  # a shape dimension
        table = rng.choice([t for t in ("buffers", "params") if plan[t]])
        record = rng.choice(plan[table])
        shape = record["shape"]
        if shape and rng.random() < 0.8:
            i = rng.randrange(len(shape))
            shape[i] = extreme(rng, shape[i])
        elif rng.random() < 0.5:
            shape.append(rng.choice(EXTREMES))
        elif shape:
            shape.pop()
        if table == "buffers" and rng.random() < 0.5:  # keep size in step
            n = 1
            for d in shape:
                n *= d
            record["size"] = (n * (2 if record["dtype"] == 2 else 4)) % 2**64
    elif what == 5:  # operand ids
        kernels = [k for k in plan["kernels"] if k["ins"] or k["outs"]]
        k = rng.choice(kernels)
        group = rng.choice([g for g in ("ins", "outs") if k[g]])
        i = rng.randrange(len(k[group]))
        r = rng.random()
        if r < 0.4:
            other = rng.choice(kernels)
            og = rng.choice([g for g in ("ins", "outs") if other[g]])
            j = rng.randrange(len(other[og]))
            k[group][i], other[og][j] = other[og][j], k[group][i]
        elif r < 0.8:
            k[group][i] = rng.randrange(len(plan["buffers"]))
        else:
            k[group][i] = rng.choice(EXTREMES) % 2**32
    elif what == 6:  # kernel parameters
        k = rng.choice([k for k in plan["kernels"] if k["params"]] or
                       plan["kernels"])
        if k["params"]:
            k["params"][rng.randrange(len(k["params"]))] = rng.choice(FLOATS)
    elif what == 7:  # record counts
        table = rng.choice(plan_tool.TABLES)
        plan["counts"][table] = rng.choice(
            [0, 1, len(plan[table]) - 1, len(plan[table]) + 1, 2**31,
             2**32 - 1])
    elif what == 8:  # kernels duplicated, dropped, swapped
        ks = plan["kernels"]
        i, j = rng.randrange(len(ks)), rng.randrange(len(ks))
        r = rng.random()
        if r < 0.33:
            ks.insert(j, copy.deepcopy(ks[i]))
        elif r < 0.66 and len(ks) > 1:
            del ks[i]
        else:
            ks[i], ks[j] = ks[j], ks[i]
    else:  # two buffers' records exchanged (ids swapped)
        bs = plan["buffers"]
        i, j = rng.randrange(len(bs)), rng.randrange(len(bs))
        bs[i], bs[j] = bs[j], bs[i]


def mutant(rng, seed):
    if rng.random() < 0.2:
        return mutate_bytes(rng, seed)
    plan = plan_tool.parse(seed)
    for _ in range(rng.randint(1, 3)):
        mutate_records(rng, plan)
    data = plan_tool.serialise(plan, fix_crc=rng.random() < 0.95)
    if rng.random() < 0.1:
        data = mutate_bytes(rng, data)
    return data


CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "data", "corpus.txt")


def check_plan(bin_dir, path, timeout, env):
    """Runs --describe, then (if it loads, with a small arena) one step."""
    run = os.path.join(bin_dir, "fsdp-run")
    verdict, out = fuzzlib.run_tool([run, path, "--describe"], timeout, env)
    if verdict is not None or "arena" not in out:
        return verdict, out
    try:
        arena = plan_tool.parse(open(path, "rb").read())["summary"][
            "arena_size"]
    except (plan_tool.PlanError, struct.error):
        arena = MAX_RUN_ARENA + 1
    if arena > MAX_RUN_ARENA:
        return verdict, out
    command = [run, path, "--steps", "1", "--threads", "1"]
    if "input 0: i32" in out:  # token ids: a language model needs --data
        command += ["--data", CORPUS]
    return fuzzlib.run_tool(command, timeout, env)


def main():
    args = fuzzlib.arguments(__doc__, 1500)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-plans-")
    os.makedirs(work, exist_ok=True)
    if args.replay:
        return fuzzlib.replay(args, "plan", ".plan", lambda p: check_plan(
            args.bin, p, args.timeout, env))
    seeds = make_seeds(args.bin, work)
    campaign = fuzzlib.Campaign(args, "plan")
    local = threading.local()

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        data = mutant(rng, rng.choice(seeds))
        path = os.path.join(work, "case-%d.plan" % i)
        with open(path, "wb") as f:
            f.write(data)
        verdict, out = check_plan(args.bin, path, args.timeout, env)
        os.unlink(path)
        return verdict, out, data, ".plan", "plan case %d (seed %d)" % (
            i, args.seed)

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())

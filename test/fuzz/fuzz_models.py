#!/usr/bin/env python3
"""A bounded mutation fuzzer of models for the compiler (docs/testing.md).

Seeds are `fsdp-gen` outputs (MLPs and GPT-2s), one of them with a
`#fsdp.mesh` module attribute and one with `fsdp.param_dtype = bf16`
(`--dtype bf16`). Per case one to three
textual mutations: a line duplicated, deleted or swapped with another, a
number (in a type, a shape, an attribute) set to an extreme (0, -1, 2^31,
2^63 - 1, 2^64 - 1, 10^20, ...), two tokens swapped, the text cut short.
Each mutant goes through `fsdp-opt --fsdp-train-pipeline -o x.plan`, and a
plan it writes through `fsdp-run --describe`: each must succeed or reject
cleanly (fuzzlib.py); failures are saved under test/fuzz/crashers/.

    fuzz_models.py --bin build-asan/bin [--seed 1] [--cases 600]
                   [--time-budget 240] [--replay]
"""

import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

SEEDS = [
    ["mlp", "--layers", "2", "--width", "8", "--in-features", "4",
     "--classes", "3", "--batch", "2"],
    ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2", "--vocab", "16",
     "--seq", "4", "--batch", "2"],
    # Mixed precision asked for by the module (fsdp.param_dtype = bf16):
    # its parser, verifier and the pipeline's bf16 path see mutants too.
    ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2", "--vocab", "16",
     "--seq", "4", "--batch", "2", "--dtype", "bf16"],
]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "2147483647", "2147483648",
           "4294967296", "9223372036854775807", "9223372036854775808",
           "18446744073709551615", "100000000000000000000", "-2147483648",
           "-9223372036854775808", "1e308", "nan"]
NUMBER = re.compile(r"(?<![A-Za-z_%#@])\d+")
TOKEN = re.compile(r"[A-Za-z_][\w.]*|\d+|\S")


def mutate(rng, text):
    lines = text.split("\n")
    what = rng.randrange(6)
    if what == 0:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines)), lines[i])
    elif what == 1 and len(lines) > 1:  # delete a line
        del lines[rng.randrange(len(lines))]
    elif what == 2:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif what in (3, 4):  # a number to an extreme (types, shapes, attrs)
        spots = [(i, m) for i, l in enumerate(lines)
                 for m in NUMBER.finditer(l)]
        if spots:
            i, m = rng.choice(spots)
            l = lines[i]
            lines[i] = l[:m.start()] + rng.choice(NUMBERS) + l[m.end():]
    else:  # swap two tokens (anywhere in the text)
        spots = [(i, m) for i, l in enumerate(lines)
                 for m in TOKEN.finditer(l)]
        if len(spots) > 1:
            (i, a), (j, b) = rng.sample(spots, 2)
            if i == j:
                if a.start() > b.start():
                    a, b = b, a
                l = lines[i]
                lines[i] = (l[:a.start()] + b.group() + l[a.end():b.start()] +
                            a.group() + l[b.end():])
            else:
                la, lb = lines[i], lines[j]
                lines[i] = la[:a.start()] + b.group() + la[a.end():]
                lines[j] = lb[:b.start()] + a.group() + lb[b.end():]
    text = "\n".join(lines)
    if rng.random() < 0.05:
        text = text[:rng.randrange(len(text) + 1)]
    return text


def check_model(bin_dir, path, timeout, env):
    plan = path + ".plan"
    verdict, out = fuzzlib.run_tool(
        [os.path.join(bin_dir, "fsdp-opt"), path, "--fsdp-train-pipeline",
         "-o", plan], timeout, env)
    if verdict is None and os.path.exists(plan):
        verdict, more = fuzzlib.run_tool(
            [os.path.join(bin_dir, "fsdp-run"), plan, "--describe"], timeout,
            env)
        out += more
    if os.path.exists(plan):
        os.unlink(plan)
    return verdict, out


def main():
    args = fuzzlib.arguments(__doc__, 600)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-models-")
    os.makedirs(work, exist_ok=True)
    if args.replay:
        return fuzzlib.replay(args, "model", ".model", lambda p: check_model(
            args.bin, p, args.timeout, env))
    seeds = [subprocess.run([os.path.join(args.bin, "fsdp-gen")] + s,
                            check=True, stdout=subprocess.PIPE,
                            text=True).stdout for s in SEEDS]
    # One seed carries a device mesh, so that the #fsdp.mesh parser and
    # verifier (axis names, sizes, order, overflow) see mutants too.
    seeds.append(subprocess.run(
        [os.path.join(args.bin, "fsdp-opt"), "-", "--fsdp-mesh=shard=1"],
        input=seeds[0], check=True, stdout=subprocess.PIPE,
        text=True).stdout)
    # One carries blocked attention and a unit's recomputation policy, so
    # that the #fsdp.attention_impl parser, the attention verifiers of both
    # forms and the fsdp.remat verifier and pass see mutants too.
    blocked = subprocess.run(
        [os.path.join(args.bin, "fsdp-opt"), "-", "--fsdp-wrap",
         "--fsdp-attention=impl=blocked"],
        input=seeds[1], check=True, stdout=subprocess.PIPE,
        text=True).stdout
    seeds.append(re.sub(r"(fsdp\.unit @h\.0 params \[[^\]]*\])",
                        r'\1 {fsdp.remat = "full"}', blocked, count=1))
    campaign = fuzzlib.Campaign(args, "model")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        text = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            text = mutate(rng, text)
        path = os.path.join(work, "case-%d.mlir" % i)
        with open(path, "w") as f:
            f.write(text)
        verdict, out = check_model(args.bin, path, args.timeout, env)
        os.unlink(path)
        return verdict, out, text.encode(), ".model", \
            "model case %d (seed %d)" % (i, args.seed)

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())

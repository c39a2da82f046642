#!/usr/bin/env python3
"""A bounded mutation fuzzer of safetensors files (docs/testing.md).

Seeds are what `fsdp-run --export` writes for two small plans (a GPT-2 by
Hugging Face's names and by ours, a Llama by Hugging Face's) and their
BF16 copies. Per case one to three mutations, in the header's JSON
(parsed and written back) or in the bytes: an entry's dtype, shape or
data_offsets set to an extreme or another JSON type (0, -1, 2^31, 2^63,
2^64, 1e308, "", null, [], {}, a long list), an entry removed, renamed,
duplicated or given an unknown key, the metadata made odd, the header
nested thousands deep; the header length set to extremes (0, 1, the file
size, 2^63, 2^64 - 1, off by one), the file cut short anywhere, bytes
appended or flipped; bits of the data alone flipped (a file that loads,
with NaNs, infinities or huge weights). Each mutant starts a run of its plan with
`fsdp-run --init-from FILE --steps 1`. A run must succeed or reject
cleanly (fuzzlib.py) and a rejection must name the weights file on its
`error:` line (or be a run that diverged: flipped bits in the data are
huge weights); failures are saved under test/fuzz/crashers/ as
safetensors-<hash>.st. Replay runs each saved file with every plan.

    fuzz_safetensors.py --bin build-asan/bin [--seed 1] [--cases 400]
                        [--time-budget 40] [--replay]
"""

import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ROOT = fuzzlib.ROOT
CORPUS = fuzzlib.CORPUS
PLANS = [
    ("gpt2", ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2",
              "--vocab", "256", "--seq", "4", "--batch", "2"]),
    ("llama", ["llama", "--layers", "1", "--dim", "8", "--heads", "2",
               "--kv-heads", "1", "--ffn-dim", "8", "--vocab", "256",
               "--seq", "4", "--batch", "2"]),
]
VALUES = [0, -1, 1, 2, 3, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1,
          2**64, 1e308, -0.0, 0.5, "", "F32", "BF16", "I64", "F8_E4M3",
          None, True, [], {}, [0], [0, 0, 0], [2**63, 2**63],
          [1] * 300, "x" * 3000]
LENGTHS = [0, 1, 2, 7, 8, 2**31, 2**32, 2**63, 2**64 - 1, 100000001]


def split(data):
    """(header text, body) of a file, or None when it has no header."""
    if len(data) < 8:
        return None
    (n,) = struct.unpack_from("<Q", data)
    if n > len(data) - 8:
        return None
    return data[8:8 + n], data[8 + n:]


def join(text, body):
    return struct.pack("<Q", len(text)) + text + body


def mutate_entry(rng, entry):
    field = rng.choice(["dtype", "shape", "data_offsets"])
    what = rng.randrange(4)
    if what == 0 or not isinstance(entry.get(field), list):
        entry[field] = rng.choice(VALUES)
    elif what == 1 and entry[field]:  # one element
        entry[field][rng.randrange(len(entry[field]))] = rng.choice(VALUES)
    elif what == 2:  # a dimension or an offset added or dropped
        if entry[field] and rng.random() < 0.5:
            entry[field].pop()
        else:
            entry[field].append(rng.choice(VALUES[:12]))
    else:
        del entry[field]


def mutate_header(rng, header):
    names = [k for k in header if k != "__metadata__"]
    what = rng.randrange(8)
    if not names or what == 0:  # the metadata
        header["__metadata__"] = rng.choice(
            [{"format": 1}, {"a": None}, [], "pt", {"": ""}, {"x": "y" * 99}])
        return
    name = rng.choice(names)
    if what <= 3:
        if isinstance(header[name], dict):
            mutate_entry(rng, header[name])
        else:
            header[name] = rng.choice(VALUES)
    elif what == 4:
        del header[name]
    elif what == 5:  # renamed: a missing and an extra tensor
        header[name + rng.choice([".x", "", "\u00e9", "\x01"])] = \
            header.pop(name)
    elif what == 6:
        header[name]["extra"] = rng.choice(VALUES) \
            if isinstance(header[name], dict) else 0
    else:  # another entry's offsets: overlap or a gap
        other = rng.choice(names)
        if isinstance(header[name], dict) and isinstance(header[other], dict):
            header[name]["data_offsets"] = header[other].get("data_offsets")


def mutate_json(rng, data):
    parts = split(data)
    if parts is None:
        return data
    text, body = parts
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deep
        return data
    if not isinstance(header, dict):
        return data
    if rng.random() < 0.05:  # deep nesting, for the parser's stack
        depth = rng.choice([1000, 100000])
        return join(b"[" * depth + b"]" * depth, body)
    mutate_header(rng, header)
    try:
        text = json.dumps(header).encode()
    except ValueError:
        return data
    if rng.random() < 0.05:  # a repeated key, which json.dumps cannot write
        text = text[:-1] + b"," + text[1:]
    return join(text, body)


def mutate_data(rng, data):
    """Bits of the tensors' data flipped (the header intact: the file
    loads, with odd weights: NaNs, infinities, huge values)."""
    parts = split(data)
    if parts is None or not parts[1]:
        return data
    text, body = parts
    body = bytearray(body)
    for _ in range(rng.choice([1, 4, 64])):
        body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    return join(text, bytes(body))


def mutate_bytes(rng, data):
    what = rng.randrange(5)
    if what == 0:  # the header length
        value = rng.choice(LENGTHS + [len(data), len(data) - 8,
                                      len(data) - 7])
        return struct.pack("<Q", value % 2**64) + data[8:]
    if what == 1:
        return data[:rng.randrange(len(data) + 1)]
    if what == 2:
        return data + bytes(rng.randrange(256)
                            for _ in range(rng.choice([1, 4, 8, 100])))
    if what == 3 and data:
        data = bytearray(data)
        for _ in range(rng.choice([1, 4, 16])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    return rng.choice([b"", data[:8], b"\x02" + b"\0" * 7 + b"{}"])


def make_seeds(bin_dir, work, plans):
    seeds = []
    sys.path.insert(0, os.path.join(ROOT, "test", "Runtime", "Inputs"))
    import safetensors_tool as st
    for plan in plans:
        for names in (["hf"], ["ours"]) if "gpt2" in plan else (["hf"],):
            path = os.path.join(work, "seed-%d.st" % len(seeds))
            subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan,
                            "--data", CORPUS, "--steps", "1", "--threads",
                            "1", "--export", path, "--export-names"] + names,
                           check=True, stdout=subprocess.DEVNULL,
                           env=fuzzlib.environment())
            seeds.append((plan, open(path, "rb").read()))
            tensors, metadata = st.read(path)
            seeds.append((plan, st.encode(
                [(n, "BF16", s, st.to_bf16(r)) for n, d, s, r in tensors],
                metadata)))
    return seeds


def check_file(bin_dir, plan, path, timeout, env):
    verdict, out = fuzzlib.run_tool(
        [os.path.join(bin_dir, "fsdp-run"), plan, "--data", CORPUS,
         "--init-from", path, "--steps", "1", "--threads", "1"],
        timeout, env)
    # Flipped bits in the data can load as huge but finite weights, and a
    # run from them diverges: that is the file's values, not a failure.
    if verdict is None and "summary:" not in out and \
            "training diverged" not in out and not any(
                "error:" in line and path in line for line in out.splitlines()):
        verdict = "rejected without an error line naming the weights file"
    return verdict, out


def make_plans(bin_dir, work):
    return [fuzzlib.compile_plan(bin_dir, work, name, gen)
            for name, gen in PLANS]


def main():
    args = fuzzlib.arguments(__doc__, 400)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-safetensors-")
    os.makedirs(work, exist_ok=True)
    if args.replay:
        plans = []

        def every_plan(path):
            plans[:] = plans or make_plans(args.bin, work)  # once, if any
            for plan in plans:
                verdict, out = check_file(args.bin, plan, path, args.timeout,
                                          env)
                if verdict is not None:
                    return verdict, "%s:\n%s" % (os.path.basename(plan), out)
            return None, out
        return fuzzlib.replay(args, "safetensors", ".st", every_plan)
    seeds = make_seeds(args.bin, work, make_plans(args.bin, work))
    campaign = fuzzlib.Campaign(args, "safetensors")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        plan, data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = rng.choice([mutate_json] * 5 + [mutate_bytes] * 3 +
                              [mutate_data] * 2)(rng, data)
        path = os.path.join(work, "case-%d.st" % i)
        with open(path, "wb") as f:
            f.write(data)
        verdict, out = check_file(args.bin, plan, path, args.timeout, env)
        os.unlink(path)
        return verdict, out, data, ".st", "safetensors case %d (seed %d, %s)" % (
            i, args.seed, os.path.basename(plan))

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())

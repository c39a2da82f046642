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

A quarter of the cases are sharded checkpoints (`--export DIR
--export-shard-size 2KiB`: several shards and model.safetensors.index.json,
GPT-2's and the Llama's): the index's JSON mutated (an entry removed,
added, moved to another shard or to a name that is no shard, given another
JSON type or a path with '..' or '/'; the metadata or a top-level key made
odd; not JSON at all, cut short) or a shard deleted, cut short or given
the single-file mutations above; the run starts `--init-from
CASE/model.safetensors.index.json` and a rejection must name a file of
the case. Those failures are saved as safetensors-<hash>.index.json (the
index; the shards are the seed's, which replay writes again).

    fuzz_safetensors.py --bin build-asan/bin [--seed 1] [--cases 400]
                        [--time-budget 40] [--replay]
"""

import json
import os
import random
import shutil
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


INDEX = "model.safetensors.index.json"


def make_index_seeds(bin_dir, work, plans):
    """(plan, directory) per plan: a sharded Hugging Face export."""
    seeds = []
    for plan in plans:
        path = os.path.join(work, "seed-dir-%d" % len(seeds))
        subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan,
                        "--data", CORPUS, "--steps", "1", "--threads", "1",
                        "--export", path, "--export-shard-size", "2KiB"],
                       check=True, stdout=subprocess.DEVNULL,
                       env=fuzzlib.environment())
        seeds.append((plan, path))
    return seeds


def mutate_index(rng, text, shards):
    """An index's bytes mutated: its JSON, or the bytes themselves."""
    if rng.random() < 0.15:
        return rng.choice([text[:rng.randrange(len(text) + 1)], b"",
                           b"[]", b"{}", b"null", text + b"x",
                           b"[" * 100000 + b"]" * 100000])
    try:
        index = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(index, dict):
        return text
    wm = index.get("weight_map")
    what = rng.randrange(9)
    if what == 0 or not isinstance(wm, dict) or not wm:
        index[rng.choice(["metadata", "weight_map", "x", ""])] = \
            rng.choice(VALUES)
    else:
        name = rng.choice(sorted(wm))
        if what == 1:
            del wm[name]
        elif what == 2:  # another shard
            wm[name] = rng.choice(shards)
        elif what == 3:
            wm[name] = rng.choice(VALUES + ["../" + wm[name], "/" + wm[name],
                                            "./" + wm[name], "x/" + wm[name],
                                            "no-such.safetensors", ".", "",
                                            wm[name] + "\x00"])
        elif what == 4:  # an entry the shards do not hold
            wm[name + rng.choice([".x", "\u00e9", ""])] = rng.choice(shards)
        elif what == 5:
            index["metadata"] = rng.choice(VALUES)
        elif what == 6:  # every tensor in one shard
            target = rng.choice(shards)
            for key in wm:
                wm[key] = target
        elif what == 7:
            index["weight_map"] = rng.choice(VALUES)
        else:
            wm.clear()
    try:
        text = json.dumps(index).encode()
    except ValueError:
        return text
    if rng.random() < 0.05:  # a repeated key
        text = text[:-1] + b"," + text[1:]
    return text


def write_case_dir(seed_dir, case_dir, index_bytes=None):
    """A copy of a seed directory's shards, with `index_bytes` as the
    index (the seed's when None)."""
    os.makedirs(case_dir, exist_ok=True)
    for f in os.listdir(seed_dir):
        if f.endswith(".safetensors"):
            with open(os.path.join(seed_dir, f), "rb") as src, \
                    open(os.path.join(case_dir, f), "wb") as dst:
                dst.write(src.read())
    if index_bytes is None:
        index_bytes = open(os.path.join(seed_dir, INDEX), "rb").read()
    with open(os.path.join(case_dir, INDEX), "wb") as f:
        f.write(index_bytes)


def index_case(rng, seed_dir, case_dir):
    """Writes a mutated sharded checkpoint to case_dir; returns the bytes
    to save on failure (the index) and its suffix."""
    text = open(os.path.join(seed_dir, INDEX), "rb").read()
    shards = sorted(f for f in os.listdir(seed_dir)
                    if f.endswith(".safetensors"))
    if rng.random() < 0.6:
        text = mutate_index(rng, text, shards)
        write_case_dir(seed_dir, case_dir, text)
        return text
    write_case_dir(seed_dir, case_dir)
    shard = os.path.join(case_dir, rng.choice(shards))
    if rng.random() < 0.3:
        os.unlink(shard)
    else:
        data = open(shard, "rb").read()
        data = rng.choice([mutate_json, mutate_bytes, mutate_data])(rng, data)
        with open(shard, "wb") as f:
            f.write(data)
    return text


def check_file(bin_dir, plan, path, timeout, env, names=None):
    verdict, out = fuzzlib.run_tool(
        [os.path.join(bin_dir, "fsdp-run"), plan, "--data", CORPUS,
         "--init-from", path, "--steps", "1", "--threads", "1"],
        timeout, env)
    # Flipped bits in the data can load as huge but finite weights, and a
    # run from them diverges: that is the file's values, not a failure.
    if verdict is None and "summary:" not in out and \
            "training diverged" not in out and not any(
                "error:" in line and (names or path) in line
                for line in out.splitlines()):
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
        bad = fuzzlib.replay(args, "safetensors", ".st", every_plan)
        dirs = []

        def every_index(path):
            dirs[:] = dirs or make_index_seeds(args.bin, work,
                                               make_plans(args.bin, work))
            for n, (plan, seed_dir) in enumerate(dirs):
                case_dir = os.path.join(work, "replay-%d" % n)
                shutil.rmtree(case_dir, ignore_errors=True)
                write_case_dir(seed_dir, case_dir, open(path, "rb").read())
                verdict, out = check_file(
                    args.bin, plan, os.path.join(case_dir, INDEX),
                    args.timeout, env, names=case_dir)
                if verdict is not None:
                    return verdict, "%s:\n%s" % (os.path.basename(plan), out)
            return None, out
        return fuzzlib.replay(args, "safetensors", ".index.json",
                              every_index) or bad
    plans = make_plans(args.bin, work)
    seeds = make_seeds(args.bin, work, plans)
    dir_seeds = make_index_seeds(args.bin, work, plans)
    campaign = fuzzlib.Campaign(args, "safetensors")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        if rng.random() < 0.25:
            plan, seed_dir = rng.choice(dir_seeds)
            case_dir = os.path.join(work, "case-%d" % i)
            data = index_case(rng, seed_dir, case_dir)
            verdict, out = check_file(args.bin, plan,
                                      os.path.join(case_dir, INDEX),
                                      args.timeout, env, names=case_dir)
            shutil.rmtree(case_dir, ignore_errors=True)
            return verdict, out, data, ".index.json", \
                "safetensors index case %d (seed %d, %s)" % (
                    i, args.seed, os.path.basename(plan))
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

#!/usr/bin/env python3
"""A bounded mutation fuzzer of checkpoints for --resume (docs/testing.md).

The seed is the step-2 checkpoint of a small GPT-2 (one rank). Per case
one to three mutations of its manifest.json (a field set to an extreme or
another JSON type, removed, the units, parameters or files lists changed,
the text cut short or its bytes flipped) or of its rank file (the
mutations of fuzz_safetensors.py; the manifest's size and CRC-32 of the
file then updated, half of the time, so that the mutant reaches the
safetensors reader and the shard checks instead of stopping at the
CRC-32). Each mutant is resumed with `fsdp-run --resume DIR --steps 3`:
the run must succeed or reject cleanly (fuzzlib.py), a rejection naming
--resume or the checkpoint on its `error:` line. Failures are saved under
test/fuzz/crashers/ as checkpoint-<hash>.ck (the manifest's length, the
manifest, the rank file); replay rebuilds and resumes each.

    fuzz_checkpoints.py --bin build-asan/bin [--seed 1] [--cases 300]
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
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402
import fuzz_safetensors  # noqa: E402

ROOT = fuzzlib.ROOT
CORPUS = fuzzlib.CORPUS
GEN = fuzzlib.TINY_GPT2
VALUES = fuzz_safetensors.VALUES
RANK_FILE = "rank-0-of-1.safetensors"


def pick(rng, node):
    """A random object or list inside `node` (a parsed manifest)."""
    while True:
        children = [v for v in (node.values() if isinstance(node, dict)
                                else node) if isinstance(v, (dict, list))]
        if not children or rng.random() < 0.4:
            return node
        node = rng.choice(children)


def mutate_manifest(rng, text):
    if rng.random() < 0.2:
        data = bytearray(text)
        if rng.random() < 0.5:
            return bytes(data[:rng.randrange(len(data) + 1)])
        for _ in range(rng.choice([1, 4])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    try:
        manifest = json.loads(text)
    except ValueError:
        return text
    node = pick(rng, manifest)
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        what = rng.randrange(3)
        if what == 0:
            del node[key]
        else:
            node[key] = rng.choice(VALUES)
    elif isinstance(node, list) and node:
        what = rng.randrange(3)
        if what == 0:
            node.pop(rng.randrange(len(node)))
        elif what == 1:
            node.append(json.loads(json.dumps(rng.choice(node))))
        else:
            node[rng.randrange(len(node))] = rng.choice(VALUES)
    return json.dumps(manifest).encode()


def refresh_crc(manifest_text, rank_file):
    """The manifest with the rank file's size and CRC-32 (when it parses)."""
    try:
        manifest = json.loads(manifest_text)
        for f in manifest["files"]:
            f["bytes"] = len(rank_file)
            f["crc32"] = "%08x" % zlib.crc32(rank_file)
        return json.dumps(manifest).encode()
    except (ValueError, KeyError, TypeError):
        return manifest_text


def pack(manifest, rank_file):
    return struct.pack("<Q", len(manifest)) + manifest + rank_file


def unpack(data):
    (n,) = struct.unpack_from("<Q", data)
    return data[8:8 + n], data[8 + n:]


def check(bin_dir, plan, work, data, timeout, env):
    manifest, rank_file = unpack(data)
    step = os.path.join(work, "step-2")
    os.makedirs(step)
    with open(os.path.join(step, "manifest.json"), "wb") as f:
        f.write(manifest)
    with open(os.path.join(step, RANK_FILE), "wb") as f:
        f.write(rank_file)
    verdict, out = fuzzlib.run_tool(
        [os.path.join(bin_dir, "fsdp-run"), plan, "--data", CORPUS,
         "--resume", work, "--steps", "3", "--threads", "1"], timeout, env)
    if verdict is None and "summary:" not in out and \
            "training diverged" not in out and not any(
                "error:" in line and ("--resume" in line or work in line)
                for line in out.splitlines()):
        verdict = "rejected without an error line naming the checkpoint"
    shutil.rmtree(work)
    return verdict, out


def make_seed(bin_dir, work):
    plan = fuzzlib.compile_plan(bin_dir, work, "gpt2", GEN)
    ck = os.path.join(work, "seed-ck")
    subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan, "--data", CORPUS,
                    "--steps", "2", "--threads", "1", "--checkpoint-dir", ck],
                   check=True, stdout=subprocess.DEVNULL,
                   env=fuzzlib.environment())
    step = os.path.join(ck, "step-2")
    manifest = open(os.path.join(step, "manifest.json"), "rb").read()
    rank_file = open(os.path.join(step, RANK_FILE), "rb").read()
    return plan, manifest, rank_file


def main():
    args = fuzzlib.arguments(__doc__, 300)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-checkpoints-")
    os.makedirs(work, exist_ok=True)
    plan, manifest, rank_file = make_seed(args.bin, work)
    if args.replay:
        def replay_one(path):
            return check(args.bin, plan, os.path.join(work, "replay"),
                         open(path, "rb").read(), args.timeout, env)
        return fuzzlib.replay(args, "checkpoint", ".ck", replay_one)
    campaign = fuzzlib.Campaign(args, "checkpoint")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        m, r = manifest, rank_file
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.5:
                m = mutate_manifest(rng, m)
            else:
                r = (fuzz_safetensors.mutate_json if rng.random() < 0.6
                     else fuzz_safetensors.mutate_bytes)(rng, r)
                if rng.random() < 0.5:
                    m = refresh_crc(m, r)
        data = pack(m, r)
        verdict, out = check(args.bin, plan, os.path.join(work, "case-%d" % i),
                             data, args.timeout, env)
        return verdict, out, data, ".ck", "checkpoint case %d (seed %d)" % (
            i, args.seed)

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A bounded mutation fuzzer of token data files (docs/testing.md).

Seeds are what `fsdp-run --data` reads: English text (the head of
data/corpus.txt) and llm.c token files (a 256-int32 header: magic
20240520, version 1, count; then uint16 ids; or magic 20240801, version
7, count; then uint32 ids) with ids below each seed plan's vocabulary. Per case one to three mutations: the header's magic,
version or count set to extremes (0, 1, -1, 2^31 - 1, -2^31, the count
off by one, doubled, or the size in uint32 tokens), the file cut short
anywhere (inside the header too), bytes appended, the file emptied or cut
to the header alone, odd bytes put into text (controls, NUL, 0xFF,
broken UTF-8; a few or many), token ids set at or above the vocabulary
(vocab, 256, 65535), bit flips. Each mutant trains a tiny GPT-2 plan for
two steps with `fsdp-run --data FILE --data-format auto|bytes|tokens`.
A run must succeed or reject cleanly (fuzzlib.py) and a rejection must
name the data file on its `error:` line; failures are saved under
test/fuzz/crashers/ as data-<hash>.data. Replay runs each saved file with
every plan and format.

    fuzz_data.py --bin build-asan/bin [--seed 1] [--cases 600]
                 [--time-budget 40] [--replay]
"""

import os
import random
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ROOT = fuzzlib.ROOT
CORPUS = fuzzlib.CORPUS
MAGIC, HEADER_INTS = 20240520, 256
MAGIC32, VERSION32 = 20240801, 7
HEADER_BYTES = 4 * HEADER_INTS
# Seed plans: byte-level (vocab 256) and a small vocabulary, a batch of
# B x T + 1 = 9 and 33 tokens, so that short files reach the limits.
PLANS = [
    ("v256", ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2",
              "--vocab", "256", "--seq", "4", "--batch", "2"], 256),
    ("v40", ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2",
             "--vocab", "40", "--seq", "8", "--batch", "4"], 40),
]
FORMATS = ["auto", "auto", "bytes", "tokens"]
INT32S = [0, 1, -1, 2, 16, 17, 2**31 - 1, -2**31, MAGIC, MAGIC + 1,
          MAGIC - 1, MAGIC32, MAGIC32 + 1, VERSION32]
ODD_BYTES = [b"\x00", b"\x01", b"\x08", b"\x1b", b"\x7f", b"\xff", b"\xc3",
             b"\xe2\x82", b"\xf0\x9f\x98", b"\r", b"\x0b", b"\x0c", b"\xfe\xff"]


def token_file(ids, count=None, wide=False):
    magic, version = (MAGIC32, VERSION32) if wide else (MAGIC, 1)
    header = [magic, version, len(ids) if count is None else count]
    header += [0] * (HEADER_INTS - 3)
    return struct.pack("<%di" % HEADER_INTS, *header) + \
        struct.pack("<%d%s" % (len(ids), "I" if wide else "H"), *ids)


def make_seeds(rng):
    text = open(CORPUS, "rb").read()
    seeds = [text[:600], text[:9], text[:40]]
    for vocab in (40, 256):
        for n in (9, 33, 200):
            for wide in (False, True):
                seeds.append(token_file(
                    [rng.randrange(vocab) for _ in range(n)], wide=wide))
    return seeds


def set_int32(data, index, value):
    data = bytearray(data.ljust(4 * (index + 1), b"\x00"))
    data[4 * index:4 * index + 4] = struct.pack("<i", value)
    return bytes(data)


def mutate(rng, data):
    what = rng.randrange(10)
    count = (len(data) - HEADER_BYTES) // 2
    if what == 0:  # the magic
        return set_int32(data, 0, rng.choice(INT32S))
    if what == 1:  # the version
        return set_int32(data, 1, rng.choice(INT32S))
    if what == 2:  # the count: extremes, off by one, uint32-sized
        body = max(len(data) - HEADER_BYTES, 0)
        return set_int32(data, 2, rng.choice(
            INT32S + [count - 1, count + 1, 2 * count, body // 4, body]))
    if what == 3:  # cut short anywhere, the header included
        return data[:rng.randrange(len(data) + 1)]
    if what == 4:  # bytes appended (an odd size, a body grown)
        return data + bytes(rng.randrange(256)
                            for _ in range(rng.choice([1, 2, 3, 64])))
    if what == 5:  # empty, or the header alone
        return rng.choice([b"", data[:HEADER_BYTES], data[:12]])
    if what == 6:  # odd bytes into the text (or anywhere)
        data = bytearray(data)
        for _ in range(rng.choice([1, 2, 5, 50])):
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.choice(ODD_BYTES)
        return bytes(data)
    if what == 7 and count > 0:  # token ids at or above a vocabulary
        data = bytearray(data)
        for _ in range(rng.choice([1, 3])):
            at = HEADER_BYTES + 2 * rng.randrange(count)
            data[at:at + 2] = struct.pack(
                "<H", rng.choice([39, 40, 41, 255, 256, 65535]))
        if data[:4] == struct.pack("<i", MAGIC32):  # a high half too
            at = HEADER_BYTES + 4 * rng.randrange(count // 2 or 1) + 2
            data[at:at + 2] = struct.pack("<H", rng.choice([1, 0x8000,
                                                            0xFFFF]))
        return bytes(data)
    if data:  # bit flips
        data = bytearray(data)
        for _ in range(rng.choice([1, 4])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    return data


def make_plans(bin_dir, work):
    return [fuzzlib.compile_plan(bin_dir, work, name, gen)
            for name, gen, _ in PLANS]


def check_data(bin_dir, plan, path, data_format, timeout, env):
    verdict, out = fuzzlib.run_tool(
        [os.path.join(bin_dir, "fsdp-run"), plan, "--data", path,
         "--data-format", data_format, "--steps", "2", "--threads", "1"],
        timeout, env)
    if verdict is None and "summary:" not in out and not any(
            "error:" in line and path in line for line in out.splitlines()):
        verdict = "rejected without an error line naming the data file"
    return verdict, out


def main():
    args = fuzzlib.arguments(__doc__, 600)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-data-")
    os.makedirs(work, exist_ok=True)
    if args.replay:
        plans = []

        def every_way(path):
            plans[:] = plans or make_plans(args.bin, work)  # once, if any
            for plan in plans:
                for data_format in ("auto", "bytes", "tokens"):
                    verdict, out = check_data(args.bin, plan, path,
                                              data_format, args.timeout, env)
                    if verdict is not None:
                        return verdict, "%s --data-format %s:\n%s" % (
                            os.path.basename(plan), data_format, out)
            return None, out
        return fuzzlib.replay(args, "data", ".data", every_way)
    plans = make_plans(args.bin, work)
    seeds = make_seeds(random.Random(args.seed))
    campaign = fuzzlib.Campaign(args, "data")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = mutate(rng, data)
        plan, data_format = rng.choice(plans), rng.choice(FORMATS)
        path = os.path.join(work, "case-%d.data" % i)
        with open(path, "wb") as f:
            f.write(data)
        # (fuzzlib.run_tool gives each run its own Open MPI session
        # directory.)
        verdict, out = check_data(args.bin, plan, path, data_format,
                                  args.timeout, env)
        os.unlink(path)
        return verdict, out, data, ".data", \
            "data case %d (seed %d, %s, --data-format %s)" % (
                i, args.seed, os.path.basename(plan), data_format)

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())

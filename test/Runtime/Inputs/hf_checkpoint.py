"""Hugging Face checkpoint directories (what `fsdp-run --export DIR`
writes and `--init-from DIR` reads) for the tests, with the standard
library only (safetensors_tool.py reads the files).

usage: hf_checkpoint.py check DIR [--max-shard BYTES]
           the directory is a checkpoint as transformers writes one: either
           model.safetensors alone, or model-0000i-of-0000N.safetensors
           with model.safetensors.index.json whose weight_map names every
           tensor of every shard, in its shard, once, and whose
           metadata.total_size is the shards' data bytes; no tensor split;
           each shard's data at most BYTES unless it is one tensor. Prints
           the files and a line ending in ok, or exits 1 saying why.
       hf_checkpoint.py same A B
           the two directories hold the same weights, index and config
           files, byte for byte
       hf_checkpoint.py bf16-of F32 BF16
           BF16's tensors (a file or a directory) are F32's rounded to
           bfloat16 to nearest, ties to even (torch's .to(torch.bfloat16)),
           by name
       hf_checkpoint.py break DIR OUT KIND
           a copy of DIR with one fault: drop-entry (the index forgets a
           tensor), missing-shard (the second shard deleted), truncate (the
           last shard cut in half), disagree (the index maps a tensor to
           another shard), not-json, no-weight-map, weight-map-number,
           absolute-path, unknown-key (the index malformed)
       hf_checkpoint.py package DIR
           the safetensors package (PyPI) reads every shard: the same
           names, dtypes, shapes and bytes as the format's rules read
"""
import json
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
SHARD = re.compile(r"model-(\d{5})-of-(\d{5})\.safetensors$")


def fail(why):
    print("hf_checkpoint: %s: FAILED" % why)
    sys.exit(1)


def shards(path):
    """[(file name, tensors)] of a checkpoint file or directory, and the
    index (None without one)."""
    if not os.path.isdir(path):
        return [(os.path.basename(path), st.read(path)[0])], None
    if os.path.exists(os.path.join(path, SINGLE)):
        return [(SINGLE, st.read(os.path.join(path, SINGLE))[0])], None
    index = json.load(open(os.path.join(path, INDEX)))
    names = sorted(set(index["weight_map"].values()))
    return [(n, st.read(os.path.join(path, n))[0]) for n in names], index


def check(args):
    path = args[0]
    limit = int(args[args.index("--max-shard") + 1]) \
        if "--max-shard" in args else None
    files, index = shards(path)
    weights = [f for f in os.listdir(path)
               if f == SINGLE or f == INDEX or SHARD.match(f)]
    if index is None:
        if sorted(weights) != [SINGLE]:
            fail("one file, but also %s" % sorted(weights))
    else:
        if SINGLE in weights:
            fail("an index and a model.safetensors")
        n = len(files)
        want = ["model-%05d-of-%05d.safetensors" % (i, n)
                for i in range(1, n + 1)]
        if [f for f, _ in files] != want:
            fail("shards %s, expected %s" % ([f for f, _ in files], want))
        seen = {}
        for name, tensors in files:
            for t in tensors:
                if t[0] in seen:
                    fail("%s in %s and %s" % (t[0], seen[t[0]], name))
                seen[t[0]] = name
        if seen != index["weight_map"]:
            fail("the weight_map is not the shards' tensors")
        total = sum(len(t[3]) for _, ts in files for t in ts)
        if index["metadata"]["total_size"] != total:
            fail("total_size %s, the shards hold %d bytes" % (
                index["metadata"]["total_size"], total))
    for name, tensors in files:
        data = sum(len(t[3]) for t in tensors)
        if limit is not None and len(tensors) > 1 and data > limit:
            fail("%s holds %d bytes of data, over %d" % (name, data, limit))
        print("hf_checkpoint: %s: %d tensors, %d bytes of data (%s)" % (
            name, len(tensors), data,
            ",".join(sorted(set(t[1] for t in tensors)))))
    config = os.path.join(path, "config.json")
    if os.path.exists(config):
        c = json.load(open(config))
        print("hf_checkpoint: config.json: model_type %s, dtype %s" % (
            c.get("model_type"), c.get("dtype")))
    print("hf_checkpoint: %d files, %d tensors: ok" % (
        len(files), sum(len(ts) for _, ts in files)))


def same(args):
    a, b = args
    names = lambda d: sorted(f for f in os.listdir(d)  # noqa: E731
                             if f in (SINGLE, INDEX, "config.json") or
                             SHARD.match(f))
    if names(a) != names(b):
        fail("%s has %s, %s has %s" % (a, names(a), b, names(b)))
    for f in names(a):
        if open(os.path.join(a, f), "rb").read() != \
                open(os.path.join(b, f), "rb").read():
            fail("%s differs" % f)
    print("hf_checkpoint: %d files, byte for byte the same: ok" % len(
        names(a)))


def round_bf16(word):
    """torch's float -> bfloat16: nearest, ties to even (NaN kept)."""
    if (word & 0x7FFFFFFF) > 0x7F800000:
        return (word >> 16) | 0x40
    return ((word + 0x7FFF + ((word >> 16) & 1)) >> 16) & 0xFFFF


def bf16_of(args):
    f32 = {t[0]: t for _, ts in shards(args[0])[0] for t in ts}
    bf16 = {t[0]: t for _, ts in shards(args[1])[0] for t in ts}
    if sorted(f32) != sorted(bf16):
        fail("different tensors")
    ties = 0
    for name, (_, dtype, shape, raw) in f32.items():
        _, dtype2, shape2, raw2 = bf16[name]
        if dtype != "F32" or dtype2 != "BF16" or shape != shape2:
            fail("%s: %s %s and %s %s" % (name, dtype, shape, dtype2, shape2))
        words = struct.unpack("<%dI" % (len(raw) // 4), raw)
        halves = struct.unpack("<%dH" % (len(raw2) // 2), raw2)
        ties += sum(1 for w in words if (w & 0xFFFF) == 0x8000)
        if [round_bf16(w) for w in words] != list(halves):
            fail("%s is not F32 rounded to nearest even" % name)
    print("hf_checkpoint: %d tensors rounded to nearest even (%d ties): ok"
          % (len(f32), ties))


def brk(args):
    src, out, kind = args
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    index_path = os.path.join(out, INDEX)
    index = json.load(open(index_path))
    wm = index["weight_map"]
    files = sorted(set(wm.values()))
    if kind == "drop-entry":
        del wm[sorted(wm)[0]]
    elif kind == "missing-shard":
        os.remove(os.path.join(out, files[1]))
    elif kind == "truncate":
        p = os.path.join(out, files[-1])
        data = open(p, "rb").read()
        open(p, "wb").write(data[:len(data) // 2])
    elif kind == "disagree":
        name = next(n for n in sorted(wm) if wm[n] == files[-1])
        wm[name] = files[0]
    elif kind == "not-json":
        open(index_path, "w").write('{"weight_map": {')
        return
    elif kind == "no-weight-map":
        del index["weight_map"]
    elif kind == "weight-map-number":
        wm[sorted(wm)[0]] = 3
    elif kind == "absolute-path":
        wm[sorted(wm)[0]] = "/etc/passwd"
    elif kind == "unknown-key":
        index["weights"] = {}
    else:
        sys.exit("unknown fault %s" % kind)
    json.dump(index, open(index_path, "w"), indent=2)


def package(args):
    from safetensors import safe_open
    import safetensors
    files, _ = shards(args[0])
    count = 0
    for name, tensors in files:
        with safe_open(os.path.join(args[0], name), framework="np") as f:
            if sorted(f.keys()) != sorted(t[0] for t in tensors):
                fail("%s: the package reads other names" % name)
            for tname, dtype, shape, raw in tensors:
                if dtype == "BF16":  # numpy has no bfloat16
                    continue
                value = f.get_tensor(tname)
                if list(value.shape) != shape or value.tobytes() != raw:
                    fail("%s: %s reads differently" % (name, tname))
                count += 1
    print("hf_checkpoint: safetensors %s reads %d files, %d tensors the "
          "same: ok" % (safetensors.__version__, len(files), count))


def main():
    commands = {"check": check, "same": same, "bf16-of": bf16_of,
                "break": brk, "package": package}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()

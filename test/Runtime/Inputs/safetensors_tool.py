"""Safetensors files for the weights tests, with the standard library only
(struct and json: the format is an 8-byte little-endian header length, a
JSON header, then the data), so that the tests need neither numpy nor the
safetensors package.

usage: safetensors_tool.py names FILE
           every tensor in data order: name, dtype, shape; then the metadata
       safetensors_tool.py to-bf16 IN OUT
           IN's F32 tensors as BF16 (truncated: widening gives back exactly
           the values OUT holds)
       safetensors_tool.py same-values A B
           every tensor of A has B's name, shape and values (both widened to
           f32 first)
       safetensors_tool.py rename IN OUT OLD=NEW...
           IN with tensors renamed (OLD=: dropped)
       safetensors_tool.py zero IN OUT SUFFIX...
           IN with every tensor whose name ends in a SUFFIX all zeros
"""
import json
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2,
         "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
         "I64": 8, "U64": 8, "F64": 8}


def read(path):
    """(tensors, metadata): tensors a list of (name, dtype, shape, bytes)
    in data order."""
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = []
    for name, entry in sorted(header.items(),
                              key=lambda item: item[1]["data_offsets"]):
        begin, end = entry["data_offsets"]
        tensors.append((name, entry["dtype"], list(entry["shape"]),
                        body[begin:end]))
    return tensors, metadata


def encode(tensors, metadata=None, pad=True, header_extra=None):
    """The bytes of a file of `tensors` ((name, dtype, shape, bytes)), the
    header padded with spaces to a multiple of 8 unless `pad` is false;
    `header_extra` is merged into the header as given (bad entries)."""
    header, at = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    header.update(header_extra or {})
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(
        raw for _, _, _, raw in tensors)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))


def floats(dtype, raw):
    """The values of a float tensor, widened to f32 (as Python floats)."""
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype == "BF16":
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return list(struct.unpack("<%df" % len(halves), struct.pack(
            "<%dI" % len(halves), *[h << 16 for h in halves])))
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    if dtype == "F64":
        return [struct.unpack("<f", struct.pack("<f", v))[0] for v in
                struct.unpack("<%dd" % (len(raw) // 8), raw)]
    sys.exit("safetensors_tool: %s is not a float type" % dtype)


def to_bf16(raw):
    words = struct.unpack("<%dI" % (len(raw) // 4), raw)
    return struct.pack("<%dH" % len(words), *[w >> 16 for w in words])


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "names":
        tensors, metadata = read(args[0])
        for name, dtype, shape, _ in tensors:
            print("tensor %s %s %s" % (name, dtype, shape))
        for key in sorted(metadata):
            print("metadata %s=%s" % (key, metadata[key]))
    elif command == "to-bf16":
        tensors, metadata = read(args[0])
        write(args[1], [(n, "BF16", s, to_bf16(r)) if d == "F32" else
                        (n, d, s, r) for n, d, s, r in tensors], metadata)
    elif command == "same-values":
        a, _ = read(args[0])
        b = {n: (d, s, r) for n, d, s, r in read(args[1])[0]}
        for name, dtype, shape, raw in a:
            other = b.pop(name, None)
            if other is None or other[1] != shape:
                sys.exit("same-values: %s: not in %s with shape %s" %
                         (name, args[1], shape))
            if floats(dtype, raw) != floats(other[0], other[2]):
                sys.exit("same-values: %s differs" % name)
        if b:
            sys.exit("same-values: %s has more: %s" % (args[1], sorted(b)))
        print("same-values: %d tensors equal" % len(a))
    elif command == "rename":
        tensors, metadata = read(args[0])
        renames = dict(arg.split("=", 1) for arg in args[2:])
        write(args[1], [(renames.get(n, n), d, s, r) for n, d, s, r in tensors
                        if renames.get(n, n)], metadata)
    elif command == "zero":
        tensors, metadata = read(args[0])
        hit = [n for n, _, _, _ in tensors
               if any(n.endswith(x) for x in args[2:])]
        if not hit:
            sys.exit("zero: no tensor ends in %s" % args[2:])
        write(args[1], [(n, d, s, bytes(len(r)) if n in hit else r)
                        for n, d, s, r in tensors], metadata)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

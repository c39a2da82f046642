"""Checks a parameter dump (fsdp-run --save) of an untrained model (lr 0)
against the initializers its .mlir declares: zeros and ones exactly, and
normal(0, std) by the sample mean and standard deviation (within 4.5 of
their standard errors, for parameters of at least 256 elements).

usage: check_init.py MODEL.mlir PARAMS
"""
import math
import re
import struct
import sys

model, dump = sys.argv[1:]
inits = {}
for m in re.finditer(r"fsdp\.param @(\S+) : tensor<[^>]*> init <(\w+)(?:, std = "
                     r"([0-9.e+-]+))?>", open(model).read()):
    inits[m.group(1)] = (m.group(2), float(m.group(3) or 0))

data = open(dump, "rb").read()
if data[:8] != b"FSDPPARM":
    sys.exit(f"check_init: {dump} is not a parameter dump")
(count,), at = struct.unpack_from("<I", data, 8), 12
failed = checked = 0
for _ in range(count):
    (n,) = struct.unpack_from("<I", data, at); at += 4
    name = data[at:at + n].decode(); at += n
    (rank,) = struct.unpack_from("<I", data, at); at += 4
    dims = struct.unpack_from(f"<{rank}q", data, at); at += 8 * rank
    size = math.prod(dims)
    values = struct.unpack_from(f"<{size}f", data, at); at += 4 * size
    kind, std = inits[name]
    ok = True
    if kind in ("zeros", "ones"):
        ok = all(v == (1.0 if kind == "ones" else 0.0) for v in values)
        what = kind
    elif size >= 256:
        mean = sum(values) / size
        sample = math.sqrt(sum((v - mean) ** 2 for v in values) / (size - 1))
        ok = abs(mean) <= 4.5 * std / math.sqrt(size) and \
            abs(sample / std - 1) <= 4.5 / math.sqrt(2 * (size - 1))
        what = f"normal std {std:.4g}: mean {mean:+.2e}, std {sample:.4g}"
    else:
        continue
    checked += 1
    failed += not ok
    print(f"check_init: {name}: {what} {'ok' if ok else 'FAILED'}")
print(f"check_init: {checked} parameters checked, {failed} failed")
sys.exit(1 if failed or not checked else 0)

"""usage: torch_llama_init.py BENCH_GPU_DIR PARAMS_FILE

Compares torch_llama.our_init (runtime/src/Init.cpp's generator, in pure
Python) with the parameters fsdp-run --save wrote for the micro Llama of
torch-llama-baseline.test (2 layers, dim 16, 4 heads, 2 kv heads, ffn 24,
vocabulary 256), rounded to float32: names, order, shapes and every value.
"""
import math
import struct
import sys

sys.path.insert(0, sys.argv[1])
import torch_llama as tl  # noqa: E402

raw = open(sys.argv[2], "rb").read()
if raw[:8] != b"FSDPPARM":
    sys.exit("not a parameters file")
count, = struct.unpack_from("<I", raw, 8)
offset, saved = 12, {}
for _ in range(count):
    length, = struct.unpack_from("<I", raw, offset)
    name = raw[offset + 4:offset + 4 + length].decode()
    offset += 4 + length
    rank, = struct.unpack_from("<I", raw, offset)
    shape = struct.unpack_from("<%dq" % rank, raw, offset + 4)
    offset += 4 + 8 * rank
    n = math.prod(shape)
    saved[name] = (tuple(shape), struct.unpack_from("<%df" % n, raw, offset))
    offset += 4 * n
declared = tl.declared_params(2, 16, 4, 2, 24, 256)
if [d[0] for d in declared] != list(saved):
    sys.exit("names or order differ: %s vs %s" % ([d[0] for d in declared],
                                                  list(saved)))
elements = 0
for name, shape, init, _ in declared:
    if saved[name][0] != shape:
        sys.exit("%s: shape %s, saved %s" % (name, shape, saved[name][0]))
    mine = tl.our_init(name, math.prod(shape), init)
    for i, (a, b) in enumerate(zip(mine, saved[name][1])):
        if struct.unpack("<f", struct.pack("<f", a))[0] != b:
            sys.exit("%s[%d]: ours %r, fsdp-run's %r" % (name, i, a, b))
    elements += len(mine)
print("%d parameters, %d elements, all bitwise equal" % (len(declared),
                                                         elements))

"""usage: torch_llama_init.py BENCH_GPU_DIR WEIGHTS_FILE

Compares torch_llama.our_init (runtime/src/exec/Init.cpp's generator, in pure
Python) with the parameters fsdp-run --export --export-names ours wrote
(safetensors, the plan's names, in plan order) for the micro Llama of
torch-llama-baseline.test (2 layers, dim 16, 4 heads, 2 kv heads, ffn 24,
vocabulary 256), rounded to float32: names, order, shapes and every value.
"""
import math
import os
import struct
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402
import torch_llama as tl  # noqa: E402

tensors, metadata = st.read(sys.argv[2])
if metadata.get("fsdp_names") != "ours":
    sys.exit("not by our names (--export-names ours)")
saved = {name: (tuple(shape), st.floats(dtype, raw))
         for name, dtype, shape, raw in tensors}
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

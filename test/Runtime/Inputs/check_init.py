"""Checks the weights of an untrained model (lr 0), as fsdp-run --export
--export-names ours writes them (safetensors, the plan's names), against
the initializers its .mlir declares: zeros and ones exactly, and
normal(0, std) by the sample mean and standard deviation (within 4.5 of
their standard errors, for parameters of at least 256 elements).

usage: check_init.py MODEL.mlir WEIGHTS
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402

model, dump = sys.argv[1:]
inits = {}
for m in re.finditer(r"fsdp\.param @(\S+) : tensor<[^>]*> init <(\w+)(?:, std = "
                     r"([0-9.e+-]+))?>", open(model).read()):
    inits[m.group(1)] = (m.group(2), float(m.group(3) or 0))

tensors, metadata = st.read(dump)
if metadata.get("fsdp_names") != "ours":
    sys.exit(f"check_init: {dump} is not by our names (--export-names ours)")
failed = checked = 0
for name, dtype, dims, raw in tensors:
    size = math.prod(dims)
    values = st.floats(dtype, raw)
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

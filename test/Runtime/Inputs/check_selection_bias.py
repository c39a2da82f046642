"""Checks the selection biases of a safetensors file after STEPS steps of
the update at RATE (docs/moe.md): every element moved by RATE a step
against the sign of its expert's load (or not at all, at the mean), so it
is a whole multiple of RATE of at most STEPS in size and, each step moving
by one or none, of STEPS's parity unless a step left it; and the biases
are not all zero (the routing of a random model is never balanced).

usage: check_selection_bias.py FILE STEPS RATE
"""
import json
import struct
import sys

path, steps, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
data = open(path, "rb").read()
(size,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + size])
body = data[8 + size:]
biases = {name: info for name, info in header.items()
          if name.endswith("e_score_correction_bias")}
if not biases:
    sys.exit("check_selection_bias: %s holds no selection bias" % path)
moved = 0
for name, info in sorted(biases.items()):
    if info["dtype"] != "F32":
        sys.exit("check_selection_bias: %s is %s, not F32" % (name,
                                                              info["dtype"]))
    begin, end = info["data_offsets"]
    values = struct.unpack("<%df" % ((end - begin) // 4), body[begin:end])
    for e, b in enumerate(values):
        units = b / rate
        if abs(units - round(units)) > 1e-3 or abs(round(units)) > steps:
            sys.exit("check_selection_bias: %s[%d] = %r is not a whole "
                     "multiple of %g of at most %d" % (name, e, b, rate,
                                                       steps))
        moved += round(units) != 0
    print("check_selection_bias: %s: %s" % (
        name, " ".join("%+d" % round(b / rate) for b in values)))
if moved == 0:
    sys.exit("check_selection_bias: no bias moved in %d steps" % steps)
print("check_selection_bias: ok (%d elements moved)" % moved)

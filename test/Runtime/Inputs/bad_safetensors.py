"""Writes a broken variant of a good safetensors file, for the tests of
fsdp-run --init-from's errors: each KIND breaks one rule of the format or
one match of the file to the plan.

usage: bad_safetensors.py KIND GOOD OUT      (KINDs: see BREAKS below)
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402


def with_header(text, body=b""):
    return struct.pack("<Q", len(text)) + text + body


def retyped(tensors, index, **changes):
    name, dtype, shape, raw = tensors[index]
    fields = dict(name=name, dtype=dtype, shape=shape, raw=raw)
    fields.update(changes)
    out = list(tensors)
    out[index] = (fields["name"], fields["dtype"], fields["shape"],
                  fields["raw"])
    return out


def entry_override(tensors, index, entry):
    """The file with tensor `index`'s header entry replaced by `entry`."""
    return st.encode(tensors, header_extra={tensors[index][0]: entry})


def offsets(tensors, index):
    at = sum(len(t[3]) for t in tensors[:index])
    return at, at + len(tensors[index][3])


def duplicate(tensors):
    """Two entries of one name: json.dumps cannot write that, so by hand."""
    good = st.encode(tensors, pad=False)
    (n,) = struct.unpack_from("<Q", good)
    text = good[8:8 + n]
    first = json.dumps(tensors[0][0]).encode()
    at = text.index(first)
    end = text.index(b"}", at) + 1
    text = text[:-1] + b"," + text[at:end] + b"}"
    return with_header(text, good[8 + n:])


def overlap(tensors):
    b0, e0 = offsets(tensors, 0)
    name, dtype, shape, raw = tensors[1]
    return entry_override(tensors, 1, {"dtype": dtype, "shape": shape,
                                       "data_offsets": [e0 - 4,
                                                        e0 - 4 + len(raw)]})


def inside(tensors):
    """The second tensor's offsets inside the first's bytes."""
    name, dtype, shape, raw = tensors[1]
    return entry_override(tensors, 1, {"dtype": dtype, "shape": shape,
                                       "data_offsets": [4, 4 + len(raw)]})


def gap(tensors):
    """Four unclaimed bytes between the first two tensors."""
    name, dtype, shape, raw = tensors[0]
    entry = {"dtype": dtype, "shape": shape, "data_offsets": [0, len(raw)]}
    shifted = {}
    at = len(raw) + 4
    for n, d, s, r in tensors[1:]:
        shifted[n] = {"dtype": d, "shape": s,
                      "data_offsets": [at, at + len(r)]}
        at += len(r)
    shifted[name] = entry
    good = st.encode(tensors, header_extra=shifted)
    (n,) = struct.unpack_from("<Q", good)
    body = good[8 + n:]
    return good[:8 + n] + body[:len(raw)] + b"\0" * 4 + body[len(raw):]


def set_entry(tensors, index, **fields):
    name, dtype, shape, raw = tensors[index]
    entry = {"dtype": dtype, "shape": shape,
             "data_offsets": list(offsets(tensors, index))}
    entry.update(fields)
    return entry_override(tensors, index, entry)


BREAKS = {
    "empty": lambda t, m: b"",
    "short": lambda t, m: st.encode(t, m)[:5],
    "length-past-end": lambda t, m: struct.pack("<Q", 1 << 40) +
    st.encode(t, m)[8:],
    "truncated": lambda t, m: st.encode(t, m)[:-4],
    "not-json": lambda t, m: with_header(b'{"a": [1, 2}  '),
    "not-object": lambda t, m: with_header(b"[1, 2, 3]"),
    "duplicate": lambda t, m: duplicate(t),
    "unknown-dtype": lambda t, m: set_entry(t, 0, dtype="F33"),
    "negative-shape": lambda t, m: set_entry(t, 0, shape=[-1, 16]),
    "float-shape": lambda t, m: set_entry(t, 0, shape=[2.5]),
    "one-offset": lambda t, m: set_entry(t, 0, data_offsets=[0]),
    "reversed": lambda t, m: set_entry(
        t, 0, data_offsets=list(reversed(offsets(t, 0)))),
    "size-mismatch": lambda t, m: set_entry(t, 0, shape=[t[0][2][0] + 1]),
    "overflow": lambda t, m: set_entry(t, 0, shape=[1 << 62, 8]),
    "overlap": lambda t, m: overlap(t),
    "inside": lambda t, m: inside(t),
    "gap": lambda t, m: gap(t),
    "trailing": lambda t, m: st.encode(t, m) + b"\0" * 8,
    "unknown-key": lambda t, m: set_entry(t, 0, offset=0),
    "bad-metadata": lambda t, m: st.encode(t, {"format": 1}),
    "missing": lambda t, m: st.encode(t[1:], m),
    "many-missing": lambda t, m: st.encode(t[:1], m),
    "extra": lambda t, m: st.encode(
        t + [("extra.weight", "F32", [2], b"\0" * 8)], m),
    "misshaped": lambda t, m: st.encode(
        retyped(t, 0, shape=list(reversed(t[0][2]))), m),
    "int-dtype": lambda t, m: st.encode(retyped(t, 0, dtype="I32"), m),
    "nan": lambda t, m: st.encode(retyped(
        t, 2, raw=t[2][3][:4] + struct.pack("<f", float("nan")) +
        t[2][3][8:]), m),
    "infinity": lambda t, m: st.encode(retyped(
        t, 5, raw=t[5][3][:-4] + struct.pack("<f", float("-inf"))), m),
}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in BREAKS:
        sys.exit(__doc__ + "KINDs: " + " ".join(BREAKS))
    kind, good, out = sys.argv[1:]
    tensors, metadata = st.read(good)
    with open(out, "wb") as f:
        f.write(BREAKS[kind](tensors, metadata))


if __name__ == "__main__":
    main()

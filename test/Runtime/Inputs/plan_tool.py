#!/usr/bin/env python3
"""Reads, edits and re-writes fsdp-run plan files (docs/plan-format.md).

    plan_tool.py dump PLAN
    plan_tool.py edit IN OUT [--keep-crc] EDIT...

An EDIT is `TABLE SELECTOR FIELD VALUE` or, for the tables that are one
record, `TABLE FIELD VALUE`:

    header  FIELD VALUE     version flags payload_size crc reserved0..2
    summary FIELD VALUE     world_size shard_size expert_size arena_size
                            peak_bytes peak_kernel
    program FIELD VALUE     loss_buffer grad_sq_buffer (`none`: 0xFFFFFFFF)
                            eval_kernels (a count, `all`, or `@NAME[.N][+K]`:
                            the kernels before that one, plus K)
    count   TABLE VALUE     the record count written for buffers, units,
                            params, kernels or strings (records unchanged)
    buffer  SEL FIELD VALUE kind dtype offset size shape unit input base
    unit    SEL FIELD VALUE name flat_size shard_buffer flags
    param   SEL FIELD VALUE name dtype shape init std no_weight_decay
                            selection_bias_rate unit unit_offset
    kernel  SEL FIELD VALUE opcode unit ins outs params
    string  SEL VALUE

Values: integers (any base, negative ones wrap to the field's width),
shapes as 2x3x4 (`-` for rank 0), lists as 3,4,5 (`-` for none), kinds,
element types and opcodes by name or number, strings as text.

Selectors: a record's index, `last` (a table's last record), for kernels
`@NAME` / `@NAME.N` (the first / N-th kernel of that opcode); for buffers
also `loss`, `grad_sq` (the gradients' sum of squares, where the plan
clips), `input.K` (step input K), `shard.U` (unit U's shard buffer)
and `@NAME[.N].in.J` / `@NAME[.N].out.J` (a kernel's operand).

The CRC is recomputed unless --keep-crc is given (or the edit sets it),
in the style of the file's version: from version 4 over the header with
the CRC field zeroed and the payload, before over the payload only.
`edit` also takes `clone TABLE SEL` (append a copy of a buffer, unit,
parameter or kernel record; its index is the table's old length),
`pad N` / `cut N` (N zero bytes added to / removed from the end of the
payload, its size and CRC following), `truncate N` (keep the first N
bytes of the output, header fields as edited) and `append N` (N zero
bytes after the payload, the header's payload size unchanged).

The module is also imported by test/fuzz/fuzz_plans.py.
"""

import struct
import sys
import zlib

MAGIC = b"FSDPPLAN"
HEADER = struct.Struct("<8sIIQIIQQ")
HEADER_FIELDS = ["magic", "version", "flags", "payload_size", "crc",
                 "reserved0", "reserved1", "reserved2"]
SUMMARY_FIELDS = ["world_size", "shard_size", "expert_size", "arena_size", "peak_bytes", "peak_kernel",
                  "peak_params", "peak_grads", "peak_optimizer",
                  "peak_activations", "peak_scratch", "peak_gathered",
                  "peak_inputs", "outside_arena_cpu", "outside_arena_cpu_mapped",
                  "blas_bytes_per_thread", "outside_arena_cuda",
                  "model_flops", "memory_budget"]
# Since version 16: expert_size (G) after shard_size.
SUMMARY = struct.Struct("<IIIQQQ11QdQ")
KINDS = ["input", "param", "grad", "adam_m", "adam_v", "activation",
         "scratch", "gathered", "shard_copy"]
DTYPES = ["f32", "i32", "bf16"]
# The kernels by opcode: generated from FSDPKernels.td (plan_opcodes.py).
from plan_opcodes import OPCODES  # noqa: E402
NONE = 0xFFFFFFFF

# Field formats of each record kind, for packing edited values.
BUFFER_FIELDS = {"kind": "I", "dtype": "I", "offset": "Q", "size": "Q",
                 "shape": "shape", "unit": "i", "input": "i",
                 "base": "i"}
UNIT_FIELDS = {"name": "I", "flat_size": "q", "shard_buffer": "I",
               "flags": "I"}
PARAM_FIELDS = {"name": "I", "dtype": "I", "shape": "shape", "init": "I",
                "std": "d", "no_weight_decay": "I",
                "selection_bias_rate": "d", "unit": "I",
                "unit_offset": "q"}
KERNEL_FIELDS = {"opcode": "I", "unit": "I", "ins": "list", "outs": "list",
                 "params": "floats"}
TABLES = ["buffers", "units", "params", "kernels", "strings"]


class PlanError(Exception):
    pass


def crc_of(header_bytes, payload):
    """The checksum a reader of the header's version expects."""
    version = struct.unpack_from("<I", header_bytes, 8)[0]
    if version < 4:
        return zlib.crc32(payload) & 0xFFFFFFFF
    zeroed = header_bytes[:24] + b"\0\0\0\0" + header_bytes[28:48]
    return zlib.crc32(payload, zlib.crc32(zeroed)) & 0xFFFFFFFF


class Cursor:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        s = struct.Struct("<" + fmt)
        if self.pos + s.size > len(self.data):
            raise PlanError("the payload ends in the middle of a record")
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values if len(values) > 1 else values[0]

    def shape(self):
        rank = self.take("I")
        if rank > 16:
            raise PlanError("a shape of rank %d" % rank)
        return [self.take("q") for _ in range(rank)]


def parse(data):
    """A plan's bytes as a dict of its header, summary and tables."""
    if len(data) < HEADER.size or data[:8] != MAGIC:
        raise PlanError("not a plan file")
    plan = {"header": dict(zip(HEADER_FIELDS, HEADER.unpack_from(data)))}
    c = Cursor(data[HEADER.size:])
    plan["summary"] = dict(zip(SUMMARY_FIELDS, c.take("IIIQQQ11QdQ")))
    n = c.take("I")  # since version 14: the model's Hugging Face config
    if c.pos + n > len(c.data):
        raise PlanError("the payload ends in the middle of a string")
    plan["model_config"] = c.data[c.pos:c.pos + n]
    c.pos += n
    plan["buffers"] = []
    for _ in range(c.take("I")):
        b = {"kind": c.take("I"), "dtype": c.take("I"),
             "offset": c.take("Q"), "size": c.take("Q")}
        b["shape"] = c.shape()
        b["unit"], b["input"] = c.take("i"), c.take("i")
        b["base"] = c.take("i")
        plan["buffers"].append(b)
    plan["units"] = [dict(zip(["name", "flat_size", "shard_buffer", "flags"],
                              c.take("IqII")))
                     for _ in range(c.take("I"))]
    plan["params"] = []
    for _ in range(c.take("I")):
        p = {"name": c.take("I"), "dtype": c.take("I"), "shape": c.shape()}
        p.update(zip(["init", "std", "no_weight_decay", "selection_bias_rate",
                      "unit", "unit_offset"], c.take("IdIdIq")))
        plan["params"].append(p)
    plan["loss_buffer"] = c.take("I")
    plan["grad_sq_buffer"] = c.take("I")
    plan["eval_kernels"] = c.take("I")
    plan["kernels"] = []
    for _ in range(c.take("I")):
        k = {"opcode": c.take("I"), "unit": c.take("I")}
        k["ins"] = [c.take("I") for _ in range(c.take("I"))]
        k["outs"] = [c.take("I") for _ in range(c.take("I"))]
        k["params"] = [c.take("d") for _ in range(c.take("I"))]
        plan["kernels"].append(k)
    plan["strings"] = []
    for _ in range(c.take("I")):
        n = c.take("I")
        if c.pos + n > len(c.data):
            raise PlanError("the payload ends in the middle of a string")
        plan["strings"].append(c.data[c.pos:c.pos + n])
        c.pos += n
    if c.pos != len(c.data):
        raise PlanError("trailing bytes after the string table")
    plan["counts"] = {}
    return plan


def pack(fmt, value):
    """Packs an integer into `fmt`, wrapping it to the field's width."""
    if fmt in "IiQq":
        bits = 32 if fmt in "Ii" else 64
        value &= (1 << bits) - 1
        fmt = fmt.upper()
    return struct.pack("<" + fmt, value)


def serialise(plan, fix_crc=True):
    """The plan's bytes; its header's payload size and (unless told
    otherwise) CRC follow the payload."""
    counts = plan["counts"]

    def count(table, n):
        return pack("I", counts.get(table, n))

    def shape(dims):
        return pack("I", len(dims)) + b"".join(pack("q", d) for d in dims)

    out = [SUMMARY.pack(*[plan["summary"][f] if f == "model_flops" else
                          plan["summary"][f] & ((1 << (32 if i < 3 else 64))
                                                - 1)
                          for i, f in enumerate(SUMMARY_FIELDS)])]
    out += [pack("I", len(plan["model_config"])), plan["model_config"]]
    out.append(count("buffers", len(plan["buffers"])))
    for b in plan["buffers"]:
        out += [pack("I", b["kind"]), pack("I", b["dtype"]),
                pack("Q", b["offset"]), pack("Q", b["size"]),
                shape(b["shape"]), pack("i", b["unit"]), pack("i", b["input"]),
                pack("i", b["base"])]
    out.append(count("units", len(plan["units"])))
    for u in plan["units"]:
        out += [pack("I", u["name"]), pack("q", u["flat_size"]),
                pack("I", u["shard_buffer"]), pack("I", u["flags"])]
    out.append(count("params", len(plan["params"])))
    for p in plan["params"]:
        out += [pack("I", p["name"]), pack("I", p["dtype"]), shape(p["shape"]),
                pack("I", p["init"]), pack("d", p["std"]),
                pack("I", p["no_weight_decay"]),
                pack("d", p["selection_bias_rate"]), pack("I", p["unit"]),
                pack("q", p["unit_offset"])]
    out.append(pack("I", plan["loss_buffer"]))
    out.append(pack("I", plan["grad_sq_buffer"]))
    out.append(pack("I", plan["eval_kernels"]))
    out.append(count("kernels", len(plan["kernels"])))
    for k in plan["kernels"]:
        out += [pack("I", k["opcode"]), pack("I", k["unit"])]
        for group in ("ins", "outs"):
            out.append(pack("I", len(k[group])))
            out += [pack("I", i) for i in k[group]]
        out.append(pack("I", len(k["params"])))
        out += [pack("d", v) for v in k["params"]]
    out.append(count("strings", len(plan["strings"])))
    for s in plan["strings"]:
        out += [pack("I", len(s)), s]
    payload = b"".join(out) + b"\0" * plan.get("pad", 0)
    if plan.get("cut"):
        payload = payload[:-plan["cut"]]
    h = dict(plan["header"])
    if not plan.get("keep_payload_size"):
        h["payload_size"] = len(payload)
    header = header_bytes(h)
    if fix_crc:
        h["crc"] = crc_of(header, payload)
        header = header_bytes(h)
    return header + payload


def header_bytes(h):
    widths = [32, 32, 64, 32, 32, 64, 64]
    values = [h["magic"]] + [h[f] & ((1 << w) - 1)
                             for f, w in zip(HEADER_FIELDS[1:], widths)]
    return HEADER.pack(*values)


def kernel_index(plan, sel):
    """`@NAME` or `@NAME.N`: the N-th (from 0) kernel of opcode NAME."""
    name, _, nth = sel[1:].partition(".")
    opcode = OPCODES.index(name)
    found = [i for i, k in enumerate(plan["kernels"]) if k["opcode"] == opcode]
    n = int(nth) if nth else 0
    if n >= len(found):
        raise PlanError("no kernel %s" % sel)
    return found[n]


def eval_kernels(plan, text):
    """A count, `all` (every kernel), or a kernel selector with an optional
    `+N`: the kernels before that one (plus N)."""
    if text == "all":
        return len(plan["kernels"])
    sel, _, more = text.partition("+")
    if not sel.startswith("@"):
        return int(text, 0)
    return kernel_index(plan, sel) + (int(more) if more else 0)


def select(plan, table, sel):
    if sel.lstrip("-").isdigit():
        return int(sel)
    if sel == "last":
        return len(plan[table]) - 1
    if table == "kernels" and sel.startswith("@"):
        return kernel_index(plan, sel)
    if table == "buffers":
        if sel == "loss":
            return plan["loss_buffer"]
        if sel == "grad_sq":
            return plan["grad_sq_buffer"]
        if sel.startswith("input."):
            k = int(sel.split(".")[1])
            return next(i for i, b in enumerate(plan["buffers"])
                        if b["input"] == k)
        if sel.startswith("shard."):
            return plan["units"][int(sel.split(".")[1])]["shard_buffer"]
        if sel.startswith("@"):
            parts = sel.split(".")
            for j, part in enumerate(parts):
                if part in ("in", "out"):
                    kernel = kernel_index(plan, ".".join(parts[:j]))
                    group = "ins" if part == "in" else "outs"
                    return plan["kernels"][kernel][group][int(parts[j + 1])]
    raise PlanError("bad selector %r for %s" % (sel, table))


def value_of(fmt, field, text):
    names = {"kind": KINDS, "dtype": DTYPES, "opcode": OPCODES}.get(field)
    if names and text in names:
        return names.index(text)
    if fmt == "shape":
        return [] if text == "-" else [int(d, 0) for d in text.split("x")]
    if fmt == "list":
        return [] if text == "-" else [int(d, 0) for d in text.split(",")]
    if fmt == "floats":
        return [] if text == "-" else [float(d) for d in text.split(",")]
    if fmt == "d":
        return float(text)
    return int(text, 0)


def apply_edits(plan, args):
    """Applies a list of EDIT words; returns (truncate, append, keep_crc)."""
    truncate = append = None
    keep_crc = False
    tables = {"buffer": ("buffers", BUFFER_FIELDS),
              "unit": ("units", UNIT_FIELDS),
              "param": ("params", PARAM_FIELDS),
              "kernel": ("kernels", KERNEL_FIELDS)}
    i = 0
    while i < len(args):
        what = args[i]
        if what == "--keep-crc":
            keep_crc, i = True, i + 1
        elif what in ("pad", "cut"):
            # Inside the payload (its size and CRC follow): N zero bytes
            # after the string table, or the last N bytes removed.
            plan[what] = int(args[i + 1], 0)
            i += 2
        elif what in ("truncate", "append"):
            n = int(args[i + 1], 0)
            truncate, append = (n, append) if what == "truncate" else (
                truncate, n)
            i += 2
        elif what == "header":
            field, v = args[i + 1], int(args[i + 2], 0)
            if field not in HEADER_FIELDS[1:]:
                raise PlanError("no header field %s" % field)
            plan["header"][field] = v
            if field == "crc":
                keep_crc = True
            if field == "payload_size":
                plan["keep_payload_size"] = True
            i += 3
        elif what == "summary":
            field = args[i + 1]
            if field not in SUMMARY_FIELDS:
                raise PlanError("no summary field %s" % field)
            plan["summary"][field] = (float(args[i + 2])
                                      if field == "model_flops"
                                      else int(args[i + 2], 0))
            i += 3
        elif what == "program":
            if args[i + 1] not in ("loss_buffer", "grad_sq_buffer",
                                   "eval_kernels"):
                raise PlanError("no program field %s" % args[i + 1])
            if args[i + 1] == "eval_kernels":
                plan["eval_kernels"] = eval_kernels(plan, args[i + 2])
            else:
                plan[args[i + 1]] = NONE if args[i + 2] == "none" else \
                    select(plan, "buffers", args[i + 2])
            i += 3
        elif what == "count":
            if args[i + 1] not in TABLES:
                raise PlanError("no table %s" % args[i + 1])
            plan["counts"][args[i + 1]] = int(args[i + 2], 0)
            i += 3
        elif what == "clone":
            # clone TABLE SEL: append a copy of a record (its id: the end).
            table = tables[args[i + 1]][0]
            index = select(plan, table, args[i + 2])
            record = plan[table][index]
            plan[table].append({k: (list(v) if isinstance(v, list) else v)
                                for k, v in record.items()})
            i += 3
        elif what == "string":
            plan["strings"][select(plan, "strings", args[i + 1])] = \
                args[i + 2].encode()
            i += 3
        elif what in tables:
            table, fields = tables[what]
            index = select(plan, table, args[i + 1])
            field, text = args[i + 2], args[i + 3]
            if field not in fields:
                raise PlanError("no %s field %s" % (what, field))
            if field in ("ins", "outs"):
                value = [select(plan, "buffers", t) for t in text.split(",")] \
                    if text != "-" else []
            elif field == "shard_buffer":
                value = select(plan, "buffers", text)
            else:
                value = value_of(fields[field], field, text)
            plan[table][index][field] = value
            i += 4
        else:
            raise PlanError("unknown edit %r" % what)
    return truncate, append, keep_crc


def dump(plan):
    h, s = plan["header"], plan["summary"]
    print("header " + " ".join("%s=%s" % (f, h[f]) for f in HEADER_FIELDS[1:]))
    print("summary " + " ".join("%s=%s" % (f, s[f]) for f in SUMMARY_FIELDS))
    for i, b in enumerate(plan["buffers"]):
        print("buffer %d kind=%s dtype=%s offset=%d size=%d shape=%s unit=%d "
              "input=%d base=%d" % (i, KINDS[b["kind"]], DTYPES[b["dtype"]],
                                    b["offset"], b["size"],
                                    "x".join(map(str, b["shape"])) or "-",
                                    b["unit"], b["input"], b["base"]))
    for i, u in enumerate(plan["units"]):
        print("unit %d name=%s flat_size=%d shard_buffer=%d flags=%d" % (
            i, plan["strings"][u["name"]].decode(), u["flat_size"],
            u["shard_buffer"], u["flags"]))
    for i, p in enumerate(plan["params"]):
        print("param %d name=%s shape=%s unit=%d unit_offset=%d" % (
            i, plan["strings"][p["name"]].decode(),
            "x".join(map(str, p["shape"])) or "-", p["unit"],
            p["unit_offset"]))
    print("program loss_buffer=%d grad_sq_buffer=%s eval_kernels=%d" % (
        plan["loss_buffer"], "none" if plan["grad_sq_buffer"] == NONE
        else plan["grad_sq_buffer"], plan["eval_kernels"]))
    for i, k in enumerate(plan["kernels"]):
        print("kernel %d %s ins=%s outs=%s params=%s" % (
            i, OPCODES[k["opcode"]], ",".join(map(str, k["ins"])) or "-",
            ",".join(map(str, k["outs"])) or "-",
            ",".join("%g" % v for v in k["params"]) or "-"))


def main(argv):
    if len(argv) >= 2 and argv[0] == "dump":
        dump(parse(open(argv[1], "rb").read()))
        return 0
    if len(argv) >= 3 and argv[0] == "edit":
        plan = parse(open(argv[1], "rb").read())
        truncate, append, keep_crc = apply_edits(plan, argv[3:])
        data = serialise(plan, fix_crc=not keep_crc)
        if append:
            data += b"\0" * append
        if truncate is not None:
            data = data[:truncate]
        open(argv[2], "wb").write(data)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (PlanError, ValueError, IndexError, StopIteration) as e:
        sys.stderr.write("plan_tool.py: error: %s\n" % e)
        sys.exit(1)

"""Rewrites a plan file (docs/plan-format.md, version 3) the way a corrupt,
stale or hand-made plan could be wrong, with a valid header and checksum,
so that only the loader's own checks can reject it (bad-plan-fields.test).

usage: edit_plan.py EDIT IN OUT
  version-2          the header says version 2 (an older layout)
  trailing-bytes     four bytes after the string table (payload size and
                     CRC updated)
  buffer-past-arena  the arena shrinks so that the buffer ending last starts
                     inside it but ends 4 bytes past it
  negative-offset    the first parameter's unit offset is -1
"""
import struct
import sys
import zlib

edit, src, dst = sys.argv[1:]
data = bytearray(open(src, "rb").read())
if data[:8] != b"FSDPPLAN" or struct.unpack_from("<I", data, 8)[0] != 3:
    sys.exit(f"edit_plan: {src} is not a version-3 plan (update this script "
             "with docs/plan-format.md)")
HEADER = 48
payload = bytearray(data[HEADER:])


class Reader:
    def __init__(self, at):
        self.at = at

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, payload, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) != 1 else values[0]


r = Reader(4 + 8 + 8 + 8 + 7 * 8)  # the summary
ARENA_AT = 4
buffers = []
for _ in range(r.take("I")):
    kind, dtype, offset, size, rank = r.take("IIQQI")
    r.take(f"{rank}q")
    r.take("ii")
    buffers.append((offset, size))
units = r.take("I")
for _ in range(units):
    r.take("IqI")
params = []
for _ in range(r.take("I")):
    name, dtype, rank = r.take("III")
    r.take(f"{rank}q")
    r.take("Id")
    r.take("II")
    params.append(r.at)  # where unit_offset (i64) starts
    r.take("q")

if edit == "version-2":
    struct.pack_into("<I", data, 8, 2)
    open(dst, "wb").write(data)
    sys.exit(0)
if edit == "trailing-bytes":
    payload += b"\0\0\0\0"
elif edit == "buffer-past-arena":
    offset, size = max(buffers, key=lambda b: b[0] + b[1])
    if offset == 0 or size <= 4:
        sys.exit("edit_plan: the last buffer starts at 0 or is tiny")
    struct.pack_into("<Q", payload, ARENA_AT, offset + size - 4)
elif edit == "negative-offset":
    struct.pack_into("<q", payload, params[0], -1)
else:
    sys.exit(f"edit_plan: unknown edit {edit}")
header = bytearray(data[:HEADER])
struct.pack_into("<Q", header, 16, len(payload))
struct.pack_into("<I", header, 24, zlib.crc32(payload) & 0xFFFFFFFF)
open(dst, "wb").write(header + payload)

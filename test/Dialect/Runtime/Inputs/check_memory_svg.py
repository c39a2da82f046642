#!/usr/bin/env python3
"""Checks a --fsdp-plan-memory="svg=FILE" picture: well-formed SVG, the
legend's kinds, the peak marker's value in bytes (and the budget's, when
expected) against the report's, and, given a PNG that rsvg-convert
rendered from it, the PNG's size.

  check_memory_svg.py SVG --peak BYTES [--budget BYTES] [--png PNG WxH]

Prints one line; exits 1 naming the first rule broken.
"""
import argparse
import re
import struct
import sys
import xml.etree.ElementTree as ET

KINDS = ["parameters", "optimizer", "gradients", "inputs", "gathered",
         "activations", "scratch"]


def fail(why):
    print("check_memory_svg: " + why, file=sys.stderr)
    sys.exit(1)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        fail("%s is not a PNG" % path)
    return struct.unpack(">II", head[16:24])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("svg")
    parser.add_argument("--peak", type=int, required=True)
    parser.add_argument("--budget", type=int)
    parser.add_argument("--png", nargs=2, metavar=("PNG", "WxH"))
    a = parser.parse_args()
    try:
        root = ET.parse(a.svg).getroot()
    except (OSError, ET.ParseError) as e:
        fail("%s is not well-formed SVG (%s)" % (a.svg, e))
    if root.tag != "{http://www.w3.org/2000/svg}svg":
        fail("the root element is %s, not svg" % root.tag)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    missing = [k for k in KINDS if k not in texts]
    if missing:
        fail("the legend lacks %s" % ", ".join(missing))
    peaks = [int(m.group(1)) for t in texts
             for m in [re.match(r"peak [0-9.e+-]+ GB \(([0-9]+) bytes\)", t)] if m]
    if peaks != [a.peak]:
        fail("peak markers %s, the report's peak is %d" % (peaks, a.peak))
    budgets = [int(m.group(1)) for t in texts
               for m in [re.match(r"budget [0-9.e+-]+ GB \(([0-9]+) bytes\)", t)] if m]
    if budgets != ([a.budget] if a.budget else []):
        fail("budget markers %s, expected %s" % (budgets, a.budget))
    line = "memory svg ok: peak %d bytes" % a.peak
    if a.png:
        want = tuple(int(v) for v in a.png[1].split("x"))
        got = png_size(a.png[0])
        if got != want:
            fail("the PNG is %dx%d, expected %dx%d" % (got + want))
        line += ", png %dx%d" % got
    print(line)


if __name__ == "__main__":
    main()

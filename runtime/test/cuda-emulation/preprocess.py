#!/usr/bin/env python3
"""Turns the CUDA kernel sources into C++ for the CPU emulation (emu.h).

usage: preprocess.py SRC_DIR DST_DIR

Rewrites every launch kernel<<<cfg>>>(args) into
::emu::launch("kernel", ::emu::Cfg(cfg), [=] { kernel(args); }) (by value:
a launch on a stream runs later, on the stream's worker), registers
every __shared__ array with the emulator (which fills it with NaN bytes
before each block, so a read of unwritten shared memory shows, and knows
the alignment it was declared with, all a GPU promises), and writes
each .cu file as .cpp (headers as they are) into DST_DIR, keeping line
numbers so that failures point at the real source lines.
"""
import os, re, sys

SRC, DST = sys.argv[1], sys.argv[2]


def match_back_angle(s, i):
    # s[i] == '>'; return index of matching '<'
    depth = 0
    while i >= 0:
        if s[i] == '>':
            depth += 1
        elif s[i] == '<':
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    raise ValueError("unbalanced <>")


def match_paren(s, i):
    # s[i] == '('; return index of matching ')'
    depth = 0
    while i < len(s):
        if s[i] == '(':
            depth += 1
        elif s[i] == ')':
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced ()")


def rewrite(s):
    out = []
    pos = 0
    n = 0
    while True:
        k = s.find("<<<", pos)
        if k < 0:
            out.append(s[pos:])
            break
        # kernel expression ends before k (skip whitespace)
        e = k - 1
        while s[e].isspace():
            e -= 1
        b = e
        if s[b] == '>':
            b = match_back_angle(s, b) - 1
        while b >= 0 and (s[b].isalnum() or s[b] in "_:"):
            b -= 1
        b += 1
        kernel = s[b:e + 1]
        cend = s.find(">>>", k)
        cfg = s[k + 3:cend]
        p = cend + 3
        while s[p].isspace():
            p += 1
        assert s[p] == '(', s[p - 20:p + 20]
        q = match_paren(s, p)
        args = s[p + 1:q]
        name = re.sub(r"\s+", " ", kernel)
        out.append(s[pos:b])
        nl = s[e + 1:k].count("\n") + s[cend + 3:p].count("\n")
        out.append('::emu::launch("%s", ::emu::Cfg(%s), [=] { %s(%s); })' %
                   (name, cfg, kernel, args) + "\n" * nl)
        pos = q + 1
        n += 1
    return "".join(out), n


os.makedirs(DST, exist_ok=True)
for f in sorted(os.listdir(SRC)):
    if not (f.endswith(".cu") or f.endswith(".cuh") or f.endswith(".h")):
        continue
    s = open(os.path.join(SRC, f)).read()
    s2, n = rewrite(s)
    # __shared__ [__align__(N)] TYPE NAME[...], ...;
    def reg(m):
        names = re.findall(r"(?:^|,)\s*(\w+)\s*\[", m.group(4))
        def align(x):  # all a GPU promises of the array's address
            a = "alignof(decltype(%s))" % x
            return a if not m.group(2) else "(%s) > %s ? (%s) : %s" % (
                m.group(2), a, m.group(2), a)
        return m.group(0) + "".join(
            " ::emu::regShared(&%s, sizeof(%s), %s);" % (x, x, align(x))
            for x in names)
    s2 = re.sub(r"__shared__\s+(__align__\s*\(([^)]*)\)\s*)?"
                r"(\w+)\s+([^;]*);", reg, s2)
    name = f[:-3] + ".cpp" if f.endswith(".cu") else f
    open(os.path.join(DST, name), "w").write(s2)

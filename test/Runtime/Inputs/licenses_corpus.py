#!/usr/bin/env python3
"""Writes the licence texts every Debian system has (base-files'
/usr/share/common-licenses, some 240 KB of English prose) into one file,
in name order: real text large enough that a small model learns from it
for hundreds of steps instead of memorising it (test/Runtime's own corpus
is 2.7 KB)."""
import os
import sys

root = "/usr/share/common-licenses"
with open(sys.argv[1], "wb") as out:
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(path) and not os.path.islink(path):
            out.write(open(path, "rb").read())

"""Hand-edits a lowered step program (fsdprt IR) the way a corrupt or
hand-written plan could be wrong, for bad-streams.test.

usage: edit_program.py EDIT IN OUT
  drop-first-wait    removes the first wait kernel
  retoken-scatter    the reduce-scatter starts under token 7 (its wait still
                     names the old token)
  reuse-token        the second gather reuses the first's token (and so
                     does its wait)
  bad-stream         the first collective goes to stream 5
  wrong-wait-buffers the reduce-scatter's wait names the shard twice
  orphan-group       the first gather claims to join a group before it
"""
import re
import sys

edit, src, dst = sys.argv[1:]
lines = open(src).read().split("\n")


def first(pattern):
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            return i
    sys.exit(f"edit_program: no line matches {pattern}")


if edit == "drop-first-wait":
    del lines[first(r'fsdprt\.kernel "wait"')]
elif edit == "retoken-scatter":
    i = first(r'fsdprt\.kernel "reduce_scatter"')
    lines[i] = re.sub(r"token = \d+", "token = 7", lines[i])
elif edit == "reuse-token":
    text = "\n".join(lines).replace("token = 2 : i64}", "token = 1 : i64}")
    lines = text.split("\n")
elif edit == "bad-stream":
    i = first(r"stream = 1 :")
    lines[i] = lines[i].replace("stream = 1 :", "stream = 5 :", 1)
elif edit == "wrong-wait-buffers":
    i = first(r'fsdprt\.kernel "reduce_scatter"')
    token = re.search(r"token = (\d+)", lines[i]).group(1)
    j = first(rf'fsdprt\.kernel "wait" .*token = {token} ')
    lines[j] = re.sub(r"ins\((%\w+), (%\w+) : ([^,]+), ([^)]+)\)",
                      r"ins(\2, \2 : \4, \4)", lines[j])
elif edit == "orphan-group":
    i = first(r'fsdprt\.kernel "all_gather"')
    lines[i] = lines[i].replace("group = 0", "group = 1", 1)
else:
    sys.exit(f"edit_program: unknown edit {edit}")
open(dst, "w").write("\n".join(lines))

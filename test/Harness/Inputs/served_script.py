"""A script that %python runs in a fork of its server (it names torch):
prints what a new interpreter would have, reads its standard input, and
ends as its first argument says (a status, "raise" or "abort")."""
import os
import sys
import tempfile

served = "torch" in sys.modules  # a new interpreter has not imported it
import numpy as np  # noqa: E402
import torch  # noqa: E402

print("python_server_check: %s" % ("served" if served else "fresh"))
print("argv %s" % " ".join(sys.argv[1:]))
print("name %s file %s" % (__name__, os.path.basename(__file__)))
print("path0 %s" % (sys.path[0] == os.path.dirname(os.path.realpath(__file__))))
print("cwd %s" % os.path.basename(os.getcwd()))
print("tmpdir %s" % (tempfile.gettempdir() == os.environ.get("TMPDIR")))
print("test %s" % os.environ.get("LIT_CURRENT_TESTCASE"))
print("stdin %s" % sys.stdin.readline().strip())
print("torch %r" % torch.rand(1).item())
print("numpy %r" % np.random.rand())
print("to stderr", file=sys.stderr)
sys.stdout.flush()
if sys.argv[1] == "raise":
    raise ValueError("raised")
if sys.argv[1] == "abort":
    os.abort()
sys.exit(int(sys.argv[1]))

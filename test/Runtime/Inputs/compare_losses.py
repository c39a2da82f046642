"""Two --report-json files' losses, step by step: usage compare_losses.py
A.json B.json TOL. Exits 1 unless they have as many steps and every
step's |a - b| / |b| is within TOL; prints the worst."""
import json
import sys

a, b = (json.load(open(path))["losses"] for path in sys.argv[1:3])
tol = float(sys.argv[3])
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
if len(a) != len(b) or not a or worst > tol:
    sys.exit(f"compare_losses: {len(a)} and {len(b)} steps, max rel diff "
             f"{worst:.3g} over {tol:g}")
print(f"{len(a)} steps, max rel diff {worst:.3g} within {tol:g}")

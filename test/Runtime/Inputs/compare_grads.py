"""Compares gradient dumps of fsdp-step-check (step 1 of the same model and
inputs at several world sizes): the global loss within a relative
tolerance, and every element of every parameter's full gradient within
REL_TOL of the parameter's largest gradient element (elements near zero
are sums with cancellation, whose order differs with the batch split).

usage: compare_grads.py REL_TOL REFERENCE DUMP...
Prints the worst relative error per dump; exits 1 on any mismatch.
"""
import sys


def load(path):
    loss, grads = None, {}
    for line in open(path):
        words = line.split()
        if words[0] == "loss":
            loss = float(words[1])
        elif words[0] == "grad":
            name, count = words[1], int(words[2])
            values = [float(w) for w in words[3:]]
            if len(values) != count:
                sys.exit(f"compare_grads: {path}: {name}: {len(values)} "
                         f"values, expected {count}")
            grads[name] = values
    if loss is None or not grads:
        sys.exit(f"compare_grads: {path}: not a gradient dump")
    return loss, grads


def main():
    tol = float(sys.argv[1])
    ref_loss, ref = load(sys.argv[2])
    failed = False
    for path in sys.argv[3:]:
        loss, grads = load(path)
        if abs(loss - ref_loss) > tol * abs(ref_loss):
            print(f"compare_grads: {path}: loss {loss} vs {ref_loss}")
            failed = True
        if sorted(grads) != sorted(ref):
            print(f"compare_grads: {path}: other parameters than the reference")
            failed = True
            continue
        worst, where = 0.0, ""
        for name, want in ref.items():
            got = grads[name]
            scale = max(abs(w) for w in want)
            if scale == 0.0:
                scale = 1e-30
            for i, (g, w) in enumerate(zip(got, want)):
                err = abs(g - w) / scale
                if err > worst:
                    worst, where = err, f"{name}[{i}] {g} vs {w}"
                if err > tol:
                    failed = True
        status = "ok" if worst <= tol else "FAILED"
        print(f"compare_grads: {path}: {len(ref)} gradients, worst "
              f"{worst:.2e} at {where} {status}")
    sys.exit(1 if failed else 0)


main()

#!/usr/bin/env python3
"""Checks the memory counter tracks of a Chrome trace (fsdp-run --trace,
--fsdp-simulate trace=): per process, every "memory by kind" sample sums to
the "memory total" sample at the same time, the total's maximum is the
expected peak, and the "memory budget" track, where expected, is that
constant.

  check_memory_counters.py TRACE [TRACE...] --peak BYTES | --report JSON
                           [--budget BYTES] [--kinds a,b,...]

--report takes the peak from an fsdp-run --report-json file
(peak_bytes_predicted). Prints one line per trace; exits 1 naming the
first rule broken.
"""
import argparse
import json
import sys


def fail(path, why):
    print("check_memory_counters: %s: %s" % (path, why), file=sys.stderr)
    sys.exit(1)


def counters(events, name):
    """{(pid, ts): args} of the counter events called `name`."""
    return {(e["pid"], e["ts"]): e["args"] for e in events
            if e.get("ph") == "C" and e.get("name") == name}


def check(path, peak, budget, kinds):
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(path, "not a Chrome trace (%s)" % e)
    by_kind = counters(events, "memory by kind")
    total = counters(events, "memory total")
    if not by_kind or not total:
        fail(path, "no memory counters")
    if set(by_kind) != set(total):
        fail(path, "by-kind and total samples at different times")
    for key, args in by_kind.items():
        if kinds and sorted(args) != sorted(kinds):
            fail(path, "kinds %s, expected %s" % (sorted(args), kinds))
        (value,) = total[key].values()
        if sum(args.values()) != value:
            fail(path, "at pid %s ts %s the kinds sum to %d, the total is %d"
                 % (key[0], key[1], sum(args.values()), value))
    for pid in {key[0] for key in total}:
        most = max(v for (p, _), a in total.items() if p == pid
                   for v in a.values())
        if most != peak:
            fail(path, "pid %s peaks at %d bytes, expected %d"
                 % (pid, most, peak))
    budgets = counters(events, "memory budget")
    if budget is not None:
        values = {v for a in budgets.values() for v in a.values()}
        if values != {budget}:
            fail(path, "budget track %s, expected %d" % (sorted(values),
                                                          budget))
    elif budgets:
        fail(path, "a budget track without a budget")
    print("memory counters ok: %s: %d samples, peak %d bytes"
          % (path.rsplit("/", 1)[-1], len(total), peak))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--peak", type=int)
    parser.add_argument("--report")
    parser.add_argument("--budget", type=int)
    parser.add_argument("--kinds")
    a = parser.parse_args()
    peak = a.peak
    if a.report:
        with open(a.report) as f:
            peak = json.load(f)["peak_bytes_predicted"]
    if peak is None:
        parser.error("--peak or --report is required")
    for path in a.traces:
        check(path, peak, a.budget, a.kinds.split(",") if a.kinds else None)


if __name__ == "__main__":
    main()

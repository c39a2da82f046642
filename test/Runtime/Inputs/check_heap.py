#!/usr/bin/env python3
"""Checks a --report-json report's heap figures against the arena:

  check_heap.py REPORT STEP_SLACK FIXED_SLACK [--like BASELINE EXTRA]

* while training, the heap rises above its after-setup level by at most
  1% of the arena plus STEP_SLACK bytes (a step allocates nothing that
  grows with the model: staging, windows and scratch are set up before);
* at its peak the heap holds at most the arena plus 1% of it plus
  FIXED_SLACK bytes (the libraries' and MPI's fixed share, docs/memory.md);
* what it holds beyond the arena is the compiler's prediction (the plan's
  outside-the-arena figure) within 25% of it plus 1 MiB: the prediction's
  largest line (Open MPI's start-up) is a measurement on this project's
  machines, and another machine's Open MPI may differ a little.

* --like: while training, the heap rises above its after-setup level at
  most EXTRA bytes more than in BASELINE's run (the same training without
  what REPORT's run adds, e.g. checkpoints: what that adds is allocated at
  setup, where the setup heap counts it, not while training).

Prints the figures and exits 1 naming the rule that fails.
"""
import json
import sys

report = json.load(open(sys.argv[1]))
step_slack, fixed_slack = int(sys.argv[2]), int(sys.argv[3])
like = sys.argv[5:7] if sys.argv[4:5] == ["--like"] else None
arena = report["arena_bytes_predicted"]
setup, peak = report["heap_bytes_after_setup"], report["heap_bytes_peak"]
print(f"arena {arena}, heap after setup {setup}, peak {peak}: "
      f"{peak - setup} while training, {peak - arena} above the arena")
ok = True
if peak - setup > arena // 100 + step_slack:
    print(f"FAIL: training allocated {peak - setup} bytes, more than 1% of "
          f"the arena + {step_slack}")
    ok = False
if peak - arena > arena // 100 + fixed_slack:
    print(f"FAIL: the heap peak is {peak - arena} bytes above the arena, more "
          f"than 1% of it + {fixed_slack}")
    ok = False
predicted = report["outside_arena_bytes_predicted"]
print(f"outside the arena: {peak - arena} measured, {predicted} predicted")
if abs((peak - arena) - predicted) > predicted // 4 + (1 << 20):
    print(f"FAIL: {peak - arena} bytes outside the arena, the compiler "
          f"predicted {predicted}")
    ok = False
# The resident set: the compiler's figure is an estimate with upper bounds
# in it (the BLAS's panels, code and stacks), so the process must stay
# below it, and not so far below that the estimate says nothing.
if "rss_bytes_predicted" in report and report["rss_bytes_predicted"]:
    rss, rss_predicted = report["rss_bytes_peak"], report["rss_bytes_predicted"]
    print(f"resident: {rss} measured, {rss_predicted} predicted")
    if rss > rss_predicted:
        print(f"FAIL: the resident set peaked at {rss} bytes, above the "
              f"compiler's {rss_predicted}")
        ok = False
    if rss < rss_predicted // 2:
        print(f"FAIL: the resident set peaked at {rss} bytes, under half "
              f"the compiler's {rss_predicted}")
        ok = False
if like:
    base = json.load(open(like[0]))
    extra = int(like[1])
    grew = peak - setup
    base_grew = base["heap_bytes_peak"] - base["heap_bytes_after_setup"]
    print(f"while training: {grew} bytes, {base_grew} in the baseline run "
          f"({grew - base_grew:+d}); after setup: "
          f"{setup - base['heap_bytes_after_setup']:+d} bytes")
    if grew - base_grew > extra:
        print(f"FAIL: training allocated {grew - base_grew} bytes more than "
              f"the baseline run, more than {extra}: allocations the report "
              f"did not predict")
        ok = False
sys.exit(0 if ok else 1)

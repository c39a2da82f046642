#!/usr/bin/env python3
"""Asserts that fsdp-run reports (--report-json) hold bitwise-equal losses.

  same_losses.py REPORT REPORT...

The reports print each loss with 9 significant digits, which round-trips a
float exactly: equal text is equal bits.
"""
import json
import sys

reports = [(path, json.load(open(path))["losses"]) for path in sys.argv[1:]]
first_path, first = reports[0]
if not first:
    sys.exit(f"{first_path}: no losses")
for path, losses in reports[1:]:
    if losses != first:
        sys.exit(f"losses differ:\n  {first_path}: {first}\n  {path}: {losses}")
print(f"same losses: {len(reports)} runs, {len(first)} steps each")

#!/usr/bin/env python3
"""Writes the benchmark workloads (bench/README.md) as compact canonical JSON, using the
generator beside this file (bench/workload.py, pure Python) so every tool measures the same
bytes.  Usage: gen_bodies.py OUTDIR"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload  # noqa: E402

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]

bodies = {
    "Order": workload.order(),
    "RecordList_1000": workload.record_list(1000),
    "RecordList_10000": workload.record_list(10000),
    "LogBatch_1000": workload.log_batch(1000),
    "LogBatch_50000": workload.log_batch(50000),
}
os.makedirs(out, exist_ok=True)
for name, d in bodies.items():
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        f.write(json.dumps(d, separators=(",", ":")))
    print(f"{name:18s} {os.path.getsize(path):>9d} B JSON")

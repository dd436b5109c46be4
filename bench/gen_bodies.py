#!/usr/bin/env python3
"""Writes the shared benchmark workloads (../shared/bench/README.md) as compact canonical JSON,
using the shared generator (../shared/peers/tools/workload.py, pure Python) so every tool
measures the same bytes.  Usage: gen_bodies.py OUTDIR [SHARED_DIR]"""
import json
import os
import sys

out = sys.argv[1]
shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "shared")
sys.path.insert(0, os.path.join(shared, "peers", "tools"))
import workload  # noqa: E402

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

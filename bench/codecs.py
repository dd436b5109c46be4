#!/usr/bin/env python3
"""The Python codecs a FastAPI-style JSON edge runs, on the shared workloads
(BENCHMARKS.md, "Other figures").

`make bench-codecs`. For each workload body (bench/gen_bodies.py's JSON, in target/bench-bodies)
it times, from and to Python objects as a Python service holds them:

- orjson.dumps / orjson.loads
- msgpack.packb / msgpack.unpackb
- protobuf SerializeToString / ParseFromString (google.protobuf, message classes built from
  proto/bench/bench.proto through `protoc --descriptor_set_out`)

and prints MB/s per *JSON byte of the workload* (the denominator protogate's criterion benches
use, `Throughput::Bytes(json.len())`), so the rows stand next to `make bench`'s.

Usage: bench/codecs.py BODIES_DIR [--seconds S]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

ROOT = Path(__file__).resolve().parent.parent
# (workload body, its message), as crates/transcode/benches/transcode.rs names them.
WORKLOADS = [
    ("Order", "bench.v1.Order"),
    ("RecordList_1000", "bench.v1.RecordList"),
    ("LogBatch_1000", "bench.v1.LogBatch"),
]


def message_classes():
    """bench.proto's messages, built from its descriptor set (no generated code)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.pb"
        subprocess.run(
            ["protoc", "--include_imports", f"--descriptor_set_out={out}",
             "-I", str(ROOT / "proto/bench"), "bench.proto"],
            check=True,
        )
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def rate(fn, size, seconds):
    """MB/s of `size` bytes per call of `fn`, over about `seconds` (best of three rounds)."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds / 10:
        fn()
        n += 1
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(max(n * 3, 1)):
            fn()
        elapsed = time.perf_counter() - start
        best = max(best, size * max(n * 3, 1) / elapsed / 1e6)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bodies", type=Path)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    cls = message_classes()
    print(f"python {sys.version.split()[0]}, orjson {orjson.__version__}, "
          f"msgpack {'.'.join(map(str, msgpack.version))}, "
          f"protobuf {__import__('google.protobuf').protobuf.__version__}")
    print("MB/s per JSON byte of the workload (higher is faster)\n")
    print("| workload | JSON bytes | orjson.dumps | orjson.loads | msgpack.packb | msgpack.unpackb "
          "| protobuf SerializeToString | protobuf ParseFromString |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, message in WORKLOADS:
        text = (args.bodies / f"{name}.json").read_bytes()
        obj = orjson.loads(text)
        packed = msgpack.packb(obj)
        msg = json_format.Parse(text, cls(message)())
        wire = msg.SerializeToString()
        Message = cls(message)
        size = len(text)
        cells = [
            rate(lambda: orjson.dumps(obj), size, args.seconds),
            rate(lambda: orjson.loads(text), size, args.seconds),
            rate(lambda: msgpack.packb(obj), size, args.seconds),
            rate(lambda: msgpack.unpackb(packed), size, args.seconds),
            rate(lambda: msg.SerializeToString(), size, args.seconds),
            rate(lambda: Message.FromString(wire), size, args.seconds),
        ]
        print(f"| {name} | {size:,} | " + " | ".join(f"{c:,.0f}" for c in cells) + " |")


if __name__ == "__main__":
    main()

//! Allocations per conversion on the benchmark workloads (bench/README.md), counted by a
//! wrapping global allocator. Buffers are reused across conversions, as the gateway does; the
//! count is what one request costs once warm. Run with `make bench` (after the bodies exist).

// Benchmark code, not the gateway: a failed unwrap or expect stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use transcode::{Format, Options};

#[path = "../tests/common/mod.rs"]
mod common;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn count(mut f: impl FnMut()) -> (u64, u64) {
    f(); // warm: buffers grow to size once
    let (a, b) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    const RUNS: u64 = 5;
    for _ in 0..RUNS {
        f();
    }
    (
        (ALLOCS.load(Ordering::Relaxed) - a) / RUNS,
        (BYTES.load(Ordering::Relaxed) - b) / RUNS,
    )
}

fn main() {
    let schema = common::compile_proto("bench", "bench.proto");
    let opts = Options::default();
    println!(
        "| workload | path | JSON → protobuf | protobuf → JSON | msgpack → protobuf | protobuf → msgpack |"
    );
    println!("|---|---|---|---|---|---|");
    for name in [
        "Order",
        "RecordList_1000",
        "RecordList_10000",
        "LogBatch_1000",
        "LogBatch_50000",
    ] {
        let common::BenchWorkload { desc, json, pb, mp } = common::bench_workload(&schema, name);
        let mut out = Vec::new();
        let mut row = |path: &str, direct: bool| {
            let mut cell = |from: Format, to: Format, input: &[u8]| {
                let (n, bytes) = count(|| {
                    out.clear();
                    let r = match (direct, from) {
                        (true, Format::Protobuf) => {
                            schema.from_protobuf(&desc, to, input, &mut out, &opts)
                        }
                        (true, _) => schema.to_protobuf(&desc, from, input, &mut out, &opts),
                        (false, Format::Protobuf) => {
                            transcode::reference::from_protobuf(&desc, to, input, &mut out, &opts)
                        }
                        (false, _) => {
                            transcode::reference::to_protobuf(&desc, from, input, &mut out, &opts)
                        }
                    };
                    r.expect("converts");
                });
                format!("{n} ({} KiB)", bytes / 1024)
            };
            let cells = [
                cell(Format::Json, Format::Protobuf, &json),
                cell(Format::Protobuf, Format::Json, &pb),
                cell(Format::Msgpack, Format::Protobuf, &mp),
                cell(Format::Protobuf, Format::Msgpack, &pb),
            ];
            println!("| {name} | {path} | {} |", cells.join(" | "));
        };
        row("direct", true);
        row("reference", false);
    }
}

//! Support shared by the tests: the workspace's paths, schemas compiled from `proto/`, and one
//! seeded random generator. The transcoding crate's test files declare it as `mod common;`
//! (the differential test, a directory, by `#[path]`); the integration tests' crate includes
//! this file by path too (`tests/src/lib.rs`), so each helper has one definition. Each test
//! binary uses part of it.
#![allow(dead_code)]
// Test support: a failed unwrap or expect fails the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use transcode::Schema;

/// The workspace root: the nearest directory above the crate under test that holds
/// `Cargo.lock` (`crates/transcode/../..`, `tests/..`).
pub fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("a Cargo.lock above the crate")
}

/// Reads `proto/<dir>/<name>` for [`Schema::compile`]: the text, or `None` where there is no
/// such file (the bundled well-known types and google.api/google.rpc files need none).
pub fn proto_source(dir: &str) -> impl Fn(&str) -> Option<String> + 'static {
    let dir = workspace().join("proto").join(dir);
    move |name| std::fs::read_to_string(dir.join(name)).ok()
}

/// Compiles `proto/<dir>/<file>` (its imports resolved there and from the bundled files);
/// panics naming the file and the error when it does not compile.
pub fn compile_proto(dir: &str, file: &str) -> Schema {
    Schema::compile(&[file.to_owned()], proto_source(dir))
        .unwrap_or_else(|e| panic!("{file} compiles: {e}"))
}

/// Where the benchmark workloads' bodies are (`bench/gen_bodies.py` writes them):
/// `PROTOGATE_BENCH_BODIES`, else `target/bench-bodies`.
pub fn bench_bodies() -> std::path::PathBuf {
    std::env::var_os("PROTOGATE_BENCH_BODIES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench-bodies"))
}

/// The message of a benchmark workload (`Order`, `RecordList_1000`, `LogBatch_50000`…), by
/// the name before its size.
pub fn bench_message(workload: &str) -> &'static str {
    match workload.split('_').next() {
        Some("Order") => "bench.v1.Order",
        Some("RecordList") => "bench.v1.RecordList",
        Some("LogBatch") => "bench.v1.LogBatch",
        _ => panic!("unknown workload {workload}"),
    }
}

/// A benchmark workload read and converted once: its message, its JSON body, and that body
/// as protobuf and as MessagePack (both by the gateway's own conversions).
pub struct BenchWorkload {
    pub desc: transcode::MessageDescriptor,
    pub json: Vec<u8>,
    pub pb: Vec<u8>,
    pub mp: Vec<u8>,
}

/// Loads `workload` (`Order`, `RecordList_1000`…) from [`bench_bodies`]; panics naming the
/// file when the bodies were not written (`make bench` writes them).
pub fn bench_workload(schema: &Schema, workload: &str) -> BenchWorkload {
    let desc = schema
        .message(bench_message(workload))
        .expect("bench message");
    let path = bench_bodies().join(format!("{workload}.json"));
    let json = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make bench`)", path.display()));
    let opts = transcode::Options::default();
    let mut pb = Vec::new();
    schema
        .to_protobuf(&desc, transcode::Format::Json, &json, &mut pb, &opts)
        .expect("the workload converts");
    let mut mp = Vec::new();
    schema
        .from_protobuf(&desc, transcode::Format::Msgpack, &pb, &mut mp, &opts)
        .expect("the workload renders");
    BenchWorkload { desc, json, pb, mp }
}

/// xorshift64* (Vigna 2016): deterministic, fast, no dependency. [`Rng::new`] seeds it through
/// splitmix64, so neighbouring seeds diverge at once.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng::from_state(z)
    }

    /// A generator whose state is `state` as it is (no seeding step; 0, which xorshift never
    /// leaves, becomes 1).
    pub fn from_state(state: u64) -> Rng {
        Rng(if state == 0 { 1 } else { state })
    }

    pub fn u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.u64() % n }
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn irange(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.u64() as u128 % span) as i128) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// One of `xs`, uniformly (`xs` not empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.index(xs.len())]
    }
}

//! Runs one conversion of a shared workload many times, for profilers and instruction counts:
//! `cargo build --release -p protogate-transcode --example profile` then e.g.
//! `valgrind --tool=callgrind target/release/examples/profile json-to-protobuf RecordList_1000 20`.
//! Prints the JSON bytes processed, so instructions per JSON byte = Ir / that number.

// A measuring example, not the gateway: a failed unwrap or expect stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use transcode::{Format, Options};

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (direction, workload, runs) = match args.as_slice() {
        [_, d, w, n] => (d.clone(), w.clone(), n.parse::<usize>().expect("runs")),
        _ => {
            eprintln!(
                "usage: profile json-to-protobuf|protobuf-to-json|msgpack-to-protobuf|protobuf-to-msgpack|floor|validate|reference-json-to-protobuf|reference-protobuf-to-json WORKLOAD RUNS"
            );
            std::process::exit(2);
        }
    };
    let schema = common::compile_proto("bench", "bench.proto");
    let common::BenchWorkload { desc, json, pb, mp } = common::bench_workload(&schema, &workload);
    let opts = Options::default();
    let mut out = Vec::new();
    for _ in 0..runs {
        out.clear();
        match direction.as_str() {
            "json-to-protobuf" => drop(
                schema
                    .to_protobuf(&desc, Format::Json, &json, &mut out, &opts)
                    .unwrap(),
            ),
            "protobuf-to-json" => drop(
                schema
                    .from_protobuf(&desc, Format::Json, &pb, &mut out, &opts)
                    .unwrap(),
            ),
            "msgpack-to-protobuf" => drop(
                schema
                    .to_protobuf(&desc, Format::Msgpack, &mp, &mut out, &opts)
                    .unwrap(),
            ),
            "protobuf-to-msgpack" => drop(
                schema
                    .from_protobuf(&desc, Format::Msgpack, &pb, &mut out, &opts)
                    .unwrap(),
            ),
            "reference-json-to-protobuf" => drop(
                transcode::reference::to_protobuf(&desc, Format::Json, &json, &mut out, &opts)
                    .unwrap(),
            ),
            "reference-protobuf-to-json" => drop(
                transcode::reference::from_protobuf(&desc, Format::Json, &pb, &mut out, &opts)
                    .unwrap(),
            ),
            "validate" => schema.validate_protobuf(&desc, &pb, &opts).unwrap(),
            "floor" => drop(serde_json::from_slice::<serde::de::IgnoredAny>(&json).unwrap()),
            other => panic!("unknown direction {other}"),
        }
        std::hint::black_box(&out);
    }
    println!(
        "{} JSON bytes x {runs} runs = {}",
        json.len(),
        json.len() * runs
    );
}

//! Transcoder throughput on the benchmark workloads (bench/README.md), each direction beside
//! the floor measured in the same run: serde_json parsing the same JSON into `IgnoredAny` (no
//! transcoder can parse JSON faster than a parser that keeps nothing).
//!
//! Run with `make bench` (it writes the workload bodies first). MB/s: JSON directions count the
//! JSON bytes (read or written), MessagePack directions the MessagePack bytes.

// Benchmark code, not the gateway: a failed unwrap or expect stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use transcode::{Format, Options};

#[path = "../tests/common/mod.rs"]
mod common;

const WORKLOADS: &[(&str, &str)] = &[
    ("Order", "bench.v1.Order"),
    ("RecordList_1000", "bench.v1.RecordList"),
    ("RecordList_10000", "bench.v1.RecordList"),
    ("LogBatch_1000", "bench.v1.LogBatch"),
    ("LogBatch_50000", "bench.v1.LogBatch"),
];

fn bench(c: &mut Criterion) {
    let schema = common::compile_proto("bench", "bench.proto");
    let opts = Options::default();
    for (name, message) in WORKLOADS {
        let path = common::bench_bodies().join(format!("{name}.json"));
        let json = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run `make bench`)", path.display()));
        let desc = schema.message(message).expect("message");
        let mut pb = Vec::new();
        transcode::reference::to_protobuf(&desc, Format::Json, &json, &mut pb, &opts)
            .expect("workload converts");
        let mut mp = Vec::new();
        transcode::reference::from_protobuf(&desc, Format::Msgpack, &pb, &mut mp, &opts)
            .expect("renders");
        let mut rendered = Vec::new();
        transcode::reference::from_protobuf(&desc, Format::Json, &pb, &mut rendered, &opts)
            .expect("renders");

        let mut g = c.benchmark_group(*name);
        if json.len() > 1_000_000 {
            g.sample_size(10)
                .measurement_time(Duration::from_secs(8))
                .warm_up_time(Duration::from_secs(1));
        } else {
            g.measurement_time(Duration::from_secs(3))
                .warm_up_time(Duration::from_secs(1));
        }
        g.throughput(Throughput::Bytes(json.len() as u64));
        g.bench_function("floor: serde_json IgnoredAny", |b| {
            b.iter(|| {
                serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&json))
                    .expect("valid JSON")
            })
        });
        let mut out = Vec::with_capacity(pb.len() * 2);
        g.bench_function("json -> protobuf (direct)", |b| {
            b.iter(|| {
                out.clear();
                schema
                    .to_protobuf(&desc, Format::Json, black_box(&json), &mut out, &opts)
                    .expect("converts")
            })
        });
        g.bench_function("json -> protobuf (reference)", |b| {
            b.iter(|| {
                out.clear();
                transcode::reference::to_protobuf(
                    &desc,
                    Format::Json,
                    black_box(&json),
                    &mut out,
                    &opts,
                )
                .expect("converts")
            })
        });
        g.bench_function("json -> protobuf (baseline: DynamicMessage)", |b| {
            b.iter(|| {
                let mut de = serde_json::Deserializer::from_slice(black_box(&json));
                let m = prost_reflect::DynamicMessage::deserialize(desc.clone(), &mut de)
                    .expect("parses");
                out.clear();
                prost::Message::encode(&m, &mut out).expect("encodes");
            })
        });
        g.throughput(Throughput::Bytes(rendered.len() as u64));
        g.bench_function("protobuf -> json (baseline: DynamicMessage)", |b| {
            b.iter(|| {
                let m =
                    prost_reflect::DynamicMessage::decode(desc.clone(), black_box(pb.as_slice()))
                        .expect("decodes");
                out.clear();
                serde_json::to_writer(&mut out, &m).expect("renders");
            })
        });
        g.bench_function("protobuf -> json (direct)", |b| {
            b.iter(|| {
                out.clear();
                schema
                    .from_protobuf(&desc, Format::Json, black_box(&pb), &mut out, &opts)
                    .expect("renders")
            })
        });
        // `[json] emit_unpopulated`: the general loop, every field without presence printed.
        let defaults = Options {
            emit_defaults: true,
            ..Options::default()
        };
        g.bench_function("protobuf -> json (direct, emit_unpopulated)", |b| {
            b.iter(|| {
                out.clear();
                schema
                    .from_protobuf(&desc, Format::Json, black_box(&pb), &mut out, &defaults)
                    .expect("renders")
            })
        });
        g.bench_function("protobuf -> json (reference)", |b| {
            b.iter(|| {
                out.clear();
                transcode::reference::from_protobuf(
                    &desc,
                    Format::Json,
                    black_box(&pb),
                    &mut out,
                    &opts,
                )
                .expect("renders")
            })
        });
        g.throughput(Throughput::Bytes(mp.len() as u64));
        g.bench_function("msgpack -> protobuf (direct)", |b| {
            b.iter(|| {
                out.clear();
                schema
                    .to_protobuf(&desc, Format::Msgpack, black_box(&mp), &mut out, &opts)
                    .expect("converts")
            })
        });
        let mp_opts = prost_reflect::SerializeOptions::new().stringify_64_bit_integers(false);
        g.bench_function(
            "msgpack -> protobuf (baseline: DynamicMessage + rmp-serde)",
            |b| {
                b.iter(|| {
                    let mut de = rmp_serde::Deserializer::new(black_box(mp.as_slice()));
                    let m = prost_reflect::DynamicMessage::deserialize(desc.clone(), &mut de)
                        .expect("parses");
                    out.clear();
                    prost::Message::encode(&m, &mut out).expect("encodes");
                })
            },
        );
        g.bench_function(
            "protobuf -> msgpack (baseline: DynamicMessage + rmp-serde)",
            |b| {
                b.iter(|| {
                    let m = prost_reflect::DynamicMessage::decode(
                        desc.clone(),
                        black_box(pb.as_slice()),
                    )
                    .expect("decodes");
                    out.clear();
                    let mut ser = rmp_serde::Serializer::new(&mut out).with_struct_map();
                    m.serialize_with_options(&mut ser, &mp_opts)
                        .expect("renders");
                })
            },
        );
        g.bench_function("protobuf -> msgpack (direct)", |b| {
            b.iter(|| {
                out.clear();
                schema
                    .from_protobuf(&desc, Format::Msgpack, black_box(&pb), &mut out, &opts)
                    .expect("renders")
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

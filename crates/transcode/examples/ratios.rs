//! The transcoder's speed as ratios to the floor, measured interleaved: each round times the
//! floor (serde_json parsing the JSON into `IgnoredAny`) and then every direction for about
//! 10 ms each, and a direction's ratio is the median over the rounds of its throughput ÷ that
//! round's floor. On a machine whose speed drifts between seconds (a shared VM), ratios taken
//! this way repeat where criterion's back-to-back runs of a few seconds each do not.
//!
//! `cargo run --release -p protogate-transcode --example ratios [WORKLOAD…]` (`make bench-ratios`;
//! the bodies come from `python3 bench/gen_bodies.py target/bench-bodies`). Prints one line per
//! workload: the floor's MiB/s, each direction's share of it (JSON directions per JSON byte,
//! MessagePack directions per MessagePack byte), and MessagePack's time per message ÷ JSON's.

// A measuring example, not the gateway: a failed unwrap or expect stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use transcode::{Format, Options};

#[path = "../tests/common/mod.rs"]
mod common;

const ROUNDS: usize = 31;
const SLICE: Duration = Duration::from_millis(10);

/// Seconds per run of `f`, timed over `runs` runs.
fn per_run(runs: usize, f: &mut dyn FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed().as_secs_f64() / runs as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut workloads: Vec<String> = std::env::args().skip(1).collect();
    if workloads.is_empty() {
        workloads = ["Order", "RecordList_1000", "LogBatch_1000"]
            .map(String::from)
            .to_vec();
    }
    let schema = common::compile_proto("bench", "bench.proto");
    let opts = Options::default();
    println!(
        "| workload | floor MiB/s | JSON → pb | pb → JSON | msgpack → pb | pb → msgpack | msgpack ÷ JSON time, in / out |"
    );
    println!("|---|---|---|---|---|---|---|");
    for workload in &workloads {
        let common::BenchWorkload { desc, json, pb, mp } =
            common::bench_workload(&schema, workload);
        let mut rendered = Vec::new();
        schema
            .from_protobuf(&desc, Format::Json, &pb, &mut rendered, &opts)
            .unwrap();
        let mut out = Vec::with_capacity(json.len() * 2);
        let mut floor = || {
            drop(black_box(serde_json::from_slice::<serde::de::IgnoredAny>(
                &json,
            )))
        };
        let conv = |from: Format, to: Format, input: &[u8], out: &mut Vec<u8>| {
            out.clear();
            if to == Format::Protobuf {
                schema.to_protobuf(&desc, from, black_box(input), out, &opts)
            } else {
                schema.from_protobuf(&desc, to, black_box(input), out, &opts)
            }
            .unwrap();
            black_box(&out);
        };
        // Runs per slice, from one calibration run of the floor.
        let once = per_run(3, &mut floor);
        let runs = ((SLICE.as_secs_f64() / once) as usize).max(1);
        let mut shares: [Vec<f64>; 4] = Default::default();
        let mut mp_vs_json: [Vec<f64>; 2] = Default::default();
        let mut floors = Vec::new();
        for _ in 0..ROUNDS {
            let t_floor = per_run(runs, &mut floor);
            let t = [
                per_run(runs, &mut || {
                    conv(Format::Json, Format::Protobuf, &json, &mut out)
                }),
                per_run(runs, &mut || {
                    conv(Format::Protobuf, Format::Json, &pb, &mut out)
                }),
                per_run(runs, &mut || {
                    conv(Format::Msgpack, Format::Protobuf, &mp, &mut out)
                }),
                per_run(runs, &mut || {
                    conv(Format::Protobuf, Format::Msgpack, &pb, &mut out)
                }),
            ];
            let floor_rate = json.len() as f64 / t_floor;
            floors.push(floor_rate);
            let bytes = [json.len(), rendered.len(), mp.len(), mp.len()];
            for i in 0..4 {
                shares[i].push(bytes[i] as f64 / t[i] / floor_rate);
            }
            mp_vs_json[0].push(t[2] / t[0]);
            mp_vs_json[1].push(t[3] / t[1]);
        }
        let [jp, pj, mpp, pmp] = shares.map(|s| format!("{:.0} %", 100.0 * median(s)));
        let [mp_in, mp_out] = mp_vs_json.map(|s| format!("{:.2}", median(s)));
        println!(
            "| {workload} | {:.0} | {jp} | {pj} | {mpp} | {pmp} | {mp_in} / {mp_out} |",
            median(floors) / (1024.0 * 1024.0)
        );
    }
}

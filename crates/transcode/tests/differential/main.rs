//! Differential test: the production transcoder (`Schema::to_protobuf` / `Schema::from_protobuf`)
//! against the reference path (`transcode::reference`). Both must agree exactly: the same output
//! bytes and the same findings when both succeed, both failing with the same error text
//! otherwise.
//!
//! Inputs:
//! - random protobuf wire bytes for `KitchenSink` and the bench messages, written by a small
//!   encoder (`wire`) from a seeded generator (`gen_wire`), with adversarial layouts (fields
//!   out of order, repeated fields split into interleaved runs, singular fields twice, two
//!   members of a oneof, duplicate map keys, unknown fields of every wire type incl. groups,
//!   known numbers with the wrong wire type, non-canonical varints, corrupt bytes);
//! - the JSON and MessagePack renderings of those messages fed back, plus mutated JSON texts
//!   (`gen_json`);
//! - the benchmark bodies of `bench/README.md`, written for the run by `bench/gen_bodies.py`.
//!
//! Every comparison also asks the direct path alone (`Schema::direct_only`) whether it answered
//! or bailed to the reference; each test holds it to a floor (see
//! [`random_messages::KITCHEN_SINK_FLOORS`]), since a direct path that always bails would agree
//! with the reference perfectly.
//!
//! `PROTOGATE_DIFF_CASES` (default 5000) sets the number of KitchenSink cases,
//! `PROTOGATE_DIFF_BENCH_CASES` (default 300) the number of bench-message cases and
//! `PROTOGATE_DIFF_SEED` the seed. A failure names its case; `PROTOGATE_DIFF_CASE=n` (with
//! the same seed) reruns only that one. The summary on stderr (`-- --nocapture`) counts the
//! adversarial kinds generated and the outcomes of every comparison.
//!
//! Layout: `wire` and `values` (the encoder and the values drawn), `gen_wire` (the generator),
//! `gen_json` (mutations of the renderings), `harness` (comparison, tally, summary, floors; one
//! generated message through every comparison); the tests by concern: `random_messages`
//! (KitchenSink and the bench messages, the settings), `bench_bodies` (the workload bodies and
//! the copies of `../shared`), `scalar_edges` (the direct encoder's fast-path bounds),
//! `self_check` (the harness catches what it must).

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../external/mod.rs"]
mod external;

mod bench_bodies;
mod gen_json;
mod gen_wire;
mod harness;
mod random_messages;
mod scalar_edges;
mod self_check;
mod values;
mod wire;

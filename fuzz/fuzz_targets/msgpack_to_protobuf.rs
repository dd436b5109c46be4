//! MessagePack → protobuf: the direct transcoder against the reference path on every input
//! (same bytes, findings, error), nothing panics, and what is accepted validates and renders
//! back. Input: message byte, options byte, MessagePack body (protogate_fuzz::split).
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcode::Format;

fuzz_target!(|data: &[u8]| protogate_fuzz::to_protobuf_target(Format::Msgpack, data));

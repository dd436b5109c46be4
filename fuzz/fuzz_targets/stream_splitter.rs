//! The request stream splitter: a body split into messages as it arrives. Nothing panics; the
//! messages, and whether (and where) it fails, do not depend on how the body is cut into
//! chunks; no message is larger than the limit; a delimited or MessagePack stream's messages
//! put back together are the body.
//!
//! Input: a framing byte (bits 0-1: NDJSON, JSON array, MessagePack, delimited protobuf), a
//! byte for the per-message limit (0-127: 1-128 bytes; 128-255: 64 bytes to 8 KiB), a byte seeding the chunk sizes, the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcode::stream::{InFraming, Splitter};

/// The messages, or the error's text with the messages before it.
fn split(
    framing: InFraming,
    max: usize,
    body: &[u8],
    mut cut: impl FnMut() -> usize,
) -> (Vec<Vec<u8>>, Option<String>) {
    let mut s = Splitter::new(framing, max);
    let mut messages = Vec::new();
    let mut rest = body;
    loop {
        let n = cut().clamp(1, rest.len().max(1)).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        if !chunk.is_empty() {
            s.push(chunk);
        }
        if rest.is_empty() {
            s.end();
        }
        loop {
            match s.next_message() {
                Ok(Some(m)) => {
                    assert_eq!(s.count(), messages.len() + 1, "count");
                    messages.push(m);
                }
                Ok(None) => break,
                Err(e) => return (messages, Some(e.to_string())),
            }
        }
        if rest.is_empty() {
            return (messages, s.finish().err().map(|e| e.to_string()));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [f, m, seed, body @ ..] = data else {
        return;
    };
    let framing = [
        InFraming::Ndjson,
        InFraming::JsonArray,
        InFraming::Msgpack,
        InFraming::Delimited,
    ][usize::from(f & 3)];
    let max = match usize::from(*m) {
        m @ 0..128 => m + 1,
        m => (m - 127) * 64,
    };
    let whole = split(framing, max, body, || usize::MAX);
    // Chunks of 1..=16 bytes from a small generator seeded by the input.
    let mut x = u32::from(*seed) | 1;
    let chunked = split(framing, max, body, || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x % 16) as usize + 1
    });
    let bytes = split(framing, max, body, || 1);
    assert_eq!(
        whole, chunked,
        "{framing:?}: whole body vs chunks of seed {seed}"
    );
    assert_eq!(whole, bytes, "{framing:?}: whole body vs bytes one by one");
    for msg in &whole.0 {
        assert!(msg.len() <= max, "{framing:?}: a message over the limit");
    }
    if whole.1.is_none() && framing == InFraming::Msgpack {
        assert_eq!(
            whole.0.concat(),
            body,
            "MessagePack: the messages are the body"
        );
    }
});

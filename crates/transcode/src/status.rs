//! google.rpc.Status as the gateway writes its own errors.

use crate::wire;

/// Encodes a google.rpc.Status without details, for errors the gateway makes itself.
pub fn encode_status(code: i32, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 8);
    if code != 0 {
        wire::put_tag(&mut out, 1, wire::VARINT);
        wire::put_varint(&mut out, code as i64 as u64);
    }
    if !message.is_empty() {
        wire::put_len_prefixed(&mut out, 2, message.as_bytes());
    }
    out
}

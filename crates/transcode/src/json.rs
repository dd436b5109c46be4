//! JSON text: parsing into the input tree and writing a rendered tree.
//!
//! Output is compact UTF-8 JSON. Floats print in their shortest round-trip form (float fields
//! at float32 precision); non-finite values as the strings "NaN", "Infinity", "-Infinity";
//! 64-bit integers as decimal strings; bytes as standard base64 with padding.

use base64::Engine as _;
use serde::de::DeserializeSeed;

use crate::error::ErrorKind;
use crate::tree::{In, InSeed, Out};
use crate::{Error, schema::line_col};

/// Parses JSON text, nesting bounded by `max_containers` arrays/objects.
pub(crate) fn parse(input: &[u8], max_containers: usize) -> Result<In, Error> {
    let mut de = serde_json::Deserializer::from_slice(input);
    // InSeed bounds the depth itself; serde_json's fixed limit of 128 would be stricter than
    // the reference for arrays of messages.
    de.disable_recursion_limit();
    let v = InSeed {
        depth_left: max_containers,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|_| v))
    .map_err(|e| json_error(input, &e))?;
    Ok(v)
}

fn json_error(input: &[u8], e: &serde_json::Error) -> Error {
    let (line, column) = (e.line(), e.column());
    // serde_json reports 1-based line and column (in bytes); turn them into a byte offset.
    let text = String::from_utf8_lossy(input);
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            offset += column.saturating_sub(1).min(l.len());
            break;
        }
        offset += l.len();
    }
    let offset = offset.min(input.len());
    let (line, column) = if line == 0 {
        line_col(&text, offset)
    } else {
        (line, column)
    };
    let mut message = e.to_string();
    if let Some(i) = message.find(" at line ") {
        message.truncate(i);
    }
    Error::new(ErrorKind::MalformedJson {
        offset,
        line,
        column,
        message,
    })
}

/// Writes a rendered tree as JSON.
pub(crate) fn write(v: &Out, out: &mut Vec<u8>) {
    match v {
        Out::Null => out.extend_from_slice(b"null"),
        Out::Bool(true) => out.extend_from_slice(b"true"),
        Out::Bool(false) => out.extend_from_slice(b"false"),
        Out::I32(x) => out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
        Out::U32(x) => out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
        Out::I64(x) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes());
            out.push(b'"');
        }
        Out::U64(x) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes());
            out.push(b'"');
        }
        Out::F32(x) => write_float(out, *x as f64, || {
            ryu::Buffer::new().format_finite(*x).to_owned()
        }),
        Out::F64(x) => write_float(out, *x, || ryu::Buffer::new().format_finite(*x).to_owned()),
        Out::Str(s) => write_str(out, s),
        Out::Bytes(b) => {
            out.push(b'"');
            let start = out.len();
            let len = base64::encoded_len(b.len(), true).unwrap_or(0);
            out.resize(start + len, 0);
            let n = base64::engine::general_purpose::STANDARD
                .encode_slice(b, &mut out[start..])
                .unwrap_or(0);
            out.truncate(start + n);
            out.push(b'"');
        }
        Out::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Out::Map(entries) => {
            out.push(b'{');
            for (i, (k, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_float(out: &mut Vec<u8>, x: f64, finite: impl FnOnce() -> String) {
    if x.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if x == f64::INFINITY {
        out.extend_from_slice(b"\"Infinity\"");
    } else if x == f64::NEG_INFINITY {
        out.extend_from_slice(b"\"-Infinity\"");
    } else {
        out.extend_from_slice(finite().as_bytes());
    }
}

/// A JSON string literal: `"` and `\` escaped, control characters as `\n`-style or `\u00XX`.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

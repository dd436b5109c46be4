//! MessagePack: parsing into the input tree and writing a rendered tree.
//!
//! # The MessagePack mapping
//!
//! The same shape as the proto3 JSON mapping (objects keyed by json_name, enums by name,
//! well-known types in their JSON forms: Timestamp and Duration as strings, wrappers as bare
//! values, Struct as a map), with these differences:
//! - 64-bit integers are native MessagePack integers (smallest encoding), not strings;
//! - `bytes` are MessagePack `bin`; on input, `bin` or a base64 string is accepted;
//! - `float` fields are float32, `double` fields float64, including NaN and ±infinity
//!   (the strings "NaN", "Infinity", "-Infinity" are accepted on input too);
//! - map keys are strings on output, as in JSON; on input a map field also accepts native
//!   integer or boolean keys.

use std::cell::Cell;

use serde::de::DeserializeSeed;

use crate::Error;
use crate::error::ErrorKind;
use crate::tree::{In, InSeed, Out};

/// Parses one MessagePack value; trailing bytes are an error.
pub(crate) fn parse(input: &[u8], max_containers: usize) -> Result<In, Error> {
    let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(input));
    let r = InSeed {
        depth_left: max_containers,
        big_doubles: &Cell::new(false),
    }
    .deserialize(&mut de);
    let offset = de.position() as usize;
    let v = r.map_err(|e| {
        Error::new(ErrorKind::MalformedMsgpack {
            offset,
            message: e.to_string(),
        })
    })?;
    if offset != input.len() {
        return Err(Error::new(ErrorKind::MalformedMsgpack {
            offset,
            message: format!("{} trailing bytes after the value", input.len() - offset),
        }));
    }
    Ok(v)
}

/// Writes a rendered tree as MessagePack.
pub(crate) fn write(v: &Out, out: &mut Vec<u8>) {
    use rmp::encode;
    // Writing into a Vec cannot fail; the results carry only the writer's error type.
    let _ = match v {
        Out::Null => encode::write_nil(out).map_err(drop),
        Out::Bool(b) => encode::write_bool(out, *b).map_err(drop),
        Out::I32(x) => encode::write_sint(out, *x as i64).map(drop).map_err(drop),
        Out::U32(x) => encode::write_uint(out, *x as u64).map(drop).map_err(drop),
        Out::I64(x) => encode::write_sint(out, *x).map(drop).map_err(drop),
        Out::U64(x) => encode::write_uint(out, *x).map(drop).map_err(drop),
        Out::F32(x) => encode::write_f32(out, *x).map_err(drop),
        Out::F64(x) => encode::write_f64(out, *x).map_err(drop),
        Out::Str(s) => encode::write_str(out, s).map_err(drop),
        Out::Bytes(b) => encode::write_bin(out, b).map_err(drop),
        Out::List(items) => {
            let r = encode::write_array_len(out, items.len() as u32)
                .map(drop)
                .map_err(drop);
            for item in items {
                write(item, out);
            }
            r
        }
        Out::Map(entries) => {
            let r = encode::write_map_len(out, entries.len() as u32)
                .map(drop)
                .map_err(drop);
            for (k, item) in entries {
                let _ = encode::write_str(out, k);
                write(item, out);
            }
            r
        }
    };
}

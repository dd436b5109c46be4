//! What the direct renderer needs of an output format: objects, arrays, maps, keys, values,
//! and writing a tree rendered by the reference path (well-known types).

use super::plan::FieldPlan;
use crate::json::{write_bytes, write_f32, write_f64, write_str, write_str_window};
use crate::scalar::Scalar;
use crate::tree::Out;

pub(crate) trait Sink {
    /// Starts an object; returns a mark for `end_object`.
    fn begin_object(&self, out: &mut Vec<u8>) -> usize;
    /// Ends an object of `count` fields.
    fn end_object(&self, out: &mut Vec<u8>, mark: usize, count: usize);
    /// A field's key.
    fn key(&self, out: &mut Vec<u8>, field: &FieldPlan, proto_names: bool);
    fn begin_array(&self, out: &mut Vec<u8>) -> usize;
    fn end_array(&self, out: &mut Vec<u8>, mark: usize, count: usize);
    /// Before each element of an array.
    fn element(&self, out: &mut Vec<u8>);
    fn begin_map(&self, out: &mut Vec<u8>) -> usize;
    fn end_map(&self, out: &mut Vec<u8>, mark: usize, count: usize);
    /// The key of an entry of a map field.
    fn map_key(&self, out: &mut Vec<u8>, key: &str);
    /// A scalar value of `field` (an enum's name from the plan).
    fn value(&self, out: &mut Vec<u8>, field: &FieldPlan, v: Scalar<'_>, enum_numbers: bool);
    /// A string field's bytes, the first `len` of `window` (which may hold the bytes after
    /// them too), checked for UTF-8 as they are written; false if they are not.
    fn str_bytes(&self, out: &mut Vec<u8>, window: &[u8], len: usize) -> bool;
    /// A subtree the reference path rendered.
    fn tree(&self, out: &mut Vec<u8>, tree: &Out);
}

/// JSON, as `crate::json` writes it.
pub(crate) struct Json;

impl Sink for Json {
    /// Nothing yet: every member of a container comes with a comma before it (a key with the
    /// one pre-encoded in [`FieldPlan::json_key`]), and the end turns the first comma into the
    /// opening bracket ([`close`]): no test per member whether it is the first.
    #[inline]
    fn begin_object(&self, out: &mut Vec<u8>) -> usize {
        out.len()
    }

    #[inline]
    fn end_object(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        close(out, mark, count, b'{', b'}');
    }

    #[inline(always)]
    fn key(&self, out: &mut Vec<u8>, field: &FieldPlan, proto_names: bool) {
        if proto_names {
            field.proto_key.put(out)
        } else {
            field.json_key.put(out)
        }
    }

    #[inline]
    fn begin_array(&self, out: &mut Vec<u8>) -> usize {
        out.len()
    }

    #[inline]
    fn end_array(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        close(out, mark, count, b'[', b']');
    }

    #[inline]
    fn element(&self, out: &mut Vec<u8>) {
        out.push(b',');
    }

    fn begin_map(&self, out: &mut Vec<u8>) -> usize {
        self.begin_object(out)
    }

    fn end_map(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        self.end_object(out, mark, count)
    }

    fn map_key(&self, out: &mut Vec<u8>, key: &str) {
        out.push(b',');
        write_str(out, key);
        out.push(b':');
    }

    #[inline(always)]
    fn value(&self, out: &mut Vec<u8>, field: &FieldPlan, v: Scalar<'_>, enum_numbers: bool) {
        let mut ib = itoa::Buffer::new();
        match v {
            Scalar::I32(x) => out.extend_from_slice(ib.format(x).as_bytes()),
            Scalar::U32(x) => out.extend_from_slice(ib.format(x).as_bytes()),
            Scalar::I64(x) => {
                out.push(b'"');
                out.extend_from_slice(ib.format(x).as_bytes());
                out.push(b'"');
            }
            Scalar::U64(x) => {
                out.push(b'"');
                out.extend_from_slice(ib.format(x).as_bytes());
                out.push(b'"');
            }
            Scalar::F32(x) => write_f32(out, x),
            Scalar::F64(x) => write_f64(out, x),
            Scalar::Bool(true) => out.extend_from_slice(b"true"),
            Scalar::Bool(false) => out.extend_from_slice(b"false"),
            Scalar::Str(s) => write_str(out, s),
            Scalar::Bytes(b) => write_bytes(out, b),
            Scalar::Enum(n) => {
                if enum_numbers {
                    out.extend_from_slice(ib.format(n).as_bytes());
                } else if field.enum_is_null_value {
                    out.extend_from_slice(b"null");
                } else {
                    match field.enum_names.get(&n) {
                        Some(name) => write_str(out, name),
                        None => out.extend_from_slice(ib.format(n).as_bytes()),
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn str_bytes(&self, out: &mut Vec<u8>, window: &[u8], len: usize) -> bool {
        write_str_window(out, window, len)
    }

    fn tree(&self, out: &mut Vec<u8>, tree: &Out) {
        crate::json::write(tree, out);
    }
}

/// Ends a JSON container begun at `mark` with `count` members, each written after a comma:
/// the first comma becomes `open`; no members, `open` and `close` alone.
#[inline]
fn close(out: &mut Vec<u8>, mark: usize, count: usize, open: u8, close: u8) {
    match out.get_mut(mark) {
        Some(first) if count > 0 => {
            *first = open;
            out.push(close);
        }
        _ => out.extend_from_slice(&[open, close]),
    }
}

/// MessagePack, as `crate::msgpack` writes it: containers get the smallest header, so the
/// header is reserved as one byte and widened at the end if the count needs it.
pub(crate) struct Msgpack;

/// Writes a container header for `count` at `mark` (one byte reserved there).
fn patch_header(out: &mut Vec<u8>, mark: usize, count: usize, fix: u8, m16: u8, m32: u8) {
    if count < 16 {
        out[mark] = fix | count as u8;
        return;
    }
    let (head, extra): ([u8; 5], usize) = if count < 0x1_0000 {
        let c = (count as u16).to_be_bytes();
        ([m16, c[0], c[1], 0, 0], 2)
    } else {
        let c = (count as u32).to_be_bytes();
        ([m32, c[0], c[1], c[2], c[3]], 4)
    };
    let end = out.len();
    out.resize(end + extra, 0);
    out.copy_within(mark + 1..end, mark + 1 + extra);
    out[mark..=mark + extra].copy_from_slice(&head[..=extra]);
}

impl Sink for Msgpack {
    #[inline]
    fn begin_object(&self, out: &mut Vec<u8>) -> usize {
        out.push(0x80);
        out.len() - 1
    }

    #[inline]
    fn end_object(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        patch_header(out, mark, count, 0x80, 0xde, 0xdf);
    }

    #[inline(always)]
    fn key(&self, out: &mut Vec<u8>, field: &FieldPlan, proto_names: bool) {
        if proto_names {
            field.mp_proto_key.put(out)
        } else {
            field.mp_json_key.put(out)
        }
    }

    #[inline]
    fn begin_array(&self, out: &mut Vec<u8>) -> usize {
        out.push(0x90);
        out.len() - 1
    }

    #[inline]
    fn end_array(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        patch_header(out, mark, count, 0x90, 0xdc, 0xdd);
    }

    #[inline]
    fn element(&self, _: &mut Vec<u8>) {}

    fn begin_map(&self, out: &mut Vec<u8>) -> usize {
        self.begin_object(out)
    }

    fn end_map(&self, out: &mut Vec<u8>, mark: usize, count: usize) {
        self.end_object(out, mark, count)
    }

    fn map_key(&self, out: &mut Vec<u8>, key: &str) {
        let _ = rmp::encode::write_str(out, key);
    }

    #[inline(always)]
    fn value(&self, out: &mut Vec<u8>, field: &FieldPlan, v: Scalar<'_>, enum_numbers: bool) {
        use rmp::encode;
        // Writing into a Vec cannot fail. The same calls as crate::msgpack::write.
        let _ = match v {
            Scalar::I32(x) => encode::write_sint(out, x as i64).map(drop).map_err(drop),
            Scalar::U32(x) => encode::write_uint(out, x as u64).map(drop).map_err(drop),
            Scalar::I64(x) => encode::write_sint(out, x).map(drop).map_err(drop),
            Scalar::U64(x) => encode::write_uint(out, x).map(drop).map_err(drop),
            Scalar::F32(x) => encode::write_f32(out, x).map_err(drop),
            Scalar::F64(x) => encode::write_f64(out, x).map_err(drop),
            Scalar::Bool(b) => encode::write_bool(out, b).map_err(drop),
            Scalar::Str(s) => encode::write_str(out, s).map_err(drop),
            Scalar::Bytes(b) => encode::write_bin(out, b).map_err(drop),
            Scalar::Enum(n) => {
                if enum_numbers {
                    encode::write_sint(out, n as i64).map(drop).map_err(drop)
                } else if field.enum_is_null_value {
                    encode::write_nil(out).map_err(drop)
                } else {
                    match field.enum_names.get(&n) {
                        Some(name) => encode::write_str(out, name).map_err(drop),
                        None => encode::write_sint(out, n as i64).map(drop).map_err(drop),
                    }
                }
            }
        };
    }

    /// The smallest str header rmp writes, then the bytes (copied as fixed 16 or 32 when
    /// short, checked for UTF-8 in words when ASCII).
    #[inline(always)]
    fn str_bytes(&self, out: &mut Vec<u8>, window: &[u8], len: usize) -> bool {
        if !super::utf8(window, len) {
            return false;
        }
        match len {
            0..32 => out.push(0xa0 | len as u8),
            32..0x100 => out.extend_from_slice(&[0xd9, len as u8]),
            _ => {
                let _ = rmp::encode::write_str_len(out, len as u32);
            }
        }
        super::encode::put_short(out, window, len);
        true
    }

    fn tree(&self, out: &mut Vec<u8>, tree: &Out) {
        crate::msgpack::write(tree, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_widen_like_rmp() {
        for count in [0usize, 15, 16, 65_535, 65_536] {
            let mut out = vec![0xaa, 0x80];
            out.extend(std::iter::repeat_n(0x01u8, count));
            patch_header(&mut out, 1, count, 0x80, 0xde, 0xdf);
            let mut want = vec![0xaa];
            rmp::encode::write_map_len(&mut want, count as u32).unwrap();
            want.extend(std::iter::repeat_n(0x01u8, count));
            assert_eq!(out, want, "{count}");
        }
    }
}

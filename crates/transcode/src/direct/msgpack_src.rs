//! MessagePack as a [`Source`] for the direct encoder, yielding the values rmp-serde (the
//! reference's parser) yields.

use super::encode::{put_plain, put_str_field};
use super::plan::{FieldPlan, MsgPlan, words16};
use super::source::{R, Source};
use super::{Bail, utf8};
use crate::scalar::{Lit, Op};

pub(crate) struct MsgpackSrc<'a> {
    input: &'a [u8],
    pos: usize,
}

/// A container header: map or array, and its length.
pub(super) enum Header {
    Map(u32),
    Array(u32),
    Other,
}

impl<'a> MsgpackSrc<'a> {
    pub(crate) fn new(input: &'a [u8]) -> MsgpackSrc<'a> {
        MsgpackSrc::at(input, 0)
    }

    /// A cursor at `pos` of `input`: how `msgpack_fast` reads headers as this source does.
    #[inline(always)]
    pub(super) fn at(input: &'a [u8], pos: usize) -> MsgpackSrc<'a> {
        MsgpackSrc { input, pos }
    }

    /// Where the cursor is.
    #[inline(always)]
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn byte(&mut self) -> R<u8> {
        let b = *self.input.get(self.pos).ok_or(Bail)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Bail)?;
        let b = self.input.get(self.pos..end).ok_or(Bail)?;
        self.pos = end;
        Ok(b)
    }

    /// A big-endian number of `n` bytes (1, 2, 4 or 8: every width MessagePack uses).
    #[inline]
    fn be(&mut self, n: usize) -> R<u64> {
        Ok(match *self.take(n)? {
            [a] => u64::from(a),
            [a, b] => u64::from(u16::from_be_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
            ref other => other.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        })
    }

    /// The container header at the cursor (consumed), or `Other` (nothing consumed).
    #[inline]
    pub(super) fn header(&mut self) -> R<Header> {
        let m = self.byte()?;
        Ok(match m {
            0x80..=0x8f => Header::Map((m & 0x0f) as u32),
            0x90..=0x9f => Header::Array((m & 0x0f) as u32),
            0xde => Header::Map(self.be(2)? as u32),
            0xdf => Header::Map(self.be(4)? as u32),
            0xdc => Header::Array(self.be(2)? as u32),
            0xdd => Header::Array(self.be(4)? as u32),
            _ => {
                self.pos -= 1;
                Header::Other
            }
        })
    }

    /// The length of a str at the cursor (its header consumed), or None if it is not a str.
    #[inline]
    pub(super) fn str_len(&mut self) -> R<Option<usize>> {
        let m = *self.input.get(self.pos).ok_or(Bail)?;
        let len = match m {
            0xa0..=0xbf => {
                self.pos += 1;
                (m & 0x1f) as usize
            }
            0xd9 => {
                self.pos += 1;
                self.be(1)? as usize
            }
            0xda => {
                self.pos += 1;
                self.be(2)? as usize
            }
            0xdb => {
                self.pos += 1;
                self.be(4)? as usize
            }
            _ => return Ok(None),
        };
        Ok(Some(len))
    }

    /// Skips one value (iteratively: nesting costs no stack).
    fn skip(&mut self) -> R<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.header()? {
                Header::Map(n) => pending += 2 * n as u64,
                Header::Array(n) => pending += n as u64,
                Header::Other => {
                    self.scalar_value()?;
                }
            }
        }
        Ok(())
    }

    fn scalar_value(&mut self) -> R<Lit<'a>> {
        if let Some(len) = self.str_len()? {
            let b = self.take(len)?;
            return std::str::from_utf8(b).map(Lit::Str).map_err(|_| Bail);
        }
        let m = self.byte()?;
        Ok(match m {
            0x00..=0x7f => Lit::I64(m as i64),
            0xe0..=0xff => Lit::I64(m as i8 as i64),
            0xc0 => Lit::Null,
            0xc2 => Lit::Bool(false),
            0xc3 => Lit::Bool(true),
            0xc4 => {
                let n = self.be(1)? as usize;
                Lit::Bytes(self.take(n)?)
            }
            0xc5 => {
                let n = self.be(2)? as usize;
                Lit::Bytes(self.take(n)?)
            }
            0xc6 => {
                let n = self.be(4)? as usize;
                Lit::Bytes(self.take(n)?)
            }
            0xca => Lit::F64(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Lit::F64(f64::from_bits(self.be(8)?)),
            0xcc => Lit::I64(self.be(1)? as i64),
            0xcd => Lit::I64(self.be(2)? as i64),
            0xce => Lit::I64(self.be(4)? as i64),
            0xcf => {
                let u = self.be(8)?;
                if u <= i64::MAX as u64 {
                    Lit::I64(u as i64)
                } else {
                    Lit::U64(u)
                }
            }
            0xd0 => Lit::I64(self.be(1)? as u8 as i8 as i64),
            0xd1 => Lit::I64(self.be(2)? as u16 as i16 as i64),
            0xd2 => Lit::I64(self.be(4)? as u32 as i32 as i64),
            0xd3 => Lit::I64(self.be(8)? as i64),
            0x80..=0x9f | 0xdc..=0xdf => {
                // A container where a scalar was expected: let the reference say so.
                return Err(Bail);
            }
            // 0xc1 (never used), extension types.
            _ => return Err(Bail),
        })
    }
}

/// The value at `b[at..]` written as scalar field `field` (tag and value; an implicit-presence
/// default not at all unless `always`) if it has one of the common shapes: a string under a
/// fixstr or str8 header (its UTF-8 checked in words when short and ASCII) copied straight to
/// the output, another scalar as [`MsgpackSrc::scalar_value`] reads it and [`put_plain`]
/// writes it. Where it ends; `None`, nothing written, for any other value; `Err` for a value
/// the reference must judge. Both MessagePack loops read scalars through it:
/// `MsgpackSrc::plain_field` and `direct::msgpack_fast`.
#[inline(always)]
pub(crate) fn plain_value(
    b: &[u8],
    at: usize,
    field: &FieldPlan,
    always: bool,
    out: &mut Vec<u8>,
) -> R<Option<usize>> {
    let Some(&m) = b.get(at) else {
        return Ok(None);
    };
    if field.op == Op::Str && matches!(m, 0xa0..=0xbf | 0xd9) {
        // fixstr, or str8 (from 32 bytes on).
        let (len, start) = match m {
            0xd9 => match b.get(at + 1) {
                Some(&n) => (n as usize, at + 2),
                None => return Ok(None),
            },
            _ => ((m & 0x1f) as usize, at + 1),
        };
        let window = &b[start.min(b.len())..];
        if window.len() < len || !utf8(window, len) {
            return Ok(None);
        }
        if always || len != 0 {
            put_str_field(out, &field.tag, window, len);
        }
        return Ok(Some(start + len));
    }
    if matches!(field.op, Op::Str | Op::Bytes | Op::Enum | Op::Message)
        || matches!(m, 0x80..=0x9f | 0xa0..=0xbf | 0xc4..=0xc6 | 0xd9..=0xdf)
    {
        return Ok(None);
    }
    let mut s = MsgpackSrc::at(b, at);
    let lit = s.scalar_value()?;
    Ok(put_plain(out, &field.tag, field.op, &lit, always)?.then_some(s.pos))
}

/// Takes one entry of a container with `left` entries to go, if any.
fn count_down(left: &mut u32) -> bool {
    if *left == 0 {
        return false;
    }
    *left -= 1;
    true
}

impl<'a> Source<'a> for MsgpackSrc<'a> {
    /// Entries (maps) or elements (arrays) left.
    type Open = u32;

    fn object(&mut self) -> R<u32> {
        match self.header()? {
            Header::Map(n) => Ok(n),
            _ => Err(Bail),
        }
    }

    fn next_key(&mut self, left: &mut u32) -> R<Option<&'a [u8]>> {
        if !count_down(left) {
            return Ok(None);
        }
        // Message keys are strings; anything else is the reference's to judge.
        let len = self.str_len()?.ok_or(Bail)?;
        self.take(len).map(Some)
    }

    /// Keys spelled as the expected field's or the next one's MessagePack string (the
    /// smallest header, as encoders write it) are recognised by two word compares.
    #[inline]
    fn next_field(&mut self, left: &mut u32, plan: &MsgPlan, hint: usize) -> R<Option<usize>> {
        if !count_down(left) {
            return Ok(None);
        }
        let window = match self.input[self.pos..].first_chunk::<16>() {
            Some(w) => words16(w),
            None => [0; 2],
        };
        let Some(f) = plan.expected_key(hint, window, |f| &f.mp_json_key_words) else {
            let len = self.str_len()?.ok_or(Bail)?;
            let key = self.take(len)?;
            return plan.by_key(key, hint).map(Some).ok_or(Bail);
        };
        self.pos += plan.fields[f].mp_json_key_words.len;
        Ok(Some(f))
    }

    /// [`plain_value`] at the cursor.
    #[inline(always)]
    fn plain_field(&mut self, field: &FieldPlan, always: bool, out: &mut Vec<u8>) -> R<bool> {
        Ok(
            match plain_value(self.input, self.pos, field, always, out)? {
                Some(end) => {
                    self.pos = end;
                    true
                }
                None => false,
            },
        )
    }

    fn array(&mut self) -> R<u32> {
        match self.header()? {
            Header::Array(n) => Ok(n),
            _ => Err(Bail),
        }
    }

    fn next_element(&mut self, left: &mut u32) -> R<bool> {
        Ok(count_down(left))
    }

    fn peek_null(&mut self) -> bool {
        self.input.get(self.pos) == Some(&0xc0)
    }

    fn null(&mut self) -> R<()> {
        (self.byte()? == 0xc0).then_some(()).ok_or(Bail)
    }

    fn scalar(&mut self) -> R<Lit<'_>> {
        self.scalar_value()
    }

    fn capture(&mut self) -> R<&'a [u8]> {
        let start = self.pos;
        self.skip()?;
        Ok(&self.input[start..self.pos])
    }

    fn tree(&self, bytes: &[u8], max_containers: usize) -> R<crate::tree::In> {
        crate::msgpack::parse(bytes, max_containers).map_err(|_| Bail)
    }

    fn finish(&mut self) -> R<()> {
        if self.pos == self.input.len() {
            Ok(())
        } else {
            Err(Bail)
        }
    }
}

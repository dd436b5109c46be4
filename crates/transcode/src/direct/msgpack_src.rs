//! MessagePack as a [`Source`] for the direct encoder, yielding the values rmp-serde (the
//! reference's parser) yields.

use super::Bail;
use super::source::{R, Source};
use crate::scalar::Lit;

pub(crate) struct MsgpackSrc<'a> {
    input: &'a [u8],
    pos: usize,
}

/// A container header: map or array, and its length.
enum Header {
    Map(u32),
    Array(u32),
    Other,
}

impl<'a> MsgpackSrc<'a> {
    pub(crate) fn new(input: &'a [u8]) -> MsgpackSrc<'a> {
        MsgpackSrc { input, pos: 0 }
    }

    #[inline]
    fn byte(&mut self) -> R<u8> {
        let b = *self.input.get(self.pos).ok_or(Bail)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Bail)?;
        let b = self.input.get(self.pos..end).ok_or(Bail)?;
        self.pos = end;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> R<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn header(&mut self) -> R<Header> {
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

    /// The length of a str at the cursor, or None if it is not a str.
    fn str_len(&mut self) -> R<Option<usize>> {
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

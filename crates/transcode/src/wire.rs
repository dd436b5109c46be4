//! Protobuf wire format primitives: varints, tags, zigzag.

use crate::Error;

pub(crate) const VARINT: u8 = 0;
pub(crate) const I64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const SGROUP: u8 = 3;
pub(crate) const EGROUP: u8 = 4;
pub(crate) const I32: u8 = 5;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The bytes `put_varint` writes for `v`.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, ((number as u64) << 3) | wire_type as u64);
}

pub(crate) fn put_len_prefixed(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub(crate) fn zigzag32(v: i32) -> u64 {
    (((v << 1) ^ (v >> 31)) as u32) as u64
}

pub(crate) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

pub(crate) fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A cursor over wire bytes that knows its absolute offset for error messages.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the whole input.
    base: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        Reader { buf, pos: 0, base }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// True, and `b` consumed, if `b` is the next byte.
    #[inline(always)]
    pub(crate) fn next_is(&mut self, b: u8) -> bool {
        let next = self.buf.get(self.pos) == Some(&b);
        self.pos += usize::from(next);
        next
    }

    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    fn err(&self, msg: &str) -> Error {
        Error::malformed_protobuf(self.offset(), msg)
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        // One byte is the common case: tags of the first 15 fields, small lengths and values.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(b as u64);
        }
        self.varint_slow()
    }

    fn varint_slow(&mut self) -> Result<u64, Error> {
        // With ten bytes at hand no byte needs its own bounds check.
        if let Some(b) = self.buf.get(self.pos..self.pos + 10) {
            let mut v: u64 = 0;
            for (i, &byte) in b.iter().enumerate() {
                v |= ((byte & 0x7f) as u64) << (7 * i);
                if byte < 0x80 {
                    if i == 9 && byte > 1 {
                        break;
                    }
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
        }
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err("truncated varint"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(self.err("varint longer than 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.err("varint longer than 10 bytes"))
    }

    #[inline]
    pub(crate) fn fixed32(&mut self) -> Result<u32, Error> {
        let b = self.take(4, "truncated fixed32")?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    pub(crate) fn fixed64(&mut self) -> Result<u64, Error> {
        let b = self.take(8, "truncated fixed64")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-delimited value; returns the bytes and their absolute offset.
    #[inline]
    pub(crate) fn len_delimited(&mut self) -> Result<(&'a [u8], usize), Error> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| self.err("length out of range"))?;
        let at = self.offset();
        let b = self.take(len, "truncated length-delimited field")?;
        Ok((b, at))
    }

    #[inline]
    fn take(&mut self, n: usize, msg: &str) -> Result<&'a [u8], Error> {
        if self.buf.len() - self.pos < n {
            return Err(self.err(msg));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// A one-byte tag that `table` (indexed by the tag byte) maps to a field (index + 1; 0
    /// for none): the field's index and the tag, the byte consumed. `None`, nothing consumed,
    /// for any other tag.
    #[inline(always)]
    pub(crate) fn tag_in(&mut self, table: &[u16; 128]) -> Option<(usize, u8)> {
        let b = *self.buf.get(self.pos)?;
        let i = *table.get(usize::from(b))?;
        if i == 0 {
            return None;
        }
        self.pos += 1;
        Some((usize::from(i) - 1, b))
    }

    /// Reads a tag: (field number, wire type).
    #[inline]
    pub(crate) fn tag(&mut self) -> Result<(u32, u8), Error> {
        // Fields 1 to 15 have one-byte tags: the common case, checked without the slow path.
        if let Some(&b) = self.buf.get(self.pos)
            && (8..0x80).contains(&b)
            && b & 7 <= 5
        {
            self.pos += 1;
            return Ok(((b >> 3) as u32, b & 7));
        }
        self.tag_slow()
    }

    fn tag_slow(&mut self) -> Result<(u32, u8), Error> {
        let at = self.offset();
        let key = self.varint()?;
        let wire_type = (key & 7) as u8;
        let number = key >> 3;
        if number == 0 || number > 536_870_911 {
            return Err(Error::malformed_protobuf(
                at,
                format!("invalid field number {number}"),
            ));
        }
        if wire_type > 5 {
            return Err(Error::malformed_protobuf(
                at,
                format!("invalid wire type {wire_type}"),
            ));
        }
        Ok((number as u32, wire_type))
    }

    /// Skips a value of the given wire type (a group up to its matching end tag).
    pub(crate) fn skip(
        &mut self,
        number: u32,
        wire_type: u8,
        depth_left: usize,
    ) -> Result<(), Error> {
        match wire_type {
            VARINT => {
                self.varint()?;
            }
            I64 => {
                self.take(8, "truncated fixed64")?;
            }
            LEN => {
                self.len_delimited()?;
            }
            I32 => {
                self.take(4, "truncated fixed32")?;
            }
            SGROUP => {
                if depth_left == 0 {
                    return Err(self.err("groups nested too deep"));
                }
                loop {
                    if self.is_empty() {
                        return Err(self.err("unterminated group"));
                    }
                    let (n, wt) = self.tag()?;
                    if wt == EGROUP {
                        if n != number {
                            return Err(self.err("mismatched end-group tag"));
                        }
                        break;
                    }
                    self.skip(n, wt, depth_left - 1)?;
                }
            }
            _ => return Err(self.err("unexpected end-group tag")),
        }
        Ok(())
    }
}

/// Writes the length of the content after the one byte reserved at `len_at`, moving the
/// content when the length needs more than one byte.
#[inline]
pub(crate) fn patch_len(out: &mut Vec<u8>, len_at: usize) {
    patch_reserved_len(out, len_at, 1);
}

/// Writes the length of the content after the `reserved` bytes (1 or more) left for it at
/// `len_at`, moving the content when the length's varint needs another number of bytes;
/// returns that number (what the next sibling of similar size should reserve). The varint is
/// always the shortest, so the output does not depend on the reservation, only the moves do.
#[inline]
pub(crate) fn patch_reserved_len(out: &mut Vec<u8>, len_at: usize, reserved: usize) -> usize {
    let len = out.len() - len_at - reserved;
    match reserved {
        1 if len < 0x80 => out[len_at] = len as u8,
        2 if (0x80..0x4000).contains(&len) => {
            out[len_at] = (len as u8) | 0x80;
            out[len_at + 1] = (len >> 7) as u8;
        }
        _ => return patch_long_len(out, len_at, reserved, len),
    }
    reserved
}

/// [`patch_reserved_len`] when the length's varint does not take the bytes reserved for it
/// (128 bytes or more in one, a 2-byte reservation outside 128..16,384): out of line, so that
/// the common cases inline small.
#[cold]
#[inline(never)]
fn patch_long_len(out: &mut Vec<u8>, len_at: usize, reserved: usize, len: usize) -> usize {
    let mut head = [0u8; 10];
    let mut n = 0;
    let mut v = len as u64;
    while v >= 0x80 {
        head[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    head[n] = v as u8;
    n += 1;
    let end = out.len();
    if n > reserved {
        out.resize(end + n - reserved, 0);
        out.copy_within(len_at + reserved..end, len_at + n);
    } else if n < reserved {
        out.copy_within(len_at + reserved..end, len_at + n);
        out.truncate(end - (reserved - n));
    }
    out[len_at..len_at + n].copy_from_slice(&head[..n]);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every varint length from 1 to 10 bytes, alone, followed by other bytes and cut short,
    /// reads back as prost decodes it (value, length, or an error).
    #[test]
    fn varints_read_as_prost_reads_them() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..200_000 {
            let v = next() >> (next() % 64);
            let mut bytes = Vec::new();
            put_varint(&mut bytes, v);
            let cut = (next() % (bytes.len() as u64 + 1)) as usize;
            let tail = (next() % 12) as usize;
            let mut input = bytes[..cut].to_vec();
            input
                .extend((0..tail).map(|_| next() as u8 | if cut < bytes.len() { 0x80 } else { 0 }));
            reads_as_prost(&input);
        }
        // Any bytes, non-shortest forms included (`81 80 00` is 1): each byte's top bit set
        // with a chance that makes every length from 1 to 12 common.
        for _ in 0..200_000 {
            let len = (next() % 13) as usize;
            let input: Vec<u8> = (0..len)
                .map(|_| (next() as u8 & 0x7f) | if next().is_multiple_of(8) { 0 } else { 0x80 })
                .collect();
            reads_as_prost(&input);
        }
        // Ten-byte varints: the last byte may only carry the top bit.
        for last in [0x01u8, 0x02, 0x7f] {
            let mut input = vec![0xff; 9];
            input.push(last);
            let got = Reader::new(&input, 0).varint();
            let want = prost::encoding::decode_varint(&mut input.as_slice());
            assert_eq!(got.ok(), want.ok(), "{last:#x}");
        }
    }

    /// `Reader::varint` on `input` gives prost's value and length, or fails where it fails.
    fn reads_as_prost(input: &[u8]) {
        let mut r = Reader::new(input, 0);
        let got = r.varint();
        let mut buf = input;
        match prost::encoding::decode_varint(&mut buf) {
            Ok(want) => {
                assert_eq!(got.ok(), Some(want), "{input:02x?}");
                assert_eq!(r.pos, input.len() - buf.len(), "{input:02x?}");
            }
            Err(_) => assert!(got.is_err(), "{input:02x?}"),
        }
    }

    /// put_varint writes what prost writes, at every length.
    #[test]
    fn varints_write_as_prost_writes_them() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        for i in 0..200_000u64 {
            let seed = next();
            let v = if i < 64 {
                1u64 << i
            } else {
                seed >> (seed % 64)
            };
            for v in [v, v.wrapping_sub(1)] {
                let (mut ours, mut want) = (vec![7u8], vec![7u8]);
                put_varint(&mut ours, v);
                prost::encoding::encode_varint(v, &mut want);
                assert_eq!(ours, want, "{v}");
            }
        }
    }

    #[test]
    fn varint_len_counts_put_varint() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(varint_len(v), out.len(), "{v}");
        }
    }

    #[test]
    fn patch_len_moves_long_content() {
        for len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut want = vec![9];
            put_varint(&mut want, len as u64);
            want.extend(std::iter::repeat_n(7u8, len));
            for reserved in 1..=4 {
                let mut out = vec![9];
                out.resize(1 + reserved, 0);
                out.extend(std::iter::repeat_n(7u8, len));
                let n = patch_reserved_len(&mut out, 1, reserved);
                assert_eq!(out, want, "{len} in {reserved}");
                assert_eq!(n, varint_len(len as u64), "{len} in {reserved}");
            }
        }
    }
}

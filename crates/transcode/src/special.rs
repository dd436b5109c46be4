//! The bytes a JSON string cannot hold as they are — `"`, `\\` and control characters — and,
//! where UTF-8 is still to be checked, the bytes ≥ 0x80, found many bytes at a time: where a
//! JSON source's string ends ([`special_or_high`]) and whether a string to render is plain
//! ([`plain`]); and whether a short string is ASCII ([`ascii`]).
//!
//! On x86 and x86-64 sixteen bytes at a time with SSE2 (three compares and one movemask a
//! chunk, through safe_arch: no `unsafe` here); elsewhere eight at a time in a 64-bit word.
//! `tests::every_byte_at_every_place` holds both to a byte-by-byte definition.

/// Whether `c` is special: `"`, `\\`, a control character, or, if `high`, ≥ 0x80.
#[inline(always)]
fn is_special(c: u8, high: bool) -> bool {
    c == b'"' || c == b'\\' || c < 0x20 || (high && c >= 0x80)
}

/// Index of the first byte of `b` that a JSON string cannot hold as is (`"`, `\\`, or a
/// control character), or `b.len()`: where a string without escapes ends.
#[inline]
pub(crate) fn json_special(b: &[u8]) -> usize {
    special_or_high(b, false)
}

/// Index of the first special byte of `b` (≥ 0x80 counting if `high`: the first non-ASCII
/// byte, where UTF-8 validation has to start), or `b.len()`.
#[inline(always)]
pub(crate) fn special_or_high(b: &[u8], high: bool) -> usize {
    let mut i = 0;
    while let Some(chunk) = b.get(i..).and_then(<[u8]>::first_chunk::<32>) {
        if let Some(at) = wide::first_special(chunk, high) {
            return i + at;
        }
        i += 32;
    }
    if let Some(chunk) = b.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        if let Some(at) = wide::first_special(chunk, high) {
            return i + at;
        }
        i += 16;
    }
    while let Some(&c) = b.get(i) {
        if is_special(c, high) {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// True if none of the first `len` bytes of `w` (all of them if `len` ≥ `N`) is special,
/// bytes ≥ 0x80 included. `N` is 16 or 32.
#[inline(always)]
pub(crate) fn plain<const N: usize>(w: &[u8; N], len: usize) -> bool {
    wide::plain(w, len)
}

/// True if none of the first `len` bytes of `w` (`len` ≤ `N`; `N` is 16 or 32) is ≥ 0x80.
#[inline(always)]
pub(crate) fn ascii<const N: usize>(w: &[u8; N], len: usize) -> bool {
    wide::ascii(w, len)
}

/// SSE2: a chunk's special bytes as a bit mask, bit `i` for byte `i`.
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
mod wide {
    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i8_m128i, cmp_lt_mask_i8_m128i, load_unaligned_m128i,
        min_u8_m128i, move_mask_i8_m128i, set_splat_i8_m128i,
    };

    /// Bit `i` set if byte `i` of `c` is special (bytes ≥ 0x80 only if `high`).
    #[inline(always)]
    fn mask16(c: &[u8; 16], high: bool) -> u64 {
        let v = load_unaligned_m128i(c);
        let quote = cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(b'"' as i8));
        let backslash = cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(b'\\' as i8));
        let below = if high {
            // A signed compare: control characters, and every byte ≥ 0x80 (negative as i8).
            cmp_lt_mask_i8_m128i(v, set_splat_i8_m128i(0x20))
        } else {
            // Unsigned `v ≤ 0x1f`: control characters only.
            cmp_eq_mask_i8_m128i(min_u8_m128i(v, set_splat_i8_m128i(0x1f)), v)
        };
        u64::from(move_mask_i8_m128i(bitor_m128i(bitor_m128i(quote, backslash), below)) as u32)
    }

    /// The mask of `N` bytes (16 or 32), bit `i` for byte `i`.
    #[inline(always)]
    fn mask<const N: usize>(w: &[u8; N], high: bool) -> u64 {
        let (chunks, _) = w.as_chunks::<16>();
        let mut m = 0;
        for (k, c) in chunks.iter().enumerate() {
            m |= mask16(c, high) << (16 * k);
        }
        m
    }

    #[inline(always)]
    pub(super) fn first_special<const N: usize>(w: &[u8; N], high: bool) -> Option<usize> {
        let m = mask(w, high);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }

    /// One test for the whole string, whatever its length: no flag below `len`.
    #[inline(always)]
    pub(super) fn plain<const N: usize>(w: &[u8; N], len: usize) -> bool {
        mask(w, true).trailing_zeros() as usize >= len.min(N)
    }

    #[inline(always)]
    pub(super) fn ascii<const N: usize>(w: &[u8; N], len: usize) -> bool {
        let (chunks, _) = w.as_chunks::<16>();
        let mut m = 0u64;
        for (k, c) in chunks.iter().enumerate() {
            m |= u64::from(move_mask_i8_m128i(load_unaligned_m128i(c)) as u32) << (16 * k);
        }
        m.trailing_zeros() as usize >= len
    }
}

/// Eight bytes to a 64-bit word, each special byte flagged by its high bit.
#[cfg(any(
    test,
    not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse2"
    ))
))]
mod words {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

    /// The special bytes of `word`, each as its high bit; exact up to the lowest flagged byte
    /// (a borrow can only mark bytes after it), which is all the callers read.
    #[inline(always)]
    fn special_bytes(word: &[u8; 8], high: bool) -> u64 {
        let w = u64::from_le_bytes(*word);
        let q = w ^ (LO * b'"' as u64);
        let s = w ^ (LO * b'\\' as u64);
        let high = if high { w & HIGH_BITS } else { 0 };
        (((q.wrapping_sub(LO) & !q) | (s.wrapping_sub(LO) & !s) | (w.wrapping_sub(LO * 0x20) & !w))
            & HIGH_BITS)
            | high
    }

    #[inline(always)]
    pub(super) fn first_special<const N: usize>(w: &[u8; N], high: bool) -> Option<usize> {
        let (words, _) = w.as_chunks::<8>();
        // All the words' flags before one test: a long string takes a branch a chunk.
        let mut any = 0;
        for word in words {
            any |= special_bytes(word, high);
        }
        if any == 0 {
            return None;
        }
        words.iter().enumerate().find_map(|(k, word)| {
            let m = special_bytes(word, high);
            (m != 0).then(|| 8 * k + (m.trailing_zeros() / 8) as usize)
        })
    }

    /// The words' high bits, those past `len` masked off.
    #[inline(always)]
    pub(super) fn ascii<const N: usize>(w: &[u8; N], len: usize) -> bool {
        let (words, _) = w.as_chunks::<8>();
        let mut high = 0;
        for (k, word) in words.iter().enumerate() {
            let valid = len.saturating_sub(8 * k);
            let mask = if valid >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * valid)) - 1
            };
            high |= u64::from_le_bytes(*word) & mask;
        }
        high & HIGH_BITS == 0
    }

    /// Word by word, stopping at the first flag or past the string's end.
    #[inline(always)]
    pub(super) fn plain<const N: usize>(w: &[u8; N], len: usize) -> bool {
        let (words, _) = w.as_chunks::<8>();
        for (k, word) in words.iter().enumerate() {
            let m = special_bytes(word, true);
            if m != 0 {
                return 8 * k + (m.trailing_zeros() / 8) as usize >= len;
            }
            if 8 * (k + 1) >= len {
                return true;
            }
        }
        true
    }
}

#[cfg(not(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
)))]
use words as wide;

#[cfg(test)]
mod tests {
    use super::{is_special, words};

    fn first_naive(b: &[u8], high: bool) -> usize {
        b.iter()
            .position(|&c| is_special(c, high))
            .unwrap_or(b.len())
    }

    fn plain_naive(w: &[u8], len: usize) -> bool {
        first_naive(&w[..len.min(w.len())], true) == len.min(w.len())
    }

    /// Each of the 256 byte values at each place of a 48-byte run of plain bytes (and a second
    /// special byte after it, which must not change the answer), for both answers, every
    /// string length, and both the chunk implementation in use and the word one.
    #[test]
    fn every_byte_at_every_place() {
        for c in 0..=255u8 {
            for at in 0..48 {
                for second in [None, Some(b'"'), Some(0x01), Some(0xc3)] {
                    let mut b = [b'a'; 48];
                    b[at] = c;
                    if let Some(s) = second
                        && at + 1 < b.len()
                    {
                        b[at + 1] = s;
                    }
                    for high in [false, true] {
                        for len in [at, at + 1, at + 2, b.len()] {
                            let s = &b[..len.min(b.len())];
                            assert_eq!(
                                super::special_or_high(s, high),
                                first_naive(s, high),
                                "{c:#x} at {at}, {len} bytes, high {high}"
                            );
                        }
                    }
                    let w16: &[u8; 16] = b[..16].try_into().unwrap();
                    let w32: &[u8; 32] = b[..32].try_into().unwrap();
                    for len in 0..=40 {
                        let want16 = plain_naive(w16, len);
                        let want32 = plain_naive(w32, len);
                        assert_eq!(super::plain(w16, len), want16, "{c:#x} at {at}, {len}");
                        assert_eq!(words::plain(w16, len), want16, "{c:#x} at {at}, {len}");
                        assert_eq!(super::plain(w32, len), want32, "{c:#x} at {at}, {len}");
                        assert_eq!(words::plain(w32, len), want32, "{c:#x} at {at}, {len}");
                    }
                    for len in 0..=32 {
                        let want = |w: &[u8]| w[..len.min(w.len())].is_ascii();
                        if len <= 16 {
                            assert_eq!(super::ascii(w16, len), want(w16), "{c:#x} at {at}, {len}");
                            assert_eq!(words::ascii(w16, len), want(w16), "{c:#x} at {at}, {len}");
                        }
                        assert_eq!(super::ascii(w32, len), want(w32), "{c:#x} at {at}, {len}");
                        assert_eq!(words::ascii(w32, len), want(w32), "{c:#x} at {at}, {len}");
                    }
                    for high in [false, true] {
                        let want = |w: &[u8]| Some(first_naive(w, high)).filter(|&i| i < w.len());
                        assert_eq!(words::first_special(w16, high), want(w16));
                        assert_eq!(words::first_special(w32, high), want(w32));
                    }
                }
            }
        }
    }

    /// Random strings of every length up to 200, special bytes scattered.
    #[test]
    fn json_special_finds_the_first_special_byte() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        for len in 0..200usize {
            for _ in 0..50 {
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        let x = next();
                        // Mostly ordinary bytes (including >= 0x80), sometimes special ones.
                        match x % 40 {
                            0 => b'"',
                            1 => b'\\',
                            2 => (x >> 8) as u8 % 0x20,
                            _ => 0x20 + (x >> 8) as u8 % 0xe0,
                        }
                    })
                    .collect();
                assert_eq!(super::json_special(&v), first_naive(&v, false), "{v:?}");
                assert_eq!(
                    super::special_or_high(&v, true),
                    first_naive(&v, true),
                    "{v:?}"
                );
            }
        }
    }
}

//! JSON text as a [`Source`] for the direct encoder: a strict tokenizer that accepts exactly
//! what serde_json (the reference's parser) accepts and yields the same numbers.

use super::Bail;
use super::digits::{decimal_run, div_pow10, integer_run};
use super::encode::{put_int_field, put_plain, put_str_field, put_tag_bytes};
use super::plan::{FieldPlan, MsgPlan};
use super::source::{R, Source};
use crate::scalar::{Lit, Op};
use crate::special::json_special;

pub(crate) struct JsonSrc<'a> {
    /// The input, validated as UTF-8 once; strings are slices of it.
    text: &'a str,
    input: &'a [u8],
    pos: usize,
    /// Unescaped strings, reused.
    scratch: String,
}

impl<'a> JsonSrc<'a> {
    /// A source over `text`, validated as UTF-8 by the caller once for the whole input: every
    /// string slice of it is then a valid &str.
    pub(crate) fn new(text: &'a str) -> JsonSrc<'a> {
        let mut s = JsonSrc {
            text,
            input: text.as_bytes(),
            pos: 0,
            scratch: String::new(),
        };
        s.ws();
        s
    }

    fn eat(&mut self, b: u8) -> R<()> {
        self.ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// A key without escapes, as raw bytes; keys with escapes are left to the reference
    /// (except one spelled exactly as the expected field's escaped key, which `next_field`
    /// recognises: it names that field all the same).
    fn raw_key(&mut self) -> R<&'a [u8]> {
        if self.peek() != Some(b'"') {
            return Err(Bail);
        }
        let start = self.pos + 1;
        let rest = &self.input[start..];
        let len = json_special(rest);
        if rest.get(len) != Some(&b'"') {
            return Err(Bail);
        }
        self.pos = start + len + 1;
        Ok(&self.input[start..start + len])
    }

    /// A key, its colon and the whitespace after it (after the separator).
    fn key(&mut self) -> R<&'a [u8]> {
        // Compact JSON (`"key":value`) takes no whitespace scans.
        if self.peek() != Some(b'"') {
            self.ws();
        }
        let key = self.raw_key()?;
        if self.peek() == Some(b':') {
            self.pos += 1;
        } else {
            self.eat(b':')?;
        }
        if self.maybe_ws() {
            self.ws();
        }
        Ok(key)
    }

    /// The next 16 bytes of input as two little-endian words, zero-padded past the end.
    #[inline]
    fn window(&self) -> [u64; 2] {
        let rest = &self.input[self.pos..];
        match rest.first_chunk::<16>() {
            Some(w) => super::plan::words16(w),
            None => {
                let mut w = [0u8; 16];
                w[..rest.len()].copy_from_slice(rest);
                super::plan::words16(&w)
            }
        }
    }

    /// After a key or element: the separator or the end of the container.
    fn separator(&mut self, close: u8, first: &mut bool) -> R<bool> {
        if self.maybe_ws() {
            self.ws();
        }
        if *first {
            *first = false;
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(false);
            }
            return Ok(true);
        }
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                if self.maybe_ws() {
                    self.ws();
                }
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Bail),
        }
    }

    /// Whether whitespace may follow: one compare (every byte up to the space), where testing
    /// for the four whitespace bytes takes two; `ws` then skips only real whitespace.
    #[inline(always)]
    fn maybe_ws(&self) -> bool {
        self.input.get(self.pos).is_some_and(|&b| b <= b' ')
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(&b) = self.input.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }
    fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }
    fn string(&mut self) -> R<Option<&'a str>> {
        let start = self.pos + 1;
        let rest = &self.input[start..];
        let len = json_special(rest);
        match rest.get(len) {
            Some(b'"') => {
                self.pos = start + len + 1;
                // ASCII quotes end no multi-byte character: the slice is on char boundaries.
                Ok(Some(self.text.get(start..start + len).ok_or(Bail)?))
            }
            Some(b'\\') => {
                self.scratch.clear();
                self.scratch
                    .push_str(self.text.get(start..start + len).ok_or(Bail)?);
                self.pos = start + len;
                self.unescape_rest()?;
                Ok(None)
            }
            _ => Err(Bail),
        }
    }
    /// Continues a string at a backslash, appending to the scratch buffer.
    fn unescape_rest(&mut self) -> R<()> {
        loop {
            let b = *self.input.get(self.pos).ok_or(Bail)?;
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => {
                    let e = *self.input.get(self.pos + 1).ok_or(Bail)?;
                    self.pos += 2;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.input.get(self.pos) != Some(&b'\\')
                                    || self.input.get(self.pos + 1) != Some(&b'u')
                                {
                                    return Err(Bail);
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(Bail);
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(Bail);
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or(Bail)?
                        }
                        _ => return Err(Bail),
                    };
                    self.scratch.push(c);
                }
                0x00..=0x1f => return Err(Bail),
                _ => {
                    let rest = &self.input[self.pos..];
                    let n = json_special(rest);
                    if n == rest.len() {
                        return Err(Bail);
                    }
                    self.scratch
                        .push_str(self.text.get(self.pos..self.pos + n).ok_or(Bail)?);
                    self.pos += n;
                }
            }
        }
    }
    fn hex4(&mut self) -> R<u32> {
        let h = self.input.get(self.pos..self.pos + 4).ok_or(Bail)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16).ok_or(Bail)?;
        }
        self.pos += 4;
        Ok(v)
    }
    /// A number token with the values serde_json gives (the reference parses with it).
    #[inline]
    fn number(&mut self) -> R<Lit<'static>> {
        match self.short_number() {
            Some(lit) => Ok(lit),
            None => self.long_number(),
        }
    }

    /// [`short_number`] at the current position, consumed if read.
    #[inline]
    fn short_number(&mut self) -> Option<Lit<'static>> {
        let (lit, end) = short_number(self.input, self.pos)?;
        self.pos = end;
        Some(lit)
    }

    /// Any number: exponents, long mantissas, integers beyond 19 digits.
    #[cold]
    fn long_number(&mut self) -> R<Lit<'static>> {
        let start = self.pos;
        let b = self.input;
        let (len, integral) = crate::scalar::json_number_len(&b[start..]).ok_or(Bail)?;
        let i = start + len;
        let neg = b[start] == b'-';
        let int_start = start + usize::from(neg);
        self.pos = i;
        let text = self.text.get(start..i).ok_or(Bail)?;
        if !integral {
            let f: f64 = text.parse().map_err(|_| Bail)?;
            // serde_json rejects numbers out of the double range.
            return if f.is_finite() {
                Ok(Lit::F64(f))
            } else {
                Err(Bail)
            };
        }
        let mut mag: u64 = 0;
        // Integral: digits from `int_start` to the end.
        for &d in &b[int_start..i] {
            match mag
                .checked_mul(10)
                .and_then(|m| m.checked_add((d - b'0') as u64))
            {
                Some(m) => mag = m,
                None => {
                    let f: f64 = text.parse().map_err(|_| Bail)?;
                    return if f.is_finite() {
                        Ok(Lit::BigInt(f))
                    } else {
                        Err(Bail)
                    };
                }
            }
        }
        Ok(integer_lit(neg, mag))
    }
}

/// The number token at `b[pos..]` and where it ends, if it is one of the common numbers, read
/// in one pass: at most 19 digits, no exponent, and for fractions a value exactly computed as
/// `digits / 10^k` (digits ≤ 2^53, k ≤ 18: both exact doubles, so the division rounds once,
/// correctly — what serde_json's float_roundtrip parsing gives). `None` for the rest.
#[inline(always)]
pub(crate) fn short_number(b: &[u8], pos: usize) -> Option<(Lit<'static>, usize)> {
    const POW10: [f64; 19] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18,
    ];
    let neg = b.get(pos) == Some(&b'-');
    let int_start = pos + usize::from(neg);
    let (i, mag) = decimal_run(b, int_start, 0);
    let int_digits = i - int_start;
    if int_digits == 0 || int_digits > 19 || (int_digits > 1 && b[int_start] == b'0') {
        return None;
    }
    match b.get(i) {
        Some(b'.') => {}
        Some(b'e' | b'E') => return None,
        _ => return Some((integer_lit(neg, mag), i)),
    }
    let frac_start = i + 1;
    let (j, mag) = decimal_run(b, frac_start, mag);
    let frac_digits = j - frac_start;
    if frac_digits == 0 || int_digits + frac_digits > 19 || matches!(b.get(j), Some(b'e' | b'E')) {
        return None;
    }
    let f = if mag <= 1 << 53 {
        mag as f64 / POW10.get(frac_digits)?
    } else {
        // 16 to 19 significant digits (what shortest-form printers give most doubles).
        div_pow10(mag, frac_digits)
    };
    Some((Lit::F64(if neg { -f } else { f }), j))
}

/// An integer literal of magnitude `mag` as serde_json reads it.
#[inline(always)]
fn integer_lit(neg: bool, mag: u64) -> Lit<'static> {
    if !neg {
        if mag <= i64::MAX as u64 {
            Lit::I64(mag as i64)
        } else {
            Lit::U64(mag)
        }
    } else if mag == 0 {
        // serde_json reads `-0` as the double -0.0.
        Lit::F64(-0.0)
    } else if mag <= 1 << 63 {
        Lit::I64((mag as i64).wrapping_neg())
    } else {
        Lit::BigInt(-(mag as f64))
    }
}

impl<'a> Source<'a> for JsonSrc<'a> {
    /// Whether no entry has been read yet.
    type Open = bool;

    fn object(&mut self) -> R<bool> {
        self.eat(b'{')?;
        Ok(true)
    }

    fn next_key(&mut self, first: &mut bool) -> R<Option<&'a [u8]>> {
        if !self.separator(b'}', first)? {
            return Ok(None);
        }
        self.key().map(Some)
    }

    #[inline]
    fn next_field(&mut self, first: &mut bool, plan: &MsgPlan, hint: usize) -> R<Option<usize>> {
        if !self.separator(b'}', first)? {
            return Ok(None);
        }
        // Compact JSON whose keys come in declaration order: the expected `"key":` is
        // recognised with two word compares, no scan and no lookup; so is the one after it
        // (proto3 JSON leaves default values out, so a field is often skipped).
        let Some(f) = plan.expected_key(hint, self.window(), |f| &f.json_key_words) else {
            let key = self.key()?;
            return plan.by_key(key, hint).map(Some).ok_or(Bail);
        };
        self.pos += plan.fields[f].json_key_words.len;
        if self.maybe_ws() {
            self.ws();
        }
        Ok(Some(f))
    }

    /// Strings without escapes, integers (numbers, or strings of ≤ 18 digits), the numbers
    /// [`JsonSrc::short_number`] reads, booleans.
    #[inline(always)]
    fn plain_field(&mut self, field: &FieldPlan, always: bool, out: &mut Vec<u8>) -> R<bool> {
        let at = self.pos;
        let Some(&c) = self.input.get(at) else {
            return Ok(false);
        };
        let lit = match (field.op, c) {
            (Op::Str, b'"') => {
                let rest = &self.input[at + 1..];
                let len = json_special(rest);
                if rest.get(len) != Some(&b'"') {
                    return Ok(false);
                }
                self.pos = at + len + 2;
                if always || len != 0 {
                    put_str_field(out, &field.tag, rest, len);
                }
                return Ok(true);
            }
            (Op::Bool, b't' | b'f') => {
                let b = c == b't';
                let word: &[u8] = if b { b"true" } else { b"false" };
                if !self.input[at..].starts_with(word) {
                    return Ok(false);
                }
                self.pos = at + word.len();
                if always || b {
                    put_tag_bytes(out, &field.tag);
                    out.push(u8::from(b));
                }
                return Ok(true);
            }
            (Op::Str | Op::Bool | Op::Bytes | Op::Enum | Op::Message, _) => return Ok(false),
            (Op::Double | Op::Float, b'"') => return Ok(false),
            (_, b'"') => {
                // An integer field's value as a string of digits, read in one pass up to
                // the closing quote (no scan for the string's end first).
                let Some((v, end)) = integer_run(self.input, at + 1) else {
                    return Ok(false);
                };
                if self.input.get(end) != Some(&b'"') {
                    return Ok(false);
                }
                put_int_field(out, &field.tag, field.op, v, always)?;
                self.pos = end + 1;
                return Ok(true);
            }
            (_, b'-' | b'0'..=b'9') => match self.short_number() {
                Some(lit) => lit,
                None => return Ok(false),
            },
            _ => return Ok(false),
        };
        if put_plain(out, &field.tag, field.op, &lit, always)? {
            Ok(true)
        } else {
            self.pos = at;
            Ok(false)
        }
    }

    fn array(&mut self) -> R<bool> {
        self.eat(b'[')?;
        Ok(true)
    }

    fn next_element(&mut self, first: &mut bool) -> R<bool> {
        let more = self.separator(b']', first)?;
        if self.maybe_ws() {
            self.ws();
        }
        Ok(more)
    }

    fn peek_null(&mut self) -> bool {
        self.peek() == Some(b'n')
    }

    fn null(&mut self) -> R<()> {
        self.literal(b"null")
    }

    fn scalar(&mut self) -> R<Lit<'_>> {
        Ok(match self.peek().ok_or(Bail)? {
            b'"' => match self.string()? {
                Some(s) => Lit::Str(s),
                None => Lit::Str(&self.scratch),
            },
            b't' => self.literal(b"true").map(|()| Lit::Bool(true))?,
            b'f' => self.literal(b"false").map(|()| Lit::Bool(false))?,
            b'n' => self.literal(b"null").map(|()| Lit::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(Bail),
        })
    }

    fn capture(&mut self) -> R<&'a [u8]> {
        let start = self.pos;
        let mut depth = 0usize;
        loop {
            self.ws();
            match self.peek().ok_or(Bail)? {
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                    continue;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(Bail)?;
                    self.pos += 1;
                }
                b',' | b':' if depth > 0 => {
                    self.pos += 1;
                    continue;
                }
                _ => {
                    self.scalar()?;
                }
            }
            if depth == 0 {
                return Ok(&self.input[start..self.pos]);
            }
        }
    }

    fn tree(&self, bytes: &[u8], max_containers: usize) -> R<crate::tree::In> {
        crate::json::parse(bytes, max_containers).map_err(|_| Bail)
    }

    fn finish(&mut self) -> R<()> {
        self.ws();
        if self.pos == self.input.len() {
            Ok(())
        } else {
            Err(Bail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JsonSrc;
    use crate::scalar::Lit;

    /// The one-pass number reader agrees bit for bit with the general one (whose doubles are
    /// the standard library's correctly rounded parse) wherever it answers.
    #[test]
    fn short_numbers_equal_the_general_parse() {
        let mut rng = crate::xorshift(0x2545_f491_4f6c_dd1d);
        let mut next = |n: u64| rng() % n;
        let mut answered = 0;
        for _ in 0..300_000 {
            let mut t = String::new();
            if next(2) == 0 {
                t.push('-');
            }
            let int_digits = 1 + next(21) as usize;
            // Half the numbers with 16 to 19 significant digits, where the exact division
            // takes over from the double division.
            let frac_len = if next(2) == 0 {
                (16 + next(4) as usize).saturating_sub(int_digits)
            } else {
                next(24) as usize
            };
            for k in 0..int_digits {
                // Leading zeros now and then: invalid JSON, both must refuse.
                let d = if k == 0 && next(8) != 0 {
                    1 + next(9)
                } else {
                    next(10)
                };
                t.push(char::from(b'0' + d as u8));
            }
            if next(3) != 0 {
                t.push('.');
                for _ in 0..frac_len {
                    t.push(char::from(b'0' + next(10) as u8));
                }
            }
            if next(10) == 0 {
                t.push_str("e-3");
            }
            t.push(*[',', '}', ']', ' '].get(next(4) as usize).unwrap());
            let mut short = JsonSrc::new(&t);
            let Some(got) = short.short_number() else {
                continue;
            };
            answered += 1;
            let mut long = JsonSrc::new(&t);
            let want = long
                .long_number()
                .unwrap_or_else(|_| panic!("{t}: refused"));
            let same = match (got, want) {
                (Lit::F64(a), Lit::F64(b)) | (Lit::BigInt(a), Lit::BigInt(b)) => {
                    a.to_bits() == b.to_bits()
                }
                (a, b) => a == b,
            };
            assert!(same, "{t}: {got:?} vs {want:?}");
            assert_eq!(short.pos, long.pos, "{t}");
        }
        assert!(answered > 100_000, "{answered}");
    }

    /// The exact division at its rounding edges: halfway cases (ties to even, both ways),
    /// just above and below them, quotients halfway with a remainder, a carry into the next
    /// power of two, and the range's ends.
    #[test]
    fn long_fractions_round_as_the_general_parse() {
        for t in [
            "9007199254740993.0",
            "9007199254740995.0",
            "9007199254740993.1",
            "9007199254740992.9",
            "18014398509481985.0",
            "18014398509481987.00",
            "9007199254740991.99",
            "9999999999999999.999",
            "184467440737095516.5",
            "0.999999999999999999",
            "0.100000000000000005",
            "0.100000000000000006",
            "123.4567890123456789",
            "-18.016010181088284",
            "0.000000000000000001",
            // Quotient bits exactly at the halfway point and a remainder above it (found by
            // search): the remainder decides.
            "1.845115683531643902",
            "58.64008329877630743",
            "4.666328717212361088",
        ] {
            let text = format!("{t},");
            let got = JsonSrc::new(&text).short_number();
            let want: f64 = t.parse().unwrap();
            match got {
                Some(Lit::F64(f)) => assert_eq!(f.to_bits(), want.to_bits(), "{t}: {f} vs {want}"),
                other => panic!("{t}: {other:?}"),
            }
        }
    }
}

//! JSON text as a [`Source`] for the direct encoder: a strict tokenizer that accepts exactly
//! what serde_json (the reference's parser) accepts and yields the same numbers.

use super::Bail;
use super::source::{R, Source};
use crate::json::json_special;
use crate::scalar::Lit;

pub(crate) struct JsonSrc<'a> {
    /// The input, validated as UTF-8 once; strings are slices of it.
    text: &'a str,
    input: &'a [u8],
    pos: usize,
    /// Per open object or array: no key or element read yet.
    first: Vec<bool>,
    /// Unescaped strings, reused.
    scratch: String,
}

impl<'a> JsonSrc<'a> {
    pub(crate) fn new(input: &'a [u8]) -> R<JsonSrc<'a>> {
        // Valid UTF-8 once for the whole text: every string slice is then a valid &str.
        let text = std::str::from_utf8(input).map_err(|_| Bail)?;
        let mut s = JsonSrc {
            text,
            input,
            pos: 0,
            first: Vec::new(),
            scratch: String::new(),
        };
        s.ws();
        Ok(s)
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

    /// A key without escapes, as raw bytes; keys with escapes are left to the reference.
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

    /// After a key or element: the separator or the end of the container.
    fn separator(&mut self, close: u8) -> R<bool> {
        if matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.ws();
        }
        let first = self.first.last_mut().ok_or(Bail)?;
        if *first {
            *first = false;
            if self.peek() == Some(close) {
                self.pos += 1;
                self.first.pop();
                return Ok(false);
            }
            return Ok(true);
        }
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
                    self.ws();
                }
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                self.first.pop();
                Ok(false)
            }
            _ => Err(Bail),
        }
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
    fn number(&mut self) -> R<Lit<'static>> {
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
        Ok(if !neg {
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
        })
    }
}

impl<'a> Source<'a> for JsonSrc<'a> {
    fn object(&mut self) -> R<()> {
        self.eat(b'{')?;
        self.first.push(true);
        Ok(())
    }

    fn next_key(&mut self) -> R<Option<&'a [u8]>> {
        if !self.separator(b'}')? {
            return Ok(None);
        }
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
        if matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.ws();
        }
        Ok(Some(key))
    }

    fn array(&mut self) -> R<()> {
        self.eat(b'[')?;
        self.first.push(true);
        Ok(())
    }

    fn next_element(&mut self) -> R<bool> {
        let more = self.separator(b']')?;
        self.ws();
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

//! JSON → protobuf wire bytes, written straight from a scan of the JSON text: no value tree,
//! no per-field allocation. Anything unusual (an error, a well-known type's own form, a key
//! with escapes, options it does not handle) makes it give up with [`Bail`]; the caller then
//! runs the reference path, which also produces the error message. It never accepts what the
//! reference rejects, and writes the same bytes when both accept.

use super::Bail;
use super::plan::{Card, FieldPlan, Plans};
use crate::scalar::{self, Converted, Lit};
use crate::wire::put_varint;
use crate::{Findings, Options};

pub(crate) struct JsonIn<'a> {
    input: &'a [u8],
    pos: usize,
    plans: &'a Plans,
    opts: &'a Options,
    depth: usize,
    /// Unescaped strings and decoded base64, reused.
    scratch: String,
}

type R<T> = Result<T, Bail>;

/// Converts JSON `input` to protobuf bytes of message plan `root`, appended to `out`.
pub(crate) fn encode(
    plans: &Plans,
    root: usize,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
) -> R<()> {
    if opts.ignore_unknown_fields || plans.msgs[root].special {
        return Err(Bail);
    }
    // Valid UTF-8 once for the whole text: every string slice is then a valid &str.
    std::str::from_utf8(input).map_err(|_| Bail)?;
    let mut p = JsonIn {
        input,
        pos: 0,
        plans,
        opts,
        depth: 0,
        scratch: String::new(),
    };
    p.ws();
    p.message(root, out)?;
    p.ws();
    if p.pos != input.len() {
        return Err(Bail);
    }
    Ok(())
}

impl<'a> JsonIn<'a> {
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

    #[inline]
    fn eat(&mut self, b: u8) -> R<()> {
        self.ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    fn message(&mut self, plan_idx: usize, out: &mut Vec<u8>) -> R<()> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err(Bail);
        }
        let plans = self.plans;
        let plan = &plans.msgs[plan_idx];
        if plan.fields.len() > 256 {
            return Err(Bail);
        }
        self.eat(b'{')?;
        let mut seen = [0u64; 4];
        let mut oneofs = 0u64;
        let mut hint = 0usize;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                let key = self.raw_key()?;
                let fi = plan.by_key(key, hint).ok_or(Bail)?;
                let (word, bit) = (fi / 64, 1u64 << (fi % 64));
                if seen[word] & bit != 0 {
                    return Err(Bail);
                }
                seen[word] |= bit;
                hint = fi + 1;
                self.eat(b':')?;
                self.ws();
                let field = &plan.fields[fi];
                if self.peek() == Some(b'n') {
                    if field.null_is_value {
                        return Err(Bail);
                    }
                    // null: the field is not set (and does not count as a oneof member).
                    self.literal(b"null")?;
                } else {
                    if let Some(o) = field.oneof {
                        if o >= 64 || oneofs & (1 << o) != 0 {
                            return Err(Bail);
                        }
                        oneofs |= 1 << o;
                    }
                    self.field(field, out)?;
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Bail),
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// A key without escapes, as raw bytes; keys with escapes are left to the reference.
    #[inline]
    fn raw_key(&mut self) -> R<&'a [u8]> {
        if self.peek() != Some(b'"') {
            return Err(Bail);
        }
        let start = self.pos + 1;
        let rest = &self.input[start..];
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .ok_or(Bail)?;
        if rest[len] != b'"' {
            return Err(Bail);
        }
        self.pos = start + len + 1;
        Ok(&self.input[start..start + len])
    }

    fn field(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        match field.card {
            Card::Single => match field.message {
                Some(m) => self.message_field(field.tag.as_slice(), m, out),
                None => {
                    let lit = self.scalar()?;
                    let lit = self.lit(lit);
                    match scalar::convert(&field.kind, &lit, false).map_err(|_| Bail)? {
                        Converted::Value(s) => {
                            scalar::put_field(out, field.number, &field.kind, s, field.presence)
                        }
                        Converted::OwnedBytes(b) => scalar::put_field(
                            out,
                            field.number,
                            &field.kind,
                            scalar::Scalar::Bytes(&b),
                            field.presence,
                        ),
                        Converted::Skip => return Err(Bail),
                    }
                    Ok(())
                }
            },
            Card::List => self.list(field, out),
            Card::Map => self.map(field, out),
        }
    }

    /// A message-typed value: tag, length, content. Well-known types go to the reference.
    fn message_field(&mut self, tag: &[u8], plan_idx: usize, out: &mut Vec<u8>) -> R<()> {
        out.extend_from_slice(tag);
        let len_at = out.len();
        out.push(0);
        if self.plans.msgs[plan_idx].special {
            self.delegate(plan_idx, out)?;
        } else {
            self.message(plan_idx, out)?;
        }
        patch_len(out, len_at);
        Ok(())
    }

    /// Hands one value (a well-known type) to the reference encoder.
    fn delegate(&mut self, plan_idx: usize, out: &mut Vec<u8>) -> R<()> {
        let start = self.pos;
        self.skip_value()?;
        let text = &self.input[start..self.pos];
        let desc = &self.plans.msgs[plan_idx].desc;
        let tree = crate::json::parse(text, crate::max_containers(self.opts)).map_err(|_| Bail)?;
        let mut findings = Findings::default();
        crate::encode::Encoder::at_depth(self.opts, &mut findings, self.depth)
            .message(desc, &tree, out)
            .map_err(|_| Bail)
    }

    fn list(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        self.eat(b'[')?;
        self.ws();
        let empty = self.peek() == Some(b']');
        if field.packed {
            let start = out.len();
            out.extend_from_slice(&field.tag);
            let len_at = out.len();
            out.push(0);
            if !empty {
                loop {
                    self.ws();
                    let lit = self.scalar()?;
                    let lit = self.lit(lit);
                    match scalar::convert(&field.kind, &lit, false).map_err(|_| Bail)? {
                        Converted::Value(s) => scalar::put_value(out, &field.kind, s),
                        _ => return Err(Bail),
                    }
                    if !self.next_element()? {
                        break;
                    }
                }
            } else {
                self.pos += 1;
            }
            if out.len() == len_at + 1 {
                out.truncate(start);
            } else {
                patch_len(out, len_at);
            }
            return Ok(());
        }
        if empty {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.peek() == Some(b'n') {
                return Err(Bail);
            }
            match field.message {
                Some(m) => self.message_field(&field.tag, m, out)?,
                None => {
                    let lit = self.scalar()?;
                    let lit = self.lit(lit);
                    match scalar::convert(&field.kind, &lit, false).map_err(|_| Bail)? {
                        Converted::Value(s) => {
                            scalar::put_field(out, field.number, &field.kind, s, true)
                        }
                        Converted::OwnedBytes(b) => scalar::put_field(
                            out,
                            field.number,
                            &field.kind,
                            scalar::Scalar::Bytes(&b),
                            true,
                        ),
                        Converted::Skip => return Err(Bail),
                    }
                }
            }
            if !self.next_element()? {
                return Ok(());
            }
        }
    }

    /// After an array element: true if another follows.
    #[inline]
    fn next_element(&mut self) -> R<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b']') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Bail),
        }
    }

    fn map(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        let (Some(key_kind), Some((value_kind, value_plan))) = (&field.map_key, &field.map_value)
        else {
            return Err(Bail);
        };
        self.eat(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        let mut keys: Vec<&'a [u8]> = Vec::new();
        loop {
            self.ws();
            let key = self.raw_key()?;
            // Duplicate keys are an error in the reference; leave them to it.
            if keys.len() > 64 || keys.contains(&key) {
                return Err(Bail);
            }
            keys.push(key);
            self.eat(b':')?;
            self.ws();
            if self.peek() == Some(b'n') {
                return Err(Bail);
            }
            out.extend_from_slice(&field.tag);
            let len_at = out.len();
            out.push(0);
            let key_str = std::str::from_utf8(key).map_err(|_| Bail)?;
            let k = scalar::map_key(key_kind, &Lit::Str(key_str)).map_err(|_| Bail)?;
            scalar::put_field(out, 1, key_kind, k, true);
            match value_plan {
                Some(m) => self.message_field(&[0x12], *m, out)?,
                None => {
                    let lit = self.scalar()?;
                    let lit = self.lit(lit);
                    match scalar::convert(value_kind, &lit, false).map_err(|_| Bail)? {
                        Converted::Value(s) => scalar::put_field(out, 2, value_kind, s, true),
                        Converted::OwnedBytes(b) => {
                            scalar::put_field(out, 2, value_kind, scalar::Scalar::Bytes(&b), true)
                        }
                        Converted::Skip => return Err(Bail),
                    }
                }
            }
            patch_len(out, len_at);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(Bail),
            }
        }
    }

    /// One scalar token. Strings with escapes are unescaped into the scratch buffer.
    fn scalar(&mut self) -> R<Tok<'a>> {
        match self.peek().ok_or(Bail)? {
            b'"' => self.string(),
            b't' => self.literal(b"true").map(|()| Tok::Bool(true)),
            b'f' => self.literal(b"false").map(|()| Tok::Bool(false)),
            b'n' => self.literal(b"null").map(|()| Tok::Null),
            b'-' | b'0'..=b'9' => self.number(),
            b'[' | b'{' => Err(Bail),
            _ => Err(Bail),
        }
    }

    fn lit<'s>(&'s self, t: Tok<'a>) -> Lit<'s>
    where
        'a: 's,
    {
        match t {
            Tok::Null => Lit::Null,
            Tok::Bool(b) => Lit::Bool(b),
            Tok::I64(i) => Lit::I64(i),
            Tok::U64(u) => Lit::U64(u),
            Tok::F64(f) => Lit::F64(f),
            Tok::BigInt(f) => Lit::BigInt(f),
            Tok::Str(s) => Lit::Str(s),
            Tok::Scratch => Lit::Str(&self.scratch),
        }
    }

    fn string(&mut self) -> R<Tok<'a>> {
        let start = self.pos + 1;
        let rest = &self.input[start..];
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .ok_or(Bail)?;
        match rest[len] {
            b'"' => {
                self.pos = start + len + 1;
                // The whole input is valid UTF-8 and a quote ends no multi-byte character.
                let s = std::str::from_utf8(&rest[..len]).map_err(|_| Bail)?;
                Ok(Tok::Str(s))
            }
            b'\\' => {
                self.scratch.clear();
                self.scratch
                    .push_str(std::str::from_utf8(&rest[..len]).map_err(|_| Bail)?);
                self.pos = start + len;
                self.unescape_rest()?;
                Ok(Tok::Scratch)
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
                    let n = rest
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .ok_or(Bail)?;
                    self.scratch
                        .push_str(std::str::from_utf8(&rest[..n]).map_err(|_| Bail)?);
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
    fn number(&mut self) -> R<Tok<'a>> {
        let start = self.pos;
        let b = self.input;
        let mut i = start;
        let neg = b[i] == b'-';
        if neg {
            i += 1;
        }
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int_len = i - int_start;
        if int_len == 0 || (int_len > 1 && b[int_start] == b'0') {
            return Err(Bail);
        }
        let mut integral = true;
        if i < b.len() && b[i] == b'.' {
            integral = false;
            i += 1;
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == s {
                return Err(Bail);
            }
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            integral = false;
            i += 1;
            if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                i += 1;
            }
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == s {
                return Err(Bail);
            }
        }
        self.pos = i;
        // Safe: ASCII digits and signs only.
        let text = std::str::from_utf8(&b[start..i]).map_err(|_| Bail)?;
        if !integral {
            let f: f64 = text.parse().map_err(|_| Bail)?;
            // serde_json rejects numbers out of the double range.
            return if f.is_finite() {
                Ok(Tok::F64(f))
            } else {
                Err(Bail)
            };
        }
        let mut mag: u64 = 0;
        for &d in &b[int_start..i] {
            match mag
                .checked_mul(10)
                .and_then(|m| m.checked_add((d - b'0') as u64))
            {
                Some(m) => mag = m,
                None => {
                    let f: f64 = text.parse().map_err(|_| Bail)?;
                    return if f.is_finite() {
                        Ok(Tok::BigInt(f))
                    } else {
                        Err(Bail)
                    };
                }
            }
        }
        Ok(if !neg {
            if mag <= i64::MAX as u64 {
                Tok::I64(mag as i64)
            } else {
                Tok::U64(mag)
            }
        } else if mag == 0 {
            // serde_json reads `-0` as the double -0.0.
            Tok::F64(-0.0)
        } else if mag <= 1 << 63 {
            Tok::I64((mag as i64).wrapping_neg())
        } else {
            Tok::BigInt(-(mag as f64))
        })
    }

    /// Skips one JSON value (for delegation); the reference re-parses and validates it.
    fn skip_value(&mut self) -> R<()> {
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
                    if depth == 0 {
                        return Err(Bail);
                    }
                    depth -= 1;
                    self.pos += 1;
                }
                b'"' => {
                    self.string()?;
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
                return Ok(());
            }
        }
    }
}

/// A scalar token; `Scratch` means the unescaped string in the scratch buffer.
#[derive(Clone, Copy)]
enum Tok<'a> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    BigInt(f64),
    Str(&'a str),
    Scratch,
}

/// Writes the length of the content after the one byte reserved at `len_at`, moving the
/// content when the length needs more than one byte.
#[inline]
pub(crate) fn patch_len(out: &mut Vec<u8>, len_at: usize) {
    let len = out.len() - len_at - 1;
    if len < 0x80 {
        out[len_at] = len as u8;
        return;
    }
    let mut tmp = Vec::with_capacity(10);
    put_varint(&mut tmp, len as u64);
    let extra = tmp.len() - 1;
    let end = out.len();
    out.resize(end + extra, 0);
    out.copy_within(len_at + 1..end, len_at + 1 + extra);
    out[len_at..len_at + tmp.len()].copy_from_slice(&tmp);
}

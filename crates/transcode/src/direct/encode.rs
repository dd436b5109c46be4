//! JSON or MessagePack → protobuf wire bytes, written straight from the input's scan: no value
//! tree, no per-field allocation. Whatever is unusual (any error, a key with escapes, options
//! it does not handle) makes it give up with [`Bail`]; the caller then runs the reference path,
//! which also produces the error message. It never accepts what the reference rejects, and
//! writes the same bytes when both accept (fields in input order, nested lengths patched in).

use super::Bail;
use super::plan::{Card, FieldPlan, Plans};
use super::source::{R, Source};
use crate::scalar::{self, Converted, Lit, Scalar};
use crate::{Findings, Options};

/// The tag of a map entry's value field (2, length-delimited).
const MAP_VALUE_TAG: [u8; 1] = [0x12];

pub(crate) struct Encoder<'p, S> {
    src: S,
    plans: &'p Plans,
    opts: &'p Options,
    depth: usize,
}

/// Converts the value in `src` to protobuf bytes of message plan `root`, appended to `out`.
pub(crate) fn encode<'a, S: Source<'a>>(
    plans: &Plans,
    root: usize,
    src: S,
    out: &mut Vec<u8>,
    opts: &Options,
) -> R<()> {
    if opts.ignore_unknown_fields || plans.msgs[root].special {
        return Err(Bail);
    }
    let mut e = Encoder {
        src,
        plans,
        opts,
        depth: 0,
    };
    e.message(root, out)?;
    e.src.finish()
}

impl<'a, 'p, S: Source<'a>> Encoder<'p, S> {
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
        self.src.object()?;
        let mut seen = [0u64; 4];
        let mut oneofs = 0u64;
        let mut hint = 0usize;
        while let Some(key) = self.src.next_key()? {
            let fi = plan.by_key(key, hint).ok_or(Bail)?;
            let (word, bit) = (fi / 64, 1u64 << (fi % 64));
            if seen[word] & bit != 0 {
                return Err(Bail);
            }
            seen[word] |= bit;
            hint = fi + 1;
            let field = &plan.fields[fi];
            if self.src.peek_null() {
                if field.null_is_value {
                    return Err(Bail);
                }
                // null: not set (and not a oneof member).
                self.src.null()?;
                continue;
            }
            if let Some(o) = field.oneof {
                if o >= 64 || oneofs & (1 << o) != 0 {
                    return Err(Bail);
                }
                oneofs |= 1 << o;
            }
            match field.card {
                Card::Single => match field.message {
                    Some(m) => self.message_field(&field.tag, m, out)?,
                    None => self.scalar_field(&field.tag, &field.kind, field.presence, out)?,
                },
                Card::List => self.list(field, out)?,
                Card::Map => self.map(field, out)?,
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// A scalar value with its tag; implicit-presence defaults are not written.
    #[inline]
    fn scalar_field(
        &mut self,
        tag: &[u8],
        kind: &prost_reflect::Kind,
        always: bool,
        out: &mut Vec<u8>,
    ) -> R<()> {
        let lit = self.src.scalar()?;
        match scalar::convert(kind, &lit, false).map_err(|_| Bail)? {
            Converted::Value(s) => scalar::put_tagged(out, tag, kind, s, always),
            Converted::OwnedBytes(b) => {
                scalar::put_tagged(out, tag, kind, Scalar::Bytes(&b), always)
            }
            Converted::Skip => return Err(Bail),
        }
        Ok(())
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
        let bytes = self.src.capture()?;
        let tree = self.src.tree(bytes, crate::max_containers(self.opts))?;
        let desc = &self.plans.msgs[plan_idx].desc;
        let mut findings = Findings::default();
        crate::encode::Encoder::at_depth(self.opts, &mut findings, self.depth)
            .message(desc, &tree, out)
            .map_err(|_| Bail)
    }

    fn list(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        self.src.array()?;
        if field.packed {
            let start = out.len();
            out.extend_from_slice(&field.tag);
            let len_at = out.len();
            out.push(0);
            while self.src.next_element()? {
                let lit = self.src.scalar()?;
                match scalar::convert(&field.kind, &lit, false).map_err(|_| Bail)? {
                    Converted::Value(s) => scalar::put_value(out, &field.kind, s),
                    _ => return Err(Bail),
                }
            }
            if out.len() == len_at + 1 {
                // An empty list writes nothing.
                out.truncate(start);
            } else {
                patch_len(out, len_at);
            }
            return Ok(());
        }
        while self.src.next_element()? {
            if self.src.peek_null() {
                return Err(Bail);
            }
            match field.message {
                Some(m) => self.message_field(&field.tag, m, out)?,
                None => self.scalar_field(&field.tag, &field.kind, true, out)?,
            }
        }
        Ok(())
    }

    fn map(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        let (Some(key_kind), Some((value_kind, value_plan))) = (&field.map_key, &field.map_value)
        else {
            return Err(Bail);
        };
        self.src.object()?;
        let mut keys: Vec<&'a [u8]> = Vec::new();
        while let Some(key) = self.src.next_key()? {
            // Duplicate keys are an error in the reference; leave them to it.
            if keys.len() >= 64 || keys.contains(&key) {
                return Err(Bail);
            }
            keys.push(key);
            if self.src.peek_null() {
                return Err(Bail);
            }
            out.extend_from_slice(&field.tag);
            let len_at = out.len();
            out.push(0);
            let key_str = std::str::from_utf8(key).map_err(|_| Bail)?;
            let k = scalar::map_key(key_kind, &Lit::Str(key_str)).map_err(|_| Bail)?;
            scalar::put_field(out, 1, key_kind, k, true);
            match value_plan {
                Some(m) => self.message_field(&MAP_VALUE_TAG, *m, out)?,
                None => {
                    let tag = [0x10 | scalar::wire_type(value_kind)];
                    self.scalar_field(&tag, value_kind, true, out)?
                }
            }
            patch_len(out, len_at);
        }
        Ok(())
    }
}

/// Writes the length of the content after the one byte reserved at `len_at`, moving the
/// content when the length needs more than one byte.
#[inline]
pub(crate) fn patch_len(out: &mut Vec<u8>, len_at: usize) {
    let len = out.len() - len_at - 1;
    if len < 0x80 {
        out[len_at] = len as u8;
    } else {
        patch_long_len(out, len_at, len);
    }
}

/// [`patch_len`] for content of 128 bytes or more: out of line, so that the one-byte case
/// inlines small.
#[cold]
#[inline(never)]
fn patch_long_len(out: &mut Vec<u8>, len_at: usize, len: usize) {
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
    out.resize(end + n - 1, 0);
    out.copy_within(len_at + 1..end, len_at + n);
    out[len_at..len_at + n].copy_from_slice(&head[..n]);
}

#[cfg(test)]
mod tests {
    use crate::wire::put_varint;

    #[test]
    fn patch_len_moves_long_content() {
        for len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut out = vec![9, 0];
            out.extend(std::iter::repeat_n(7u8, len));
            super::patch_len(&mut out, 1);
            let mut want = vec![9];
            put_varint(&mut want, len as u64);
            want.extend(std::iter::repeat_n(7u8, len));
            assert_eq!(out, want, "{len}");
        }
    }
}

//! JSON or MessagePack → protobuf wire bytes, written straight from the input's scan: no value
//! tree, no per-field allocation. Whatever is unusual (any error, a key with escapes, options
//! it does not handle) makes it give up with [`Bail`]; the caller then runs the reference path,
//! which also produces the error message. It never accepts what the reference rejects, and
//! writes the same bytes when both accept (fields in input order, nested lengths patched in).

use super::Bail;
use super::digits::plain_integer;
use super::plan::{Card, FieldPlan, Plans};
use super::source::{R, Source};
use crate::scalar::{self, Converted, Lit, Op, Scalar};
use crate::wire::{self, patch_len, put_varint};
use crate::{Findings, Options};
use prost_reflect::Kind;

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
        let mut open = self.src.object()?;
        // Fields seen so far: the first 64 in a word of their own (kept in a register), the
        // rest (plans hold at most 256) in three more.
        let mut seen = 0u64;
        let mut seen_high = [0u64; 3];
        let mut oneofs = 0u64;
        let mut hint = 0usize;
        while let Some(fi) = self.src.next_field(&mut open, plan, hint)? {
            let bit = 1u64 << (fi % 64);
            let word = if fi < 64 {
                &mut seen
            } else {
                seen_high.get_mut(fi / 64 - 1).ok_or(Bail)?
            };
            if *word & bit != 0 {
                return Err(Bail);
            }
            *word |= bit;
            hint = fi + 1;
            let field = &plan.fields[fi];
            // A singular scalar outside any oneof in one of the common shapes, tried before
            // the null test (`plain_field` takes no null).
            if field.plain_first && self.src.plain_field(field, field.presence, out)? {
                continue;
            }
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
                    Some(m) => {
                        self.message_field(&field.tag, m, 1, out)?;
                    }
                    None => {
                        if field.plain_first || !self.src.plain_field(field, field.presence, out)? {
                            self.scalar_field(field, field.presence, out)?
                        }
                    }
                },
                Card::List => self.list(field, out)?,
                Card::Map => self.map(field, out)?,
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// A scalar value of `field` with its tag; implicit-presence defaults are not written.
    #[inline]
    fn scalar_field(&mut self, field: &FieldPlan, always: bool, out: &mut Vec<u8>) -> R<()> {
        let lit = self.src.scalar()?;
        if put_plain(out, &field.tag, field.op, &lit, always)? {
            return Ok(());
        }
        convert_tagged(out, &field.tag, &field.kind, &lit, always)
    }

    /// A message-typed value: tag, length, content, with `reserve` bytes (1 or more) left for
    /// the length; returns the number its varint took. A list's elements reserve what the
    /// one before took: a list of 128-byte-or-larger messages then moves only its first
    /// element's content (≈ 150 instructions an element of LogBatch_1000 otherwise).
    /// Well-known types go to the reference.
    fn message_field(
        &mut self,
        tag: &[u8],
        plan_idx: usize,
        reserve: usize,
        out: &mut Vec<u8>,
    ) -> R<usize> {
        let len_at = open_len(out, tag, reserve);
        if self.plans.msgs[plan_idx].special {
            self.delegate(plan_idx, out)?;
        } else {
            self.message(plan_idx, out)?;
        }
        Ok(wire::patch_reserved_len(out, len_at, reserve))
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
        let mut open = self.src.array()?;
        if field.packed {
            let start = out.len();
            out.extend_from_slice(&field.tag);
            let len_at = out.len();
            out.push(0);
            while self.src.next_element(&mut open)? {
                let lit = self.src.scalar()?;
                if plain_value(out, field.op, &lit)? {
                    continue;
                }
                match scalar::convert(&field.kind, &lit, false).map_err(|_| Bail)? {
                    Converted::Value(s) => scalar::put_value(out, field.op, s),
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
        let mut reserve = 1;
        while self.src.next_element(&mut open)? {
            if self.src.peek_null() {
                return Err(Bail);
            }
            match field.message {
                Some(m) => reserve = self.message_field(&field.tag, m, reserve, out)?,
                None => {
                    if !self.src.plain_field(field, true, out)? {
                        self.scalar_field(field, true, out)?
                    }
                }
            }
        }
        Ok(())
    }

    fn map(&mut self, field: &FieldPlan, out: &mut Vec<u8>) -> R<()> {
        let (Some(key_kind), Some((value_kind, value_plan))) = (&field.map_key, &field.map_value)
        else {
            return Err(Bail);
        };
        let mut open = self.src.object()?;
        // Hashes of the keys so far, on the stack: a duplicate key is an error in the
        // reference, so a repeated hash (a duplicate, or rarely a collision) leaves the whole
        // message to it, as do maps of more than 64 entries.
        let mut seen = [0u64; 64];
        let mut count = 0;
        while let Some(key) = self.src.next_key(&mut open)? {
            let hash = super::fnv(key);
            if count == seen.len() || seen[..count].contains(&hash) {
                return Err(Bail);
            }
            seen[count] = hash;
            count += 1;
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
                Some(m) => {
                    self.message_field(&MAP_VALUE_TAG, *m, 1, out)?;
                }
                None => {
                    let tag = [0x10 | scalar::wire_type(value_kind)];
                    let lit = self.src.scalar()?;
                    convert_tagged(out, &tag, value_kind, &lit, true)?
                }
            }
            patch_len(out, len_at);
        }
        Ok(())
    }
}

/// A scalar converted the general way ([`scalar::convert`]) with its tag.
#[inline(never)]
fn convert_tagged(
    out: &mut Vec<u8>,
    tag: &[u8],
    kind: &Kind,
    lit: &Lit<'_>,
    always: bool,
) -> R<()> {
    match scalar::convert(kind, lit, false).map_err(|_| Bail)? {
        Converted::Value(s) => scalar::put_tagged(out, tag, kind, s, always),
        Converted::OwnedBytes(b) => scalar::put_tagged(out, tag, kind, Scalar::Bytes(&b), always),
        Converted::Skip => return Err(Bail),
    }
    Ok(())
}

/// The common scalar cases, written without the general conversion: an integer for an
/// integer field (a JSON number or a string of at most 18 digits), a number for a double or
/// float, a boolean, a string. `false` (nothing written) for anything else; out-of-range
/// values bail (the reference reports them). Implicit-presence defaults are not written.
#[inline(always)]
pub(crate) fn put_plain(
    out: &mut Vec<u8>,
    tag: &[u8],
    op: Op,
    lit: &Lit<'_>,
    always: bool,
) -> R<bool> {
    match (op, lit) {
        (Op::Str, Lit::Str(s)) => {
            if always || !s.is_empty() {
                put_tag_bytes(out, tag);
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            Ok(true)
        }
        (Op::Bool, Lit::Bool(b)) => {
            if always || *b {
                put_tag_bytes(out, tag);
                out.push(u8::from(*b));
            }
            Ok(true)
        }
        (Op::Str | Op::Bool | Op::Bytes | Op::Enum | Op::Message, _) => Ok(false),
        _ => {
            // Numbers: the value's bits are zero exactly for the default (-0.0 is written).
            let at = out.len();
            put_tag_bytes(out, tag);
            match plain_number(out, op, lit)? {
                None => {
                    out.truncate(at);
                    Ok(false)
                }
                Some(zero) => {
                    if zero && !always {
                        out.truncate(at);
                    }
                    Ok(true)
                }
            }
        }
    }
}

/// [`put_plain`] for a packed list's element (no tag, defaults written).
#[inline]
fn plain_value(out: &mut Vec<u8>, op: Op, lit: &Lit<'_>) -> R<bool> {
    Ok(match (op, lit) {
        (Op::Bool, Lit::Bool(b)) => {
            out.push(u8::from(*b));
            true
        }
        _ => plain_number(out, op, lit)?.is_some(),
    })
}

/// Writes a plain number as `op` encodes it; `Some(is the value all zero bits)` if written.
#[inline(always)]
fn plain_number(out: &mut Vec<u8>, op: Op, lit: &Lit<'_>) -> R<Option<bool>> {
    let f = match (op, *lit) {
        (Op::Double | Op::Float, Lit::F64(f)) => f,
        (Op::Double | Op::Float, Lit::I64(i)) => i as f64,
        (Op::Double | Op::Float, Lit::U64(u)) => u as f64,
        (Op::Double | Op::Float | Op::Str | Op::Bool | Op::Bytes | Op::Enum | Op::Message, _) => {
            return Ok(None);
        }
        (_, Lit::I64(v)) => return put_int(out, op, v).map(|()| Some(v == 0)),
        (Op::Uint64, Lit::U64(v)) => {
            put_varint(out, v);
            return Ok(Some(false));
        }
        (Op::Fixed64, Lit::U64(v)) => {
            out.extend_from_slice(&v.to_le_bytes());
            return Ok(Some(false));
        }
        (_, Lit::Str(s)) => match plain_integer(s.as_bytes()) {
            Some(v) => return put_int(out, op, v).map(|()| Some(v == 0)),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    if op == Op::Double {
        out.extend_from_slice(&f.to_le_bytes());
        Ok(Some(f.to_bits() == 0))
    } else {
        let f = scalar::to_f32(f).ok_or(Bail)?;
        out.extend_from_slice(&f.to_le_bytes());
        Ok(Some(f.to_bits() == 0))
    }
}

/// An i64 as integer field `op` encodes it; bails when out of the field's range. The ranges
/// are `scalar::int_scalar`'s and the encodings `scalar::put_value`'s, written out in one
/// match: going through `Scalar` costs Order 4 % more instructions per byte (callgrind).
/// `fast_path_scalar_edges_agree` holds the two to the same answers.
#[inline(always)]
pub(crate) fn put_int(out: &mut Vec<u8>, op: Op, v: i64) -> R<()> {
    let in_i32 = i32::try_from(v).is_ok();
    let in_u32 = u32::try_from(v).is_ok();
    match op {
        Op::Int64 => put_varint(out, v as u64),
        Op::Int32 if in_i32 => put_varint(out, v as u64),
        Op::Uint32 if in_u32 => put_varint(out, v as u64),
        Op::Uint64 if v >= 0 => put_varint(out, v as u64),
        Op::Sint32 if in_i32 => put_varint(out, wire::zigzag32(v as i32)),
        Op::Sint64 => put_varint(out, wire::zigzag64(v)),
        Op::Fixed32 if in_u32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
        Op::Fixed64 if v >= 0 => out.extend_from_slice(&(v as u64).to_le_bytes()),
        Op::Sfixed32 if in_i32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        Op::Sfixed64 => out.extend_from_slice(&v.to_le_bytes()),
        _ => return Err(Bail),
    }
    Ok(())
}

/// Integer `v` as integer field `op` (not a double, float, bool or string) with its tag; an
/// implicit-presence zero (in every integer field's range) not at all unless `always`.
/// Bails when out of the field's range.
#[inline(always)]
pub(crate) fn put_int_field(out: &mut Vec<u8>, tag: &[u8], op: Op, v: i64, always: bool) -> R<()> {
    if v == 0 && !always {
        return Ok(());
    }
    put_tag_bytes(out, tag);
    put_int(out, op, v)
}

/// A string or bytes value with its tag: `len` bytes from the start of `from`.
#[inline(always)]
pub(crate) fn put_str_field(out: &mut Vec<u8>, tag: &[u8], from: &[u8], len: usize) {
    put_tag_bytes(out, tag);
    if len < 0x80 {
        out.push(len as u8);
    } else {
        put_varint(out, len as u64);
    }
    put_short(out, from, len);
}

/// The first `len` bytes of `from` appended. Short strings (most keys, names and ids) are
/// copied as one fixed 16 or 32 bytes and a truncation when `from` holds that many: a few
/// moves instead of a call to `memcpy` for a variable length (≈ 20 instructions a string).
#[inline(always)]
pub(crate) fn put_short(out: &mut Vec<u8>, from: &[u8], len: usize) {
    if len <= 16 && from.len() >= 16 {
        out.extend_from_slice(&from[..16]);
        out.truncate(out.len() - 16 + len);
    } else if len <= 32 && from.len() >= 32 {
        out.extend_from_slice(&from[..32]);
        out.truncate(out.len() - 32 + len);
    } else {
        out.extend_from_slice(&from[..len]);
    }
}

/// A length-delimited field's tag and `reserve` bytes (1 or more) left for its length, which
/// `wire::patch_reserved_len` writes once the content follows; where the length goes.
#[inline(always)]
pub(crate) fn open_len(out: &mut Vec<u8>, tag: &[u8], reserve: usize) -> usize {
    put_tag_bytes(out, tag);
    let len_at = out.len();
    match reserve {
        1 => out.push(0),
        2 => out.extend_from_slice(&[0, 0]),
        _ => out.resize(len_at + reserve, 0),
    }
    len_at
}

/// A pre-encoded tag (almost always one byte).
#[inline(always)]
pub(crate) fn put_tag_bytes(out: &mut Vec<u8>, tag: &[u8]) {
    if let [b] = tag {
        out.push(*b);
    } else {
        out.extend_from_slice(tag);
    }
}

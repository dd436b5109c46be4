//! Per-message plans, built once when the schema loads: fields by JSON key and by number,
//! pre-encoded tags, pre-escaped output keys, enum names.

use std::hash::{BuildHasherDefault, Hasher};

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};

use crate::encode::{has_special_json, is_wrapper};
use crate::scalar::{self, Op};
use crate::wire;

/// The plans' tables: keys come from the schema (names, numbers), so a fast unkeyed hash is
/// safe — a request's keys are only looked up, never inserted.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A multiply-rotate hash over 8-byte words (the FxHash scheme): a few instructions for the
/// short names and numbers of a schema, where SipHash spent ~100 per lookup.
#[derive(Default)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits (where hashbrown picks the bucket) depending on the
        // low input bits only — all zero for aligned addresses: rotate the high ones down.
        self.0.rotate_left(26)
    }
}

/// All plans of a pool, indexed by message.
pub(crate) struct Plans {
    pub(crate) msgs: Vec<MsgPlan>,
    /// Plan by the address of the message's full name inside the pool: the pool (kept alive
    /// by the plans' descriptors) never moves its strings, and a hit is confirmed by
    /// descriptor equality, so this saves hashing the name on every call.
    by_name_ptr: HashMap<usize, usize>,
}

pub(crate) struct MsgPlan {
    pub(crate) desc: MessageDescriptor,
    /// A well-known type with its own JSON form: handled by the reference path.
    pub(crate) special: bool,
    /// Every field a singular scalar or string, or a repeated message, numbered 1 to 15, none
    /// in a oneof: rendered by the renderer's short loop (`Renderer::flat`).
    pub(crate) flat: bool,
    /// A flat plan with a repeated message field: its short loop renders other messages.
    pub(crate) flat_lists: bool,
    /// Every field one the fast loops take (`fast`), at most 64 of them, every message below
    /// one they take too, not a well-known type: JSON input goes to `direct::json_fast` first,
    /// MessagePack to `direct::msgpack_fast`.
    pub(crate) fast_shapes: bool,
    /// How the fast loops take each field (by index, as `fields`): kept apart from
    /// `FieldPlan`, whose layout the other loops' timings depend on (one more field in it made
    /// msgpack → pb 6-10 % slower with the same instructions).
    pub(crate) fast: Vec<Fast>,
    /// Fields in declaration order.
    pub(crate) fields: Vec<FieldPlan>,
    /// The fields without presence (repeated, maps, proto3 singular fields outside oneofs)
    /// by increasing number, as indexes into `fields`: what [`Options::emit_defaults`]
    /// prints when the wire data lacks them.
    ///
    /// [`Options::emit_defaults`]: crate::Options::emit_defaults
    pub(crate) implicit: Vec<usize>,
    /// Field index by JSON key (json_name and proto name).
    by_key: HashMap<Box<[u8]>, usize>,
    /// Field index + 1 by field number, for numbers up to `dense.len()`.
    dense: Vec<u16>,
    /// Field index + 1 by one-byte tag (fields 1 to 15), for the wire types the renderer
    /// reads the field in (a packable list's both); 0 for the rest, which take the general
    /// tag reading.
    pub(crate) by_tag: [u16; 128],
    sparse: HashMap<u32, usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Card {
    Single,
    List,
    Map,
}

/// How the fast loops (`direct::json_fast`, `direct::msgpack_fast`) take a field's value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Fast {
    /// Not at all: a message with such a field goes to the general encoder.
    No,
    /// A singular integer, double or float in no oneof.
    Number,
    /// A singular string in no oneof.
    Str,
    /// A singular bool in no oneof.
    Bool,
    /// A singular message field in no oneof, and its message's plan.
    Message(usize),
    /// A repeated message field (not a map), and its message's plan.
    Messages(usize),
}

/// 16 bytes as two little-endian words (how key patterns and the input are compared).
#[inline]
pub(crate) fn words16(b: &[u8; 16]) -> [u64; 2] {
    let mut w = [[0u8; 8]; 2];
    w[0].copy_from_slice(&b[..8]);
    w[1].copy_from_slice(&b[8..]);
    w.map(u64::from_le_bytes)
}

/// A short byte pattern (`"jsonName":`, or a MessagePack string of the name) as two masked
/// little-endian words, so that the next key is recognised with two compares; `len` is 0 for
/// patterns over 16 bytes.
pub(crate) struct KeyWords {
    pub(crate) words: [u64; 2],
    pub(crate) masks: [u64; 2],
    pub(crate) len: usize,
}

impl KeyWords {
    fn new(pattern: &[u8]) -> KeyWords {
        let mut k = KeyWords {
            words: [0; 2],
            masks: [0; 2],
            len: 0,
        };
        if pattern.len() <= 16 {
            let mut w = [0u8; 16];
            let mut m = [0u8; 16];
            w[..pattern.len()].copy_from_slice(pattern);
            m[..pattern.len()].fill(0xff);
            k.words = words16(&w);
            k.masks = words16(&m);
            k.len = pattern.len();
        }
        k
    }

    /// True if `window` (16 bytes of input, zero-padded at its end) starts with the pattern.
    #[inline]
    pub(crate) fn matches(&self, window: [u64; 2]) -> bool {
        self.len != 0
            && ((window[0] ^ self.words[0]) & self.masks[0])
                | ((window[1] ^ self.words[1]) & self.masks[1])
                == 0
    }
}

/// Bytes written often, usually short (a field's key): up to 32 of them are appended as one
/// fixed-size copy and a truncation, which compiles to a few moves instead of a call to
/// `memcpy` for a variable length.
pub(crate) enum Short {
    /// Up to 32 bytes, zero-padded, and how many.
    Inline([u8; 32], usize),
    Heap(Box<[u8]>),
}

impl Short {
    fn new(bytes: Vec<u8>) -> Short {
        if bytes.len() <= 32 {
            let mut buf = [0u8; 32];
            buf[..bytes.len()].copy_from_slice(&bytes);
            Short::Inline(buf, bytes.len())
        } else {
            Short::Heap(bytes.into())
        }
    }

    #[inline(always)]
    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        match self {
            Short::Inline(buf, len) => {
                out.extend_from_slice(buf);
                out.truncate(out.len() - 32 + len);
            }
            Short::Heap(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// A field's pre-encoded tag (one to five bytes), kept inside its plan: writing it reads the
/// plan's own bytes, not a pointer to them elsewhere. Derefs to the bytes.
pub(crate) struct Tag {
    bytes: [u8; 5],
    len: u8,
}

impl Tag {
    /// `tag` as `wire::put_tag` wrote it: at most five bytes, field numbers being below 2^29
    /// (prost-reflect refuses a schema with larger ones).
    fn new(tag: &[u8]) -> Tag {
        let mut bytes = [0u8; 5];
        bytes[..tag.len()].copy_from_slice(tag);
        Tag {
            bytes,
            len: tag.len() as u8,
        }
    }
}

impl std::ops::Deref for Tag {
    type Target = [u8];

    #[inline(always)]
    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

pub(crate) struct FieldPlan {
    pub(crate) number: u32,
    pub(crate) json_name: String,
    pub(crate) kind: Kind,
    /// `kind` as a plain tag (for maps: the entry's kind, unused).
    pub(crate) op: Op,
    pub(crate) card: Card,
    pub(crate) packed: bool,
    pub(crate) presence: bool,
    /// Index of the (non-synthetic) oneof it belongs to.
    pub(crate) oneof: Option<usize>,
    /// A singular scalar field in no oneof: the encoder tries `Source::plain_field` on its
    /// value before anything else.
    pub(crate) plain_first: bool,
    /// The message plan of a message field (for maps: of the entry).
    pub(crate) message: Option<usize>,
    /// For maps: key and value kinds, and the value's message plan.
    pub(crate) map_key: Option<Kind>,
    pub(crate) map_value: Option<(Kind, Option<usize>)>,
    /// The tag as written (LEN for packed lists, strings, messages, map entries).
    pub(crate) tag: Tag,
    /// `,"jsonName":` and `,"proto_name":`, escaped: every key is written with a comma
    /// before it, and an object's first comma becomes its `{` when it ends (`sink::Json`).
    pub(crate) json_key: Short,
    /// `json_key` without its comma, for matching compact JSON input.
    pub(crate) json_key_words: KeyWords,
    pub(crate) proto_key: Short,
    /// The same names as MessagePack strings.
    pub(crate) mp_json_key: Short,
    /// `mp_json_key` for matching MessagePack input.
    pub(crate) mp_json_key_words: KeyWords,
    pub(crate) mp_proto_key: Short,
    /// Values whose `null` is not simply "unset" (Value, NullValue): the reference decides.
    pub(crate) null_is_value: bool,
    /// Enum value names by number (for enum fields and enum map values).
    pub(crate) enum_names: HashMap<i32, String>,
    pub(crate) enum_is_null_value: bool,
}

impl Plans {
    pub(crate) fn build(pool: &DescriptorPool) -> Plans {
        let descs: Vec<MessageDescriptor> = pool.all_messages().collect();
        let by_name: HashMap<String, usize> = descs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.full_name().to_owned(), i))
            .collect();
        let mut msgs: Vec<MsgPlan> = descs.iter().map(|d| MsgPlan::build(d, &by_name)).collect();
        // The fast loops take a message only if they take every message below it too (well-
        // known types never), so that only unusual input, never the schema, makes them give a
        // message up after converting part of it.
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..msgs.len() {
                let below_not_taken = msgs[i].fast.iter().any(|f| match f {
                    Fast::Message(m) | Fast::Messages(m) => {
                        !msgs.get(*m).is_some_and(|p| p.fast_shapes)
                    }
                    _ => false,
                });
                if msgs[i].fast_shapes && below_not_taken {
                    msgs[i].fast_shapes = false;
                    changed = true;
                }
            }
        }
        let by_name_ptr = descs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.full_name().as_ptr() as usize, i))
            .collect();
        Plans { msgs, by_name_ptr }
    }

    /// The plan of `desc`, if it is a message of the pool the plans were built from.
    #[inline]
    pub(crate) fn index(&self, desc: &MessageDescriptor) -> Option<usize> {
        let i = *self
            .by_name_ptr
            .get(&(desc.full_name().as_ptr() as usize))?;
        (self.msgs[i].desc == *desc).then_some(i)
    }
}

/// How the fast loops take `f`'s value.
fn fast(f: &FieldPlan) -> Fast {
    match (f.card, f.message, f.oneof) {
        _ if f.null_is_value => Fast::No,
        (Card::Single, Some(m), None) => Fast::Message(m),
        (Card::List, Some(m), _) if !f.packed => Fast::Messages(m),
        (Card::Single, None, None) => match f.op {
            Op::Str => Fast::Str,
            Op::Bool => Fast::Bool,
            Op::Bytes | Op::Enum | Op::Message => Fast::No,
            _ => Fast::Number,
        },
        _ => Fast::No,
    }
}

fn is_value_kind(kind: &Kind) -> bool {
    match kind {
        Kind::Message(m) => m.full_name() == "google.protobuf.Value",
        Kind::Enum(e) => e.full_name() == "google.protobuf.NullValue",
        _ => false,
    }
}

fn quoted_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 3);
    crate::json::write_str(&mut k, name);
    k.push(b':');
    k
}

fn mp_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 2);
    let _ = rmp::encode::write_str(&mut k, name);
    k
}

fn enum_names(kind: &Kind) -> HashMap<i32, String> {
    let mut names = HashMap::default();
    if let Kind::Enum(e) = kind {
        // The name EnumDescriptor::get_value gives for each number (the first of aliases).
        for v in e.values() {
            if let Some(first) = e.get_value(v.number()) {
                names
                    .entry(v.number())
                    .or_insert_with(|| first.name().to_owned());
            }
        }
    }
    names
}

impl MsgPlan {
    fn build(desc: &MessageDescriptor, by_name: &HashMap<String, usize>) -> MsgPlan {
        let special = is_wrapper(desc) || has_special_json(desc.full_name());
        let oneofs: Vec<String> = desc
            .oneofs()
            .filter(|o| !o.is_synthetic())
            .map(|o| o.full_name().to_owned())
            .collect();
        let plan_of = |m: &MessageDescriptor| by_name.get(m.full_name()).copied();
        let mut fields = Vec::new();
        for f in desc.fields() {
            fields.push(field_plan(&f, &oneofs, &plan_of));
        }
        let mut by_key = HashMap::default();
        for (i, f) in desc.fields().enumerate() {
            by_key.insert(f.name().as_bytes().into(), i);
        }
        // json_name wins over a proto name that happens to equal another field's json_name,
        // as the reference looks json_name up first.
        for (i, f) in desc.fields().enumerate() {
            by_key.insert(f.json_name().as_bytes().into(), i);
        }
        let max = fields.iter().map(|f| f.number).max().unwrap_or(0);
        let (dense, sparse) = if max <= 1024 {
            let mut d = vec![0u16; max as usize + 1];
            for (i, f) in fields.iter().enumerate() {
                d[f.number as usize] = i as u16 + 1;
            }
            (d, HashMap::default())
        } else {
            (
                Vec::new(),
                fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.number, i))
                    .collect(),
            )
        };
        // At most 15 fields (numbers 1 to 15), all in the tag table.
        let flat = !special
            && fields.iter().all(|f| {
                let scalar = f.card == Card::Single && f.op != Op::Message;
                let message_list = f.card == Card::List && f.message.is_some();
                (scalar || message_list) && f.oneof.is_none() && (1..16).contains(&f.number)
            });
        let flat_lists = flat && fields.iter().any(|f| f.message.is_some());
        let fast: Vec<Fast> = fields.iter().map(fast).collect();
        let fast_shapes = !special && fields.len() <= 64 && !fast.contains(&Fast::No);
        let mut by_tag = [0u16; 128];
        for (i, f) in fields.iter().enumerate() {
            if !(1..16).contains(&f.number) || i >= usize::from(u16::MAX) {
                continue;
            }
            // Messages, strings, bytes and maps come length-delimited; a scalar in its own wire
            // type, and a packable list's elements in that one or packed (length-delimited).
            let scalar = f.message.is_none() && f.op.is_packable() && f.card != Card::Map;
            let own = scalar.then(|| f.op.wire_type());
            let packed = (!scalar || f.card == Card::List).then_some(wire::LEN);
            for wt in [own, packed].into_iter().flatten() {
                by_tag[((f.number as usize) << 3) | usize::from(wt)] = i as u16 + 1;
            }
        }
        let mut implicit: Vec<usize> = (0..fields.len()).filter(|&i| !fields[i].presence).collect();
        implicit.sort_by_key(|&i| fields[i].number);
        MsgPlan {
            desc: desc.clone(),
            special,
            flat,
            flat_lists,
            fast_shapes,
            fast,
            fields,
            implicit,
            by_key,
            dense,
            sparse,
            by_tag,
        }
    }

    /// The field a JSON key names; `hint` (the field after the previous one) is tried first.
    #[inline]
    pub(crate) fn by_key(&self, key: &[u8], hint: usize) -> Option<usize> {
        if let Some(f) = self.fields.get(hint)
            && f.json_name.as_bytes() == key
        {
            return Some(hint);
        }
        self.by_key.get(key).copied()
    }

    /// `hint` (the field after the previous one) or the field after it, if that field's key
    /// pattern (`pattern`: the JSON or the MessagePack one) starts `window`.
    #[inline(always)]
    pub(crate) fn expected_key(
        &self,
        hint: usize,
        window: [u64; 2],
        pattern: impl Fn(&FieldPlan) -> &KeyWords,
    ) -> Option<usize> {
        let starts = |f: usize| {
            self.fields
                .get(f)
                .is_some_and(|f| pattern(f).matches(window))
        };
        if starts(hint) {
            Some(hint)
        } else if starts(hint + 1) {
            Some(hint + 1)
        } else {
            None
        }
    }

    #[inline]
    pub(crate) fn by_number(&self, number: u32) -> Option<usize> {
        if let Some(&i) = self.dense.get(number as usize) {
            return if i == 0 { None } else { Some(i as usize - 1) };
        }
        self.sparse.get(&number).copied()
    }
}

fn field_plan(
    f: &FieldDescriptor,
    oneofs: &[String],
    plan_of: &dyn Fn(&MessageDescriptor) -> Option<usize>,
) -> FieldPlan {
    let kind = f.kind();
    let card = if f.is_map() {
        Card::Map
    } else if f.is_list() {
        Card::List
    } else {
        Card::Single
    };
    let packed = card == Card::List && f.is_packed();
    let (message, map_key, map_value) = match (&kind, card) {
        (Kind::Message(entry), Card::Map) => {
            let v = entry.map_entry_value_field().kind();
            let vp = match &v {
                Kind::Message(m) => plan_of(m),
                _ => None,
            };
            (
                plan_of(entry),
                Some(entry.map_entry_key_field().kind()),
                Some((v, vp)),
            )
        }
        (Kind::Message(m), _) => (plan_of(m), None, None),
        _ => (None, None, None),
    };
    let wt = if packed || card == Card::Map {
        wire::LEN
    } else {
        scalar::wire_type(&kind)
    };
    let mut tag = Vec::new();
    wire::put_tag(&mut tag, f.number(), wt);
    let tag = Tag::new(&tag);
    let value_kind = map_value.as_ref().map_or(&kind, |(k, _)| k);
    let oneof = f
        .containing_oneof()
        .filter(|o| !o.is_synthetic())
        .and_then(|o| oneofs.iter().position(|n| n == o.full_name()));
    let null_is_value = is_value_kind(value_kind);
    let json_key = quoted_key(f.json_name());
    let mp_json_key = mp_key(f.json_name());
    let enum_is_null_value =
        matches!(value_kind, Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue");
    FieldPlan {
        number: f.number(),
        json_name: f.json_name().to_owned(),
        card,
        packed,
        presence: f.supports_presence(),
        plain_first: card == Card::Single && message.is_none() && oneof.is_none(),
        oneof,
        message,
        map_key,
        tag,
        json_key_words: KeyWords::new(&json_key),
        json_key: Short::new([&b","[..], &json_key].concat()),
        proto_key: Short::new([&b","[..], &quoted_key(f.name())].concat()),
        mp_json_key_words: KeyWords::new(&mp_json_key),
        mp_json_key: Short::new(mp_json_key),
        mp_proto_key: Short::new(mp_key(f.name())),
        null_is_value,
        enum_names: enum_names(value_kind),
        enum_is_null_value,
        map_value,
        op: Op::of(&kind),
        kind,
    }
}

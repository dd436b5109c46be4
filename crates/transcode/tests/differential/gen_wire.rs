//! The generator: random protobuf wire bytes for a message descriptor, from a seed, with
//! adversarial layouts (fields out of order, repeated fields split into interleaved runs,
//! singular fields twice, two members of a oneof, duplicate map keys, unknown fields of every
//! wire type incl. groups, known numbers with the wrong wire type, non-canonical varints,
//! corrupt bytes); each case records which kinds it produced.

use prost_reflect::{FieldDescriptor, Kind};
use transcode::{DescriptorPool, MessageDescriptor};

use crate::common::Rng;
use crate::values::{
    BAD_TAILS, F32_BITS, F64_BITS, I32_EDGES, I64_EDGES, MASK_BAD_SEGMENTS, MASK_SEGMENTS, STRINGS,
    U32_EDGES, U64_EDGES,
};
use crate::wire::{
    EGROUP, I32, I64, LEN, SGROUP, VARINT, is_packable, put_varint, wire_type, zigzag32, zigzag64,
};

/// Adversarial kinds; each case enables some of them and records the ones it produced.
#[derive(Clone, Copy)]
pub enum Adv {
    Shuffled,
    Interleaved,
    ScalarTwice,
    MessageTwice,
    OneofTwo,
    DupMapKey,
    Unknown,
    WrongWireType,
    Corrupt,
    NonCanonical,
    EmptyPacked,
    WktBad,
    Deep,
    OddMapEntry,
}

pub const ADV_COUNT: usize = 14;

pub const ADV_NAMES: [&str; ADV_COUNT] = [
    "a fields out of order",
    "b repeated runs interleaved",
    "c singular scalar twice",
    "d singular message twice",
    "e two members of a oneof",
    "f duplicate map keys",
    "g unknown fields",
    "h wrong wire type",
    "i corrupt bytes",
    "x non-canonical varints",
    "x empty packed runs",
    "x WKT out of range / generic",
    "x nesting around max_depth",
    "x odd map entries",
];

/// How often each kind is enabled for a case (it is then applied at some of the places where
/// it can be).
pub const ADV_ENABLE: [f64; ADV_COUNT] = [
    0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.2, 0.1, 0.15, 0.1, 0.08, 0.02, 0.2,
];

/// One tag-value record of a message under construction.
pub struct Rec {
    num: u32,
    /// A repeated or map field: several records are one list.
    multi: bool,
    bytes: Vec<u8>,
}

/// Schema-wide things the generator needs.
pub struct Ctx {
    /// Messages an `Any` may name.
    any_types: Vec<MessageDescriptor>,
    /// Cheap ones, for `Any`s nested deep.
    any_leaf_types: Vec<MessageDescriptor>,
}

impl Ctx {
    pub fn new(pool: &DescriptorPool) -> Ctx {
        let get = |names: &[&str]| -> Vec<MessageDescriptor> {
            names
                .iter()
                .filter_map(|n| pool.get_message_by_name(n))
                .collect()
        };
        Ctx {
            any_types: get(&[
                "protogate.test.v1.Nested",
                "protogate.test.v1.Nested",
                "protogate.test.v1.Node",
                "protogate.test.v1.KitchenSink",
                "google.protobuf.Timestamp",
                "google.protobuf.Duration",
                "google.protobuf.FieldMask",
                "google.protobuf.Struct",
                "google.protobuf.Value",
                "google.protobuf.ListValue",
                "google.protobuf.Empty",
                "google.protobuf.Any",
                "google.protobuf.Int32Value",
                "google.protobuf.Int64Value",
                "google.protobuf.UInt32Value",
                "google.protobuf.UInt64Value",
                "google.protobuf.FloatValue",
                "google.protobuf.DoubleValue",
                "google.protobuf.BoolValue",
                "google.protobuf.StringValue",
                "google.protobuf.BytesValue",
                "google.rpc.Status",
                "bench.v1.Order",
            ]),
            any_leaf_types: get(&[
                "protogate.test.v1.Nested",
                "google.protobuf.Timestamp",
                "google.protobuf.Duration",
                "google.protobuf.Empty",
                "google.protobuf.Int64Value",
                "google.protobuf.StringValue",
                "bench.v1.Item",
            ]),
        }
    }
}

/// Random wire bytes for a message descriptor.
pub struct Gen<'c> {
    rng: Rng,
    ctx: &'c Ctx,
    enabled: [bool; ADV_COUNT],
    pub hit: [bool; ADV_COUNT],
    /// Field inclusion probability at the root.
    density: f64,
    /// Depth a self-recursive chain (Node.child) reaches.
    chain_target: usize,
    /// Links of self-recursive chains left for the whole case.
    chain_budget: usize,
}

/// Messages are nested at most this deep except along self-recursive chains.
pub const MAX_NEST: usize = 6;

impl<'c> Gen<'c> {
    pub fn new(seed: u64, ctx: &'c Ctx) -> Gen<'c> {
        let mut rng = Rng::new(seed);
        let mut enabled = [false; ADV_COUNT];
        for (e, p) in enabled.iter_mut().zip(ADV_ENABLE) {
            *e = rng.chance(p);
        }
        let density = *rng.pick(&[0.05, 0.1, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7]);
        let chain_target = if enabled[Adv::Deep as usize] {
            rng.irange(95, 110) as usize
        } else {
            match rng.below(100) {
                0..50 => rng.irange(0, 3) as usize,
                50..85 => rng.irange(4, 15) as usize,
                _ => rng.irange(16, 32) as usize,
            }
        };
        Gen {
            rng,
            ctx,
            enabled,
            hit: [false; ADV_COUNT],
            density,
            chain_target,
            chain_budget: chain_target + 12,
        }
    }

    /// Whether adversarial kind `a` is enabled for this case and chosen (with `p`) here.
    fn on(&mut self, a: Adv, p: f64) -> bool {
        self.enabled[a as usize] && self.rng.chance(p)
    }

    fn hit(&mut self, a: Adv) {
        self.hit[a as usize] = true;
    }

    /// A varint, occasionally with redundant continuation bytes (still at most 10 bytes).
    fn varint(&mut self, out: &mut Vec<u8>, v: u64) {
        let start = out.len();
        put_varint(out, v);
        let used = out.len() - start;
        if used < 10 && self.on(Adv::NonCanonical, 0.15) {
            self.hit(Adv::NonCanonical);
            let extra = self.rng.irange(1, (10 - used) as i64) as usize;
            *out.last_mut().unwrap() |= 0x80;
            for _ in 1..extra {
                out.push(0x80);
            }
            out.push(0x00);
        }
    }

    fn tag(&mut self, out: &mut Vec<u8>, num: u32, wt: u8) {
        self.varint(out, ((num as u64) << 3) | wt as u64);
    }

    fn len_field(&mut self, out: &mut Vec<u8>, num: u32, payload: &[u8]) {
        self.tag(out, num, LEN);
        self.varint(out, payload.len() as u64);
        out.extend_from_slice(payload);
    }

    /// A whole input: one message, sometimes corrupted afterwards.
    pub fn root(&mut self, desc: &MessageDescriptor) -> Vec<u8> {
        let mut b = self.message(desc, 1);
        if self.on(Adv::Corrupt, 0.85) {
            self.corrupt(&mut b);
        }
        b
    }

    fn message(&mut self, desc: &MessageDescriptor, depth: usize) -> Vec<u8> {
        let mut recs = Vec::new();
        let special = matches!(
            desc.full_name(),
            "google.protobuf.Timestamp"
                | "google.protobuf.Duration"
                | "google.protobuf.FieldMask"
                | "google.protobuf.Any"
                | "google.protobuf.Value"
                | "google.protobuf.Struct"
                | "google.protobuf.ListValue"
        );
        if special && !self.on(Adv::WktBad, 0.3) {
            self.wkt_body(desc, depth, &mut recs);
        } else {
            if special {
                self.hit(Adv::WktBad);
            }
            self.fields_body(desc, depth, &mut recs);
        }
        if self.on(Adv::Unknown, 0.35) {
            self.hit(Adv::Unknown);
            for _ in 0..self.rng.irange(1, 3) {
                let rec = self.unknown_rec(desc);
                recs.push(rec);
            }
        }
        if desc.fields().len() > 0 && self.on(Adv::WrongWireType, 0.3) {
            self.hit(Adv::WrongWireType);
            let rec = self.wrong_wire_type_rec(desc);
            recs.push(rec);
        }
        self.layout(recs)
    }

    fn field_prob(&self, desc: &MessageDescriptor, depth: usize) -> f64 {
        let p = self.density * 0.55f64.powi(depth as i32 - 1);
        if desc.fields().len() <= 10 {
            p.max(0.45)
        } else {
            p
        }
    }

    fn fields_body(&mut self, desc: &MessageDescriptor, depth: usize, recs: &mut Vec<Rec>) {
        let p = self.field_prob(desc, depth);
        for field in desc.fields() {
            if field.containing_oneof().is_some_and(|o| !o.is_synthetic()) {
                continue;
            }
            let kind = field.kind();
            let recursive = matches!(&kind, Kind::Message(m) if m.full_name() == desc.full_name());
            let include = if recursive && !field.is_list() && !field.is_map() {
                let go = depth < self.chain_target && self.chain_budget > 0;
                if go {
                    self.chain_budget -= 1;
                    if depth + 1 >= 95 {
                        self.hit(Adv::Deep);
                    }
                }
                go
            } else if matches!(kind, Kind::Message(_)) {
                depth < MAX_NEST && self.rng.chance(if recursive { p.min(0.2) } else { p })
            } else {
                self.rng.chance(p)
            };
            if include {
                self.field(&field, depth, recs);
            }
        }
        for oneof in desc.oneofs() {
            if oneof.is_synthetic() || !self.rng.chance(p.max(0.3)) {
                continue;
            }
            let members: Vec<FieldDescriptor> = oneof
                .fields()
                .filter(|f| depth < MAX_NEST || !matches!(f.kind(), Kind::Message(_)))
                .collect();
            if members.is_empty() {
                continue;
            }
            if members.len() > 1 && self.on(Adv::OneofTwo, 0.6) {
                self.hit(Adv::OneofTwo);
                let first = self.rng.index(members.len());
                let mut second = self.rng.index(members.len() - 1);
                if second >= first {
                    second += 1;
                }
                self.singular(&members[first], depth, recs, false);
                self.singular(&members[second], depth, recs, false);
                if self.rng.chance(0.3) {
                    let again = self.rng.index(members.len());
                    self.singular(&members[again], depth, recs, false);
                }
            } else {
                let m = self.rng.index(members.len());
                self.singular(&members[m], depth, recs, true);
            }
        }
    }

    fn list_len(&mut self, depth: usize) -> usize {
        if depth <= 2 && self.rng.chance(0.1) {
            self.rng.irange(5, 20) as usize
        } else if depth >= 3 {
            self.rng.index(3)
        } else {
            self.rng.index(5)
        }
    }

    fn field(&mut self, field: &FieldDescriptor, depth: usize, recs: &mut Vec<Rec>) {
        if field.is_map() {
            let n = self.list_len(depth);
            self.map_entries(field, n, depth, recs);
        } else if field.is_list() {
            let kind = field.kind();
            if is_packable(&kind) {
                self.packable_list(field, &kind, depth, recs);
            } else {
                let n = self.list_len(depth);
                for _ in 0..n {
                    let mut b = Vec::new();
                    match &kind {
                        Kind::Message(m) => {
                            let body = self.message(m, depth + 1);
                            self.len_field(&mut b, field.number(), &body);
                        }
                        k => {
                            let zero = self.rng.chance(0.15);
                            self.tag(&mut b, field.number(), LEN);
                            self.scalar(k, zero, &mut b);
                        }
                    }
                    recs.push(Rec {
                        num: field.number(),
                        multi: true,
                        bytes: b,
                    });
                }
            }
        } else {
            self.singular(field, depth, recs, true);
        }
    }

    /// A singular field (or oneof member); with `may_repeat` sometimes given two or three times.
    fn singular(
        &mut self,
        field: &FieldDescriptor,
        depth: usize,
        recs: &mut Vec<Rec>,
        may_repeat: bool,
    ) {
        let kind = field.kind();
        let is_msg = matches!(kind, Kind::Message(_));
        let adv = if is_msg {
            Adv::MessageTwice
        } else {
            Adv::ScalarTwice
        };
        let times = if may_repeat && self.on(adv, 0.3) {
            self.hit(adv);
            self.rng.irange(2, 3)
        } else {
            1
        };
        for _ in 0..times {
            let mut b = Vec::new();
            match &kind {
                Kind::Message(m) => {
                    let body = self.message(m, depth + 1);
                    self.len_field(&mut b, field.number(), &body);
                }
                k => {
                    // Implicit-presence defaults explicitly on the wire, optional and oneof
                    // members set to zero.
                    let zero = self.rng.chance(if field.supports_presence() {
                        0.25
                    } else {
                        0.12
                    });
                    self.tag(&mut b, field.number(), wire_type(k));
                    self.scalar(k, zero, &mut b);
                }
            }
            recs.push(Rec {
                num: field.number(),
                multi: false,
                bytes: b,
            });
        }
    }

    /// A repeated numeric field: packed, unpacked, or mixed runs (the schema's packedness is
    /// only a preference on input).
    fn packable_list(
        &mut self,
        field: &FieldDescriptor,
        kind: &Kind,
        depth: usize,
        recs: &mut Vec<Rec>,
    ) {
        let num = field.number();
        let n = self.list_len(depth);
        let vals: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let zero = self.rng.chance(0.1);
                let mut b = Vec::new();
                self.scalar(kind, zero, &mut b);
                b
            })
            .collect();
        let r = self.rng.below(10);
        let layout = if field.is_packed() {
            match r {
                0..6 => 0,
                6..8 => 1,
                _ => 2,
            }
        } else {
            match r {
                0..2 => 0,
                2..8 => 1,
                _ => 2,
            }
        };
        let wt = wire_type(kind);
        let mut runs: Vec<(bool, Vec<Vec<u8>>)> = Vec::new(); // (packed, values)
        match layout {
            _ if vals.is_empty() => {} // an empty list is normally absent
            0 => runs.push((true, vals)),
            1 => runs.push((false, vals)),
            _ => {
                let mut it = vals.into_iter().peekable();
                while it.peek().is_some() {
                    let len = self.rng.irange(1, 3) as usize;
                    let run: Vec<Vec<u8>> = it.by_ref().take(len).collect();
                    let packed = self.rng.chance(0.5);
                    runs.push((packed, run));
                }
            }
        }
        if self.on(Adv::EmptyPacked, 0.5) {
            self.hit(Adv::EmptyPacked);
            let at = self.rng.index(runs.len() + 1);
            runs.insert(at, (true, Vec::new()));
        }
        for (packed, run) in runs {
            if packed {
                let payload: Vec<u8> = run.concat();
                let mut b = Vec::new();
                self.len_field(&mut b, num, &payload);
                recs.push(Rec {
                    num,
                    multi: true,
                    bytes: b,
                });
            } else {
                for v in run {
                    let mut b = Vec::new();
                    self.tag(&mut b, num, wt);
                    b.extend_from_slice(&v);
                    recs.push(Rec {
                        num,
                        multi: true,
                        bytes: b,
                    });
                }
            }
        }
    }

    /// `n` entries of a map field, with duplicate keys and odd entry layouts.
    fn map_entries(
        &mut self,
        field: &FieldDescriptor,
        n: usize,
        depth: usize,
        recs: &mut Vec<Rec>,
    ) {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("map fields are messages")
        };
        let key_kind = entry.map_entry_key_field().kind();
        let value_kind = entry.map_entry_value_field().kind();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for _ in 0..n {
            let key = if !keys.is_empty() && self.on(Adv::DupMapKey, 0.35) {
                keys[self.rng.index(keys.len())].clone()
            } else {
                let mut k = Vec::new();
                self.tag(&mut k, 1, wire_type(&key_kind));
                let zero = self.rng.chance(0.08);
                self.scalar(&key_kind, zero, &mut k);
                k
            };
            if keys.contains(&key) {
                self.hit(Adv::DupMapKey);
            }
            keys.push(key.clone());
            let mut value = Vec::new();
            match &value_kind {
                Kind::Message(m) => {
                    let body = self.message(m, depth + 1);
                    self.len_field(&mut value, 2, &body);
                }
                k => {
                    let zero = self.rng.chance(0.1);
                    self.tag(&mut value, 2, wire_type(k));
                    self.scalar(k, zero, &mut value);
                }
            }
            let mut body = Vec::new();
            if self.on(Adv::OddMapEntry, 0.3) {
                self.hit(Adv::OddMapEntry);
                match self.rng.below(7) {
                    0 => {
                        body.extend_from_slice(&value);
                        body.extend_from_slice(&key);
                    }
                    1 => body.extend_from_slice(&value), // no key: the default key
                    2 => body.extend_from_slice(&key),   // no value: the default value
                    3 => {}                              // neither
                    4 => {
                        // Value twice: last wins, or messages merge.
                        body.extend_from_slice(&key);
                        body.extend_from_slice(&value);
                        let mut again = Vec::new();
                        match &value_kind {
                            Kind::Message(m) => {
                                let b2 = self.message(m, depth + 1);
                                self.len_field(&mut again, 2, &b2);
                            }
                            k => {
                                self.tag(&mut again, 2, wire_type(k));
                                self.scalar(k, false, &mut again);
                            }
                        }
                        body.extend_from_slice(&again);
                    }
                    5 => {
                        // Key twice, the first one lost.
                        let mut k = Vec::new();
                        self.tag(&mut k, 1, wire_type(&key_kind));
                        self.scalar(&key_kind, false, &mut k);
                        body.extend_from_slice(&k);
                        body.extend_from_slice(&key);
                        body.extend_from_slice(&value);
                    }
                    _ => {
                        // Key with the wrong wire type (kept as unknown: the default key).
                        let wt = if wire_type(&key_kind) == LEN {
                            VARINT
                        } else {
                            LEN
                        };
                        self.tag(&mut body, 1, wt);
                        if wt == LEN {
                            self.varint(&mut body, 1);
                            body.push(b'k');
                        } else {
                            self.varint(&mut body, 7);
                        }
                        body.extend_from_slice(&value);
                    }
                }
            } else {
                body.extend_from_slice(&key);
                body.extend_from_slice(&value);
            }
            if self.on(Adv::Unknown, 0.15) {
                self.hit(Adv::Unknown);
                let rec = self.unknown_rec(&entry);
                body.extend_from_slice(&rec.bytes);
            }
            let mut b = Vec::new();
            self.len_field(&mut b, field.number(), &body);
            recs.push(Rec {
                num: field.number(),
                multi: true,
                bytes: b,
            });
        }
    }

    fn i32_val(&mut self) -> i32 {
        match self.rng.below(4) {
            0 | 1 => *self.rng.pick(I32_EDGES),
            2 => self.rng.irange(-1000, 1000) as i32,
            _ => self.rng.u64() as i32,
        }
    }

    fn i64_val(&mut self) -> i64 {
        match self.rng.below(4) {
            0 | 1 => *self.rng.pick(I64_EDGES),
            2 => self.rng.irange(-100_000, 100_000),
            _ => self.rng.u64() as i64,
        }
    }

    fn u32_val(&mut self) -> u32 {
        match self.rng.below(4) {
            0 | 1 => *self.rng.pick(U32_EDGES),
            2 => self.rng.below(1000) as u32,
            _ => self.rng.u64() as u32,
        }
    }

    fn u64_val(&mut self) -> u64 {
        match self.rng.below(4) {
            0 | 1 => *self.rng.pick(U64_EDGES),
            2 => self.rng.below(100_000),
            _ => self.rng.u64(),
        }
    }

    fn f32_bits(&mut self) -> u32 {
        if self.rng.chance(0.35) {
            self.rng.u64() as u32
        } else if self.rng.chance(0.2) {
            (self.rng.irange(-100_000, 100_000) as f32 / 100.0).to_bits()
        } else {
            *self.rng.pick(F32_BITS)
        }
    }

    fn f64_bits(&mut self) -> u64 {
        if self.rng.chance(0.35) {
            self.rng.u64()
        } else if self.rng.chance(0.2) {
            (self.rng.irange(-10_000_000, 10_000_000) as f64 / 1000.0).to_bits()
        } else {
            *self.rng.pick(F64_BITS)
        }
    }

    /// A double a google.protobuf.Value can hold in JSON.
    fn finite_f64(&mut self) -> f64 {
        loop {
            let f = f64::from_bits(self.f64_bits());
            if f.is_finite() {
                return f;
            }
        }
    }

    fn string_val(&mut self) -> String {
        match self.rng.below(20) {
            0..12 => (*self.rng.pick(STRINGS)).to_owned(),
            12..17 => {
                let n = self.rng.irange(2, 4);
                (0..n).map(|_| *self.rng.pick(STRINGS)).collect()
            }
            17 => {
                let n = self.rng.irange(100, 2000) as usize;
                let unit = *self.rng.pick(&["x", "\u{e9}", "\u{1F600}", "ab\"c\\"]);
                unit.repeat(n / unit.len().max(1))
            }
            18 => {
                // Plain ASCII across one to three of the renderer's 32-byte chunks, then a
                // byte to escape or a character past ASCII at any place after it.
                let plain = "p".repeat(self.rng.irange(28, 100) as usize);
                let odd = *self
                    .rng
                    .pick(&["\"", "\\", "\n", "\u{1}", "\u{e9}", "\u{1F600}", "x"]);
                format!("{plain}{odd}{}", "q".repeat(self.rng.below(40) as usize))
            }
            _ => {
                let n = self.rng.irange(1, 12);
                (0..n)
                    .filter_map(|_| {
                        let c = match self.rng.below(3) {
                            0 => self.rng.below(0x80),
                            1 => self.rng.below(0x800),
                            _ => self.rng.below(0x11_0000),
                        };
                        char::from_u32(c as u32)
                    })
                    .collect()
            }
        }
    }

    fn bytes_val(&mut self) -> Vec<u8> {
        match self.rng.below(7) {
            0 => Vec::new(),
            1 => (0..=255u8).collect(),
            2 => {
                let n = self.rng.irange(1, 48);
                (0..n).map(|_| self.rng.u64() as u8).collect()
            }
            3 => vec![0xff; self.rng.irange(1, 5) as usize],
            4 => b"hello".to_vec(),
            5 => vec![0xfb, 0xff, 0xbf], // base64 with + and /
            _ => {
                let n = self.rng.irange(1, 4);
                (0..n).map(|_| self.rng.u64() as u8).collect()
            }
        }
    }

    /// Sometimes garbage in the upper bits of a 32-bit varint (readers truncate).
    fn junk_high(&mut self, raw: u64) -> u64 {
        if self.on(Adv::NonCanonical, 0.1) {
            self.hit(Adv::NonCanonical);
            (raw & 0xffff_ffff) | (self.rng.u64() << 32)
        } else {
            raw
        }
    }

    /// The payload (no tag) of one value of a scalar kind.
    fn scalar(&mut self, kind: &Kind, zero: bool, out: &mut Vec<u8>) {
        match kind {
            Kind::Int32 => {
                let v = if zero { 0 } else { self.i32_val() };
                let raw = self.junk_high(v as i64 as u64);
                self.varint(out, raw);
            }
            Kind::Sint32 => {
                let v = if zero { 0 } else { self.i32_val() };
                let raw = self.junk_high(zigzag32(v));
                self.varint(out, raw);
            }
            Kind::Uint32 => {
                let v = if zero { 0 } else { self.u32_val() };
                let raw = self.junk_high(v as u64);
                self.varint(out, raw);
            }
            Kind::Int64 => {
                let v = if zero { 0 } else { self.i64_val() };
                self.varint(out, v as u64);
            }
            Kind::Sint64 => {
                let v = if zero { 0 } else { self.i64_val() };
                self.varint(out, zigzag64(v));
            }
            Kind::Uint64 => {
                let v = if zero { 0 } else { self.u64_val() };
                self.varint(out, v);
            }
            Kind::Fixed32 => {
                let v = if zero { 0 } else { self.u32_val() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Sfixed32 => {
                let v = if zero { 0 } else { self.i32_val() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Fixed64 => {
                let v = if zero { 0 } else { self.u64_val() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Sfixed64 => {
                let v = if zero { 0 } else { self.i64_val() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Float => {
                let v = if zero { 0 } else { self.f32_bits() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Double => {
                let v = if zero { 0 } else { self.f64_bits() };
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Bool => {
                let v = if zero {
                    0
                } else if self.on(Adv::NonCanonical, 0.15) {
                    self.hit(Adv::NonCanonical);
                    *self.rng.pick(&[2, 255, 1 << 32, u64::MAX])
                } else {
                    1
                };
                self.varint(out, v);
            }
            Kind::Enum(e) => {
                let v: i32 = if zero {
                    0
                } else if self.rng.chance(0.7) {
                    let values: Vec<i32> = e.values().map(|v| v.number()).collect();
                    *self.rng.pick(&values)
                } else {
                    *self.rng.pick(&[4, 7, 100, -1, -4, i32::MAX, i32::MIN])
                };
                let raw = self.junk_high(v as i64 as u64);
                self.varint(out, raw);
            }
            Kind::String => {
                let mut s = if zero {
                    Vec::new()
                } else {
                    self.string_val().into_bytes()
                };
                if self.on(Adv::Corrupt, 0.04) {
                    self.hit(Adv::Corrupt);
                    let bad: &[u8] = self.rng.pick::<&[u8]>(&[
                        &[0xff],
                        &[0xc3],
                        &[0xed, 0xa0, 0x80],
                        &[0xc0, 0x80],
                    ]);
                    let at = self.rng.index(s.len() + 1);
                    s.splice(at..at, bad.iter().copied());
                    // Invalid wherever it lands (a lone lead byte, 0xff, a surrogate, overlong).
                }
                self.varint(out, s.len() as u64);
                out.extend_from_slice(&s);
            }
            Kind::Bytes => {
                let b = if zero { Vec::new() } else { self.bytes_val() };
                self.varint(out, b.len() as u64);
                out.extend_from_slice(&b);
            }
            Kind::Message(_) => unreachable!("messages are not scalars"),
        }
    }

    /// A field number `desc` does not declare, with a value of a random wire type.
    fn unknown_rec(&mut self, desc: &MessageDescriptor) -> Rec {
        let num = loop {
            let n = match self.rng.below(5) {
                0 => self.rng.irange(1, 200),
                1 => self.rng.irange(900, 999),
                2 => 536_870_911,
                3 => self.rng.irange(19_000, 19_999),
                _ => self.rng.irange(1000, 100_000),
            } as u32;
            if desc.get_field(n).is_none() {
                break n;
            }
        };
        let mut b = Vec::new();
        self.unknown_value(num, 2, &mut b);
        Rec {
            num,
            multi: false,
            bytes: b,
        }
    }

    fn unknown_value(&mut self, num: u32, nest: usize, out: &mut Vec<u8>) {
        let wts: &[u8] = if nest > 0 {
            &[VARINT, I64, LEN, I32, SGROUP, SGROUP]
        } else {
            &[VARINT, I64, LEN, I32]
        };
        let wt = *self.rng.pick(wts);
        self.tag(out, num, wt);
        match wt {
            VARINT => {
                let v = self.u64_val();
                self.varint(out, v);
            }
            I64 => out.extend_from_slice(&self.rng.u64().to_le_bytes()),
            I32 => out.extend_from_slice(&(self.rng.u64() as u32).to_le_bytes()),
            LEN => {
                let b = self.bytes_val();
                self.varint(out, b.len() as u64);
                out.extend_from_slice(&b);
            }
            _ => {
                for _ in 0..self.rng.below(4) {
                    let inner = self.rng.irange(1, 60) as u32;
                    self.unknown_value(inner, nest - 1, out);
                }
                self.tag(out, num, EGROUP);
            }
        }
    }

    /// A known field number with a wire type that does not fit its kind (a group included).
    fn wrong_wire_type_rec(&mut self, desc: &MessageDescriptor) -> Rec {
        let fields: Vec<FieldDescriptor> = desc.fields().collect();
        let field = &fields[self.rng.index(fields.len())];
        let kind = field.kind();
        let fits: Vec<u8> = if field.is_map() || !is_packable(&kind) {
            vec![LEN]
        } else if field.is_list() {
            vec![LEN, wire_type(&kind)]
        } else {
            vec![wire_type(&kind)]
        };
        let choices: Vec<u8> = [VARINT, I64, LEN, I32, SGROUP]
            .into_iter()
            .filter(|w| !fits.contains(w))
            .collect();
        let wt = *self.rng.pick(&choices);
        let num = field.number();
        let mut b = Vec::new();
        self.tag(&mut b, num, wt);
        match wt {
            VARINT => {
                let v = self.u64_val();
                self.varint(&mut b, v);
            }
            I64 => b.extend_from_slice(&self.rng.u64().to_le_bytes()),
            I32 => b.extend_from_slice(&(self.rng.u64() as u32).to_le_bytes()),
            LEN => {
                let payload = self.bytes_val();
                self.varint(&mut b, payload.len() as u64);
                b.extend_from_slice(&payload);
            }
            _ => {
                for _ in 0..self.rng.below(3) {
                    let inner = self.rng.irange(1, 30) as u32;
                    self.unknown_value(inner, 1, &mut b);
                }
                self.tag(&mut b, num, EGROUP);
            }
        }
        Rec {
            num,
            multi: false,
            bytes: b,
        }
    }

    /// Orders the records: by number, shuffled, or by number with repeated runs dispersed.
    fn layout(&mut self, mut recs: Vec<Rec>) -> Vec<u8> {
        let shuffled = self.on(Adv::Shuffled, 0.5);
        if shuffled {
            for i in (1..recs.len()).rev() {
                let j = self.rng.index(i + 1);
                recs.swap(i, j);
            }
        } else if recs.len() > 2 && self.on(Adv::Interleaved, 0.6) {
            let nums: Vec<u32> = recs.iter().map(|r| r.num).collect();
            let mut keyed: Vec<(u32, Rec)> = recs
                .into_iter()
                .map(|r| {
                    let key = if r.multi && self.rng.chance(0.5) {
                        nums[self.rng.index(nums.len())]
                    } else {
                        r.num
                    };
                    (key, r)
                })
                .collect();
            keyed.sort_by_key(|(k, _)| *k);
            recs = keyed.into_iter().map(|(_, r)| r).collect();
        } else {
            recs.sort_by_key(|r| r.num);
        }
        if shuffled && recs.windows(2).any(|w| w[0].num > w[1].num) {
            self.hit(Adv::Shuffled);
        }
        // A repeated field whose records are not contiguous.
        let mut seen_multi: Vec<u32> = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if !r.multi {
                continue;
            }
            if seen_multi.contains(&r.num) && recs[i - 1].num != r.num {
                self.hit[Adv::Interleaved as usize] = true;
                break;
            }
            seen_multi.push(r.num);
        }
        recs.into_iter().flat_map(|r| r.bytes).collect()
    }

    /// Well-known types with a special JSON form: mostly valid contents.
    fn wkt_body(&mut self, desc: &MessageDescriptor, depth: usize, recs: &mut Vec<Rec>) {
        match desc.full_name() {
            "google.protobuf.Timestamp" => {
                let mut secs = if self.rng.chance(0.3) {
                    *self.rng.pick(&[
                        0,
                        -1,
                        1,
                        -62_135_596_800,
                        253_402_300_799,
                        -62_135_596_799,
                        951_782_400,
                        1_718_000_000,
                    ])
                } else {
                    self.rng.irange(-62_135_596_800, 253_402_300_799)
                };
                let mut nanos = self.nanos();
                if self.on(Adv::WktBad, 0.3) {
                    self.hit(Adv::WktBad);
                    if self.rng.chance(0.5) {
                        secs =
                            *self
                                .rng
                                .pick(&[253_402_300_800, -62_135_596_801, i64::MAX, i64::MIN]);
                    } else {
                        nanos = *self.rng.pick(&[-1, 1_000_000_000, i32::MIN, i32::MAX]);
                    }
                }
                self.seconds_nanos(secs, nanos, recs);
            }
            "google.protobuf.Duration" => {
                const MAX: i64 = 315_576_000_000;
                let mut secs = if self.rng.chance(0.3) {
                    *self.rng.pick(&[0, 1, -1, MAX, -MAX, 86_400])
                } else {
                    self.rng.irange(-MAX, MAX)
                };
                let mut nanos = self.nanos();
                if secs < 0 || (secs == 0 && self.rng.chance(0.5)) {
                    nanos = -nanos;
                }
                if self.on(Adv::WktBad, 0.3) {
                    self.hit(Adv::WktBad);
                    match self.rng.below(3) {
                        0 => {
                            secs = if self.rng.chance(0.5) { 1 } else { -1 };
                            nanos = -secs as i32 * 5;
                        }
                        1 => secs = *self.rng.pick(&[MAX + 1, -MAX - 1, i64::MIN]),
                        _ => nanos = *self.rng.pick(&[1_000_000_000, -1_000_000_000]),
                    }
                }
                self.seconds_nanos(secs, nanos, recs);
            }
            "google.protobuf.FieldMask" => {
                for _ in 0..self.rng.below(4) {
                    let n = self.rng.irange(1, 3);
                    let mut segs: Vec<&str> =
                        (0..n).map(|_| *self.rng.pick(MASK_SEGMENTS)).collect();
                    if self.on(Adv::WktBad, 0.3) {
                        self.hit(Adv::WktBad);
                        let i = self.rng.index(segs.len());
                        segs[i] = *self.rng.pick(MASK_BAD_SEGMENTS);
                    }
                    let path = if self.rng.chance(0.03) {
                        String::new()
                    } else {
                        segs.join(".")
                    };
                    let mut b = Vec::new();
                    self.len_field(&mut b, 1, path.as_bytes());
                    recs.push(Rec {
                        num: 1,
                        multi: true,
                        bytes: b,
                    });
                }
            }
            "google.protobuf.Any" => self.any_body(depth, recs),
            "google.protobuf.Value" => self.value_body(desc, depth, recs),
            "google.protobuf.Struct" => {
                let field = desc.get_field(1).expect("Struct.fields");
                let n = if depth < 8 { self.rng.index(4) } else { 0 };
                self.map_entries(&field, n, depth, recs);
            }
            "google.protobuf.ListValue" => {
                let Some(Kind::Message(value)) = desc.get_field(1).map(|f| f.kind()) else {
                    unreachable!("ListValue.values")
                };
                let n = if depth < 8 { self.rng.index(4) } else { 0 };
                for _ in 0..n {
                    let body = self.message(&value, depth + 1);
                    let mut b = Vec::new();
                    self.len_field(&mut b, 1, &body);
                    recs.push(Rec {
                        num: 1,
                        multi: true,
                        bytes: b,
                    });
                }
            }
            _ => unreachable!(),
        }
    }

    fn nanos(&mut self) -> i32 {
        match self.rng.below(5) {
            0 => 0,
            1 => self.rng.irange(0, 999) as i32 * 1_000_000,
            2 => self.rng.irange(0, 999_999) as i32 * 1_000,
            3 => self.rng.irange(0, 999_999_999) as i32,
            _ => *self.rng.pick(&[1, 999_999_999, 500_000_000, 1_000, 10]),
        }
    }

    fn seconds_nanos(&mut self, secs: i64, nanos: i32, recs: &mut Vec<Rec>) {
        if secs != 0 || self.rng.chance(0.1) {
            let mut b = Vec::new();
            self.tag(&mut b, 1, VARINT);
            self.varint(&mut b, secs as u64);
            recs.push(Rec {
                num: 1,
                multi: false,
                bytes: b,
            });
        }
        if nanos != 0 || self.rng.chance(0.1) {
            let mut b = Vec::new();
            self.tag(&mut b, 2, VARINT);
            self.varint(&mut b, nanos as i64 as u64);
            recs.push(Rec {
                num: 2,
                multi: false,
                bytes: b,
            });
        }
    }

    fn any_body(&mut self, depth: usize, recs: &mut Vec<Rec>) {
        let r = self.rng.below(100);
        let (url, payload) = if r < 5 {
            return; // empty Any: {}
        } else if r < 82 && depth < MAX_NEST + 2 && !self.ctx.any_leaf_types.is_empty() {
            let types = if depth < 3 && !self.ctx.any_types.is_empty() {
                &self.ctx.any_types
            } else {
                &self.ctx.any_leaf_types
            };
            let mut inner = types[self.rng.index(types.len())].clone();
            if inner.full_name() == "protogate.test.v1.KitchenSink" && depth > 1 {
                inner = self.ctx.any_leaf_types[0].clone();
            }
            let prefix = *self.rng.pick(&[
                "type.googleapis.com/",
                "type.googleapis.com/",
                "type.googleapis.com/",
                "example.com/a/b/",
                "/",
                "",
            ]);
            let payload = self.message(&inner, depth + 1);
            (format!("{prefix}{}", inner.full_name()), payload)
        } else {
            let url = *self.rng.pick(&[
                "type.googleapis.com/foo.Bar",
                "",
                "type.googleapis.com/",
                "not a url",
                "type.googleapis.com/protogate.test.v1.Missing",
            ]);
            (url.to_owned(), self.bytes_val())
        };
        if !url.is_empty() || self.rng.chance(0.5) {
            let mut b = Vec::new();
            self.len_field(&mut b, 1, url.as_bytes());
            recs.push(Rec {
                num: 1,
                multi: false,
                bytes: b,
            });
        }
        if !payload.is_empty() || self.rng.chance(0.2) {
            let mut b = Vec::new();
            self.len_field(&mut b, 2, &payload);
            recs.push(Rec {
                num: 2,
                multi: false,
                bytes: b,
            });
        }
    }

    fn value_body(&mut self, desc: &MessageDescriptor, depth: usize, recs: &mut Vec<Rec>) {
        let kinds = if depth < 8 { 15 } else { 11 };
        let members = if self.on(Adv::OneofTwo, 0.3) {
            self.hit(Adv::OneofTwo);
            2
        } else {
            1
        };
        for _ in 0..members {
            let mut b = Vec::new();
            let num = match self.rng.below(kinds) {
                0 => 0, // no kind at all: null
                1 | 2 => {
                    self.tag(&mut b, 1, VARINT);
                    let v = if self.rng.chance(0.9) { 0 } else { 1 };
                    self.varint(&mut b, v);
                    1
                }
                3..=5 => {
                    let f = if self.on(Adv::WktBad, 0.3) {
                        self.hit(Adv::WktBad);
                        *self.rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY])
                    } else {
                        self.finite_f64()
                    };
                    self.tag(&mut b, 2, I64);
                    b.extend_from_slice(&f.to_le_bytes());
                    2
                }
                6..=8 => {
                    let s = self.string_val();
                    self.len_field(&mut b, 3, s.as_bytes());
                    3
                }
                9 | 10 => {
                    self.tag(&mut b, 4, VARINT);
                    let v = self.rng.below(2);
                    self.varint(&mut b, v);
                    4
                }
                n => {
                    let number = if n < 13 { 5 } else { 6 };
                    let Some(Kind::Message(m)) = desc.get_field(number).map(|f| f.kind()) else {
                        unreachable!("Value.struct_value / list_value")
                    };
                    let body = self.message(&m, depth + 1);
                    self.len_field(&mut b, number, &body);
                    number
                }
            };
            if num != 0 {
                recs.push(Rec {
                    num,
                    multi: false,
                    bytes: b,
                });
            }
        }
    }

    fn corrupt(&mut self, b: &mut Vec<u8>) {
        self.hit(Adv::Corrupt);
        match self.rng.below(6) {
            0 if !b.is_empty() => {
                let at = self.rng.index(b.len());
                b.truncate(at);
            }
            1 if !b.is_empty() => {
                let i = self.rng.index(b.len());
                b[i] ^= self.rng.irange(1, 255) as u8;
            }
            2 => {
                let i = self.rng.index(b.len() + 1);
                let v = self.rng.u64() as u8;
                b.insert(i, v);
            }
            3 if !b.is_empty() => {
                let i = self.rng.index(b.len());
                b.remove(i);
            }
            _ => {
                let tail = *self.rng.pick(BAD_TAILS);
                b.extend_from_slice(tail);
            }
        }
    }
}

//! The reference path from protobuf wire bytes to a rendered tree in the shape of the proto3
//! JSON mapping, reporting every unknown field it drops.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::encode::{has_special_json, is_wrapper};
use crate::error::{ErrorKind, PathSeg, format_path};
use crate::scalar::{Op, Scalar, is_default, is_packable, read_scalar, read_val};
use crate::tree::Out;
use crate::wire::{self, Reader};
use crate::{Error, Findings, Options, UnknownField, UnresolvedAny, wkt};

pub(crate) struct Renderer<'a> {
    pub(crate) opts: &'a Options,
    pub(crate) findings: &'a mut Findings,
    path: Vec<PathSeg>,
    depth: usize,
}

/// Everything seen of one field while scanning a message. Message values keep their byte
/// chunks (with absolute offsets): a singular message seen twice is the merge of both.
enum Acc<'b> {
    One(Scalar<'b>),
    Msgs(Vec<(&'b [u8], usize)>),
    List(Vec<Scalar<'b>>),
    MsgList(Vec<(&'b [u8], usize)>),
    Map(Vec<(&'b [u8], usize)>),
}

type Chunks<'b> = Vec<(&'b [u8], usize)>;

type Scanned<'b> = BTreeMap<u32, (FieldDescriptor, Acc<'b>)>;

impl<'a> Renderer<'a> {
    pub(crate) fn new(opts: &'a Options, findings: &'a mut Findings) -> Self {
        Renderer {
            opts,
            findings,
            path: Vec::new(),
            depth: 0,
        }
    }

    /// A renderer for a message nested at `path`, `depth` messages below the root (the direct
    /// transcoder hands well-known types over to this path).
    pub(crate) fn at(
        opts: &'a Options,
        findings: &'a mut Findings,
        path: Vec<PathSeg>,
        depth: usize,
    ) -> Self {
        Renderer {
            opts,
            findings,
            path,
            depth,
        }
    }

    pub(crate) fn message(
        &mut self,
        desc: &MessageDescriptor,
        bytes: &[u8],
        base: usize,
    ) -> Result<Out, Error> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err(Error::new(ErrorKind::TooDeep {
                limit: self.opts.max_depth,
            }));
        }
        let r = self
            .scan(desc, bytes, base)
            .and_then(|fields| self.render(desc, fields));
        self.depth -= 1;
        r
    }

    fn merged_message(
        &mut self,
        desc: &MessageDescriptor,
        chunks: &[(&[u8], usize)],
    ) -> Result<Out, Error> {
        match chunks {
            [] => self.message(desc, &[], 0),
            [(bytes, at)] => self.message(desc, bytes, *at),
            many => {
                // Each occurrence must be whole on its own, as a runtime that parses each and
                // merges the results has it: joined, a field cut short at the end of one would
                // be completed by the bytes of the next.
                for (bytes, at) in many {
                    let mut r = Reader::new(bytes, *at);
                    while !r.is_empty() {
                        let (number, wt) = r.tag()?;
                        r.skip(number, wt, self.opts.max_depth)?;
                    }
                }
                let joined: Vec<u8> = many.iter().flat_map(|(b, _)| b.iter().copied()).collect();
                self.message(desc, &joined, many[0].1)
            }
        }
    }

    fn scan<'b>(
        &mut self,
        desc: &MessageDescriptor,
        bytes: &'b [u8],
        base: usize,
    ) -> Result<Scanned<'b>, Error> {
        let mut fields: Scanned<'b> = BTreeMap::new();
        let mut unknown: Vec<u32> = Vec::new();
        let mut r = Reader::new(bytes, base);
        while !r.is_empty() {
            let (number, wt) = r.tag()?;
            let Some(field) = desc.get_field(number) else {
                r.skip(number, wt, self.opts.max_depth)?;
                if !unknown.contains(&number) {
                    unknown.push(number);
                }
                continue;
            };
            let kind = field.kind();
            let known = if field.is_map() {
                if wt == wire::LEN {
                    let chunk = r.len_delimited()?;
                    push_chunk(&mut fields, &field, chunk, Acc::Map);
                    true
                } else {
                    false
                }
            } else if let Kind::Message(_) = kind {
                if wt == wire::LEN {
                    let chunk = r.len_delimited()?;
                    if field.is_list() {
                        push_chunk(&mut fields, &field, chunk, Acc::MsgList);
                    } else {
                        self.clear_oneof_siblings(&mut fields, &field)?;
                        push_chunk(&mut fields, &field, chunk, Acc::Msgs);
                    }
                    true
                } else {
                    false
                }
            } else if field.is_list() {
                if wt == wire::LEN && is_packable(&kind) {
                    let (packed, at) = r.len_delimited()?;
                    let mut pr = Reader::new(packed, at);
                    let mut vals = Vec::new();
                    while !pr.is_empty() {
                        vals.push(read_scalar(Op::of(&kind), &mut pr)?);
                    }
                    match fields
                        .entry(number)
                        .or_insert_with(|| (field.clone(), Acc::List(Vec::new())))
                    {
                        (_, Acc::List(list)) => list.extend(vals),
                        _ => unreachable!(),
                    }
                    true
                } else {
                    let at = r.offset();
                    match read_val(&kind, wt, &mut r).map_err(|e| e.at_field(field.json_name()))? {
                        Some(v) => {
                            match fields
                                .entry(number)
                                .or_insert_with(|| (field.clone(), Acc::List(Vec::new())))
                            {
                                (_, Acc::List(list)) => list.push(v),
                                _ => unreachable!(),
                            }
                            true
                        }
                        None => {
                            debug_assert_eq!(at, r.offset());
                            false
                        }
                    }
                }
            } else {
                match read_val(&kind, wt, &mut r).map_err(|e| e.at_field(field.json_name()))? {
                    Some(v) => {
                        self.clear_oneof_siblings(&mut fields, &field)?;
                        fields.insert(number, (field.clone(), Acc::One(v)));
                        true
                    }
                    None => false,
                }
            };
            if !known {
                // A known number with the wrong wire type is kept as an unknown field by the
                // reference runtimes; it cannot be rendered either.
                r.skip(number, wt, self.opts.max_depth)?;
                if !unknown.contains(&number) {
                    unknown.push(number);
                }
            }
        }
        if !unknown.is_empty() {
            let path = format_path(&self.path);
            for number in unknown {
                self.findings.unknown_fields.push(UnknownField {
                    path: path.clone(),
                    number,
                });
            }
        }
        Ok(fields)
    }

    fn render(&mut self, desc: &MessageDescriptor, mut fields: Scanned<'_>) -> Result<Out, Error> {
        let full_name = desc.full_name();
        // Every wrapper has field 1 (a schema whose copy lacks it is refused when it loads).
        if is_wrapper(desc)
            && let Some(field) = desc.get_field(1)
        {
            return Ok(match fields.remove(&1) {
                Some((_, Acc::One(v))) => self.scalar(&field, v),
                _ => self.default_scalar(&field),
            });
        }
        if has_special_json(full_name) {
            return self.special(desc, full_name, fields);
        }
        let mut out: Vec<(u32, String, Out)> = Vec::with_capacity(fields.len());
        for (number, (field, acc)) in fields {
            let name = self.output_name(&field);
            self.path.push(PathSeg::Field(field.json_name().to_owned()));
            let r = self.field(&field, acc);
            self.path.pop();
            if let Some(v) = r.map_err(|e| e.at_field(field.json_name()))? {
                out.push((number, name, v));
            }
        }
        if self.opts.emit_defaults {
            for field in desc.fields() {
                if field.supports_presence() || out.iter().any(|(n, _, _)| *n == field.number()) {
                    continue;
                }
                let v = if field.is_map() {
                    Out::Map(Vec::new())
                } else if field.is_list() {
                    Out::List(Vec::new())
                } else {
                    self.default_scalar(&field)
                };
                out.push((field.number(), self.output_name(&field), v));
            }
            out.sort_by_key(|(n, _, _)| *n);
        }
        Ok(Out::Map(
            out.into_iter().map(|(_, name, v)| (name, v)).collect(),
        ))
    }

    pub(crate) fn output_name(&self, field: &FieldDescriptor) -> String {
        if self.opts.proto_field_names {
            field.name().to_owned()
        } else {
            field.json_name().to_owned()
        }
    }

    /// One field's rendering; `None` when the field is at its default and not printed.
    fn field(&mut self, field: &FieldDescriptor, acc: Acc<'_>) -> Result<Option<Out>, Error> {
        Ok(match acc {
            Acc::One(v) => {
                if field.supports_presence() || !is_default(v) || self.opts.emit_defaults {
                    Some(self.scalar(field, v))
                } else {
                    None
                }
            }
            Acc::Msgs(chunks) => {
                let Kind::Message(m) = field.kind() else {
                    unreachable!()
                };
                Some(self.merged_message(&m, &chunks)?)
            }
            // An empty packed run sets nothing: the field is as absent as if it were missing.
            Acc::List(vals) if vals.is_empty() && !self.opts.emit_defaults => None,
            Acc::List(vals) => Some(Out::List(
                vals.into_iter().map(|v| self.scalar(field, v)).collect(),
            )),
            Acc::MsgList(chunks) => {
                let Kind::Message(m) = field.kind() else {
                    unreachable!()
                };
                let mut items = Vec::with_capacity(chunks.len());
                for (i, (bytes, at)) in chunks.into_iter().enumerate() {
                    self.path.push(PathSeg::Index(i));
                    let r = self.message(&m, bytes, at);
                    self.path.pop();
                    items.push(r.map_err(|e| e.at_index(i))?);
                }
                Some(Out::List(items))
            }
            Acc::Map(entries) => {
                let Kind::Message(entry) = field.kind() else {
                    unreachable!()
                };
                Some(self.map(&entry, entries)?)
            }
        })
    }

    fn map(
        &mut self,
        entry: &MessageDescriptor,
        entries: Vec<(&[u8], usize)>,
    ) -> Result<Out, Error> {
        let key_field = entry.map_entry_key_field();
        let value_field = entry.map_entry_value_field();
        let mut out: Vec<(String, Out)> = Vec::with_capacity(entries.len());
        let mut index: HashMap<String, usize> = HashMap::new();
        for (bytes, at) in entries {
            let mut scanned = self.scan(entry, bytes, at)?;
            let key = match scanned.remove(&1) {
                Some((_, Acc::One(v))) => v,
                _ => default_val(&key_field.kind()),
            };
            let key = map_key_text(key, &mut itoa::Buffer::new())
                .unwrap_or_default()
                .to_owned();
            self.path.push(PathSeg::Key(key.clone()));
            let value = match (scanned.remove(&2), value_field.kind()) {
                (Some((_, Acc::Msgs(chunks))), Kind::Message(m)) => {
                    self.merged_message(&m, &chunks)
                }
                (_, Kind::Message(m)) => self.message(&m, &[], 0),
                (Some((_, Acc::One(v))), _) => Ok(self.scalar(&value_field, v)),
                _ => Ok(self.default_scalar(&value_field)),
            };
            self.path.pop();
            let value = value.map_err(|e| e.at(PathSeg::Key(key.clone())))?;
            match index.get(&key) {
                Some(&i) => out[i].1 = value,
                None => {
                    index.insert(key.clone(), out.len());
                    out.push((key, value));
                }
            }
        }
        Ok(Out::Map(out))
    }

    /// Setting one member of a oneof clears the others: the last one on the wire wins. A
    /// message member cleared so is never rendered, but its bytes must still be well-formed
    /// (checked as `validate` checks them), as a runtime that parses every occurrence has it:
    /// else a malformed answer would render as the member after it.
    fn clear_oneof_siblings(
        &self,
        fields: &mut Scanned<'_>,
        field: &FieldDescriptor,
    ) -> Result<(), Error> {
        let Some(oneof) = field.containing_oneof() else {
            return Ok(());
        };
        for sibling in oneof.fields() {
            if sibling.number() == field.number() {
                continue;
            }
            if let Some((cleared, Acc::Msgs(chunks))) = fields.remove(&sibling.number())
                && let Kind::Message(m) = cleared.kind()
            {
                // `self.depth` is this message's: the member is one below it.
                let depth_left = self.opts.max_depth.saturating_sub(self.depth);
                for (bytes, at) in chunks {
                    crate::validate::message(&m, bytes, at, depth_left, self.opts.max_depth)
                        .map_err(|e| e.at_field(cleared.json_name()))?;
                }
            }
        }
        Ok(())
    }

    fn scalar(&self, field: &FieldDescriptor, v: Scalar<'_>) -> Out {
        match v {
            Scalar::I32(x) => Out::I32(x),
            Scalar::I64(x) => Out::I64(x),
            Scalar::U32(x) => Out::U32(x),
            Scalar::U64(x) => Out::U64(x),
            Scalar::F32(x) => Out::F32(x),
            Scalar::F64(x) => Out::F64(x),
            Scalar::Bool(x) => Out::Bool(x),
            Scalar::Str(x) => Out::Str(x.to_owned()),
            Scalar::Bytes(x) => Out::Bytes(x.to_vec()),
            Scalar::Enum(n) => {
                let Kind::Enum(e) = field.kind() else {
                    unreachable!()
                };
                // With enum numbers json_format prints NullValue fields as 0 too.
                if self.opts.enum_numbers {
                    Out::I32(n)
                } else if e.full_name() == "google.protobuf.NullValue" {
                    Out::Null
                } else {
                    match e.get_value(n) {
                        Some(ev) => Out::Str(ev.name().to_owned()),
                        None => Out::I32(n),
                    }
                }
            }
        }
    }

    pub(crate) fn default_scalar(&self, field: &FieldDescriptor) -> Out {
        match field.kind() {
            Kind::Message(_) => Out::Null,
            k => self.scalar(field, default_val(&k)),
        }
    }

    fn special(
        &mut self,
        desc: &MessageDescriptor,
        full_name: &str,
        mut f: Scanned<'_>,
    ) -> Result<Out, Error> {
        let int = |f: &Scanned<'_>, n: u32| match f.get(&n) {
            Some((_, Acc::One(Scalar::I64(v)))) => *v,
            Some((_, Acc::One(Scalar::I32(v)))) => *v as i64,
            _ => 0,
        };
        match full_name {
            "google.protobuf.Timestamp" => {
                let s = wkt::format_timestamp(int(&f, 1), int(&f, 2) as i32)
                    .map_err(Error::unrenderable)?;
                Ok(Out::Str(s))
            }
            "google.protobuf.Duration" => {
                let s = wkt::format_duration(int(&f, 1), int(&f, 2) as i32)
                    .map_err(Error::unrenderable)?;
                Ok(Out::Str(s))
            }
            "google.protobuf.FieldMask" => {
                let mut paths = Vec::new();
                if let Some((_, Acc::List(vals))) = f.get(&1) {
                    for v in vals {
                        if let Scalar::Str(p) = v {
                            paths.push(
                                wkt::field_mask_path_to_json(p).map_err(Error::unrenderable)?,
                            );
                        }
                    }
                }
                Ok(Out::Str(paths.join(",")))
            }
            "google.protobuf.Struct" => match f.remove(&1) {
                Some((field, Acc::Map(entries))) => {
                    let Kind::Message(entry) = field.kind() else {
                        unreachable!()
                    };
                    self.map(&entry, entries)
                }
                _ => Ok(Out::Map(Vec::new())),
            },
            "google.protobuf.ListValue" => match f.remove(&1) {
                Some((field, acc @ Acc::MsgList(_))) => {
                    Ok(self.field(&field, acc)?.unwrap_or(Out::List(Vec::new())))
                }
                _ => Ok(Out::List(Vec::new())),
            },
            "google.protobuf.Value" => {
                let Some((_, (field, acc))) = f.into_iter().find(|(n, _)| (1..=6).contains(n))
                else {
                    return Ok(Out::Null);
                };
                match acc {
                    Acc::One(Scalar::F64(x)) if !x.is_finite() => {
                        Err(Error::unrenderable(format!(
                            "google.protobuf.Value cannot hold {x} in JSON (it would read back as a string)"
                        )))
                    }
                    Acc::One(Scalar::Enum(_)) => Ok(Out::Null),
                    acc => Ok(self.field(&field, acc)?.unwrap_or(Out::Null)),
                }
            }
            "google.protobuf.Any" => self.any(desc, f),
            _ => unreachable!("has_special_json lists exactly these"),
        }
    }

    fn any(&mut self, desc: &MessageDescriptor, f: Scanned<'_>) -> Result<Out, Error> {
        let type_url = match f.get(&1) {
            Some((_, Acc::One(Scalar::Str(s)))) => *s,
            _ => "",
        };
        let (value, at): (&[u8], usize) = match f.get(&2) {
            Some((_, Acc::One(Scalar::Bytes(b)))) => (b, 0),
            _ => (&[], 0),
        };
        if type_url.is_empty() && value.is_empty() {
            return Ok(Out::Map(Vec::new()));
        }
        let type_name = type_url.rsplit('/').next().unwrap_or(type_url);
        let inner = if type_name.is_empty() {
            None
        } else {
            desc.parent_pool().get_message_by_name(type_name)
        };
        let Some(inner) = inner else {
            // Not fatal, unlike json_format: the payload travels as base64 and is reported.
            self.findings.unresolved_any.push(UnresolvedAny {
                path: format_path(&self.path),
                type_url: type_url.to_owned(),
            });
            return Ok(Out::Map(vec![
                ("@type".to_owned(), Out::Str(type_url.to_owned())),
                (
                    "value".to_owned(),
                    Out::Str(base64::engine::general_purpose::STANDARD.encode(value)),
                ),
            ]));
        };
        let rendered = self.message(&inner, value, at)?;
        let mut out = vec![("@type".to_owned(), Out::Str(type_url.to_owned()))];
        match rendered {
            Out::Map(fields) if !is_wrapper(&inner) && !has_special_json(inner.full_name()) => {
                out.extend(fields)
            }
            other => out.push(("value".to_owned(), other)),
        }
        Ok(Out::Map(out))
    }
}

fn push_chunk<'b>(
    fields: &mut Scanned<'b>,
    field: &FieldDescriptor,
    chunk: (&'b [u8], usize),
    make: fn(Chunks<'b>) -> Acc<'b>,
) {
    match fields
        .entry(field.number())
        .or_insert_with(|| (field.clone(), make(Vec::new())))
    {
        (_, Acc::Msgs(v) | Acc::MsgList(v) | Acc::Map(v)) => v.push(chunk),
        (_, slot) => *slot = make(vec![chunk]),
    }
}

/// The default of a scalar kind (messages have none: callers render an empty message).
pub(crate) fn default_val(kind: &Kind) -> Scalar<'static> {
    match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Scalar::I32(0),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Scalar::I64(0),
        Kind::Uint32 | Kind::Fixed32 => Scalar::U32(0),
        Kind::Uint64 | Kind::Fixed64 => Scalar::U64(0),
        Kind::Float => Scalar::F32(0.0),
        Kind::Double => Scalar::F64(0.0),
        Kind::Bool => Scalar::Bool(false),
        Kind::String => Scalar::Str(""),
        Kind::Bytes => Scalar::Bytes(&[]),
        Kind::Enum(_) => Scalar::Enum(0),
        Kind::Message(_) => unreachable!("no scalar default for messages"),
    }
}

/// A map key as the JSON mapping writes it: borrowed, or formatted in `digits` (no
/// allocation). `None` for values no map key can have (floats, bytes).
pub(crate) fn map_key_text<'a>(v: Scalar<'a>, digits: &'a mut itoa::Buffer) -> Option<&'a str> {
    Some(match v {
        Scalar::Str(s) => s,
        Scalar::I32(x) | Scalar::Enum(x) => digits.format(x),
        Scalar::I64(x) => digits.format(x),
        Scalar::U32(x) => digits.format(x),
        Scalar::U64(x) => digits.format(x),
        Scalar::Bool(true) => "true",
        Scalar::Bool(false) => "false",
        Scalar::F32(_) | Scalar::F64(_) | Scalar::Bytes(_) => return None,
    })
}

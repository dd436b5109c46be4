//! The reference path from a parsed JSON/MessagePack tree to protobuf wire bytes, following
//! the proto3 JSON mapping as json_format implements it (stricter where json_format is lax).

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::error::{ErrorKind, PathSeg, format_path};
use crate::tree::In;
use crate::wire::{self, put_len_prefixed, put_tag, put_varint};
use crate::{Error, Findings, Options, wkt};

pub(crate) struct Encoder<'a> {
    pub(crate) opts: &'a Options,
    pub(crate) findings: &'a mut Findings,
    /// Path of the value being encoded (kept only to report ignored keys).
    path: Vec<PathSeg>,
    depth: usize,
}

/// What a scalar JSON value turned into.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar<'v> {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(&'v str),
    Bytes(&'v [u8]),
}

enum Converted<'v> {
    Value(Scalar<'v>),
    OwnedBytes(Vec<u8>),
    /// An enum name the schema lacks, skipped because unknown fields are ignored.
    Skip,
}

impl<'a> Encoder<'a> {
    pub(crate) fn new(opts: &'a Options, findings: &'a mut Findings) -> Self {
        Encoder {
            opts,
            findings,
            path: Vec::new(),
            depth: 0,
        }
    }

    /// Encodes `v` as message `desc` (the root or a nested message).
    pub(crate) fn message(
        &mut self,
        desc: &MessageDescriptor,
        v: &In,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err(Error::new(ErrorKind::TooDeep {
                limit: self.opts.max_depth,
            }));
        }
        let r = self.message_body(desc, v, out);
        self.depth -= 1;
        r
    }

    fn message_body(
        &mut self,
        desc: &MessageDescriptor,
        v: &In,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        match desc.full_name() {
            "google.protobuf.Any" => return self.any(desc, v, out),
            "google.protobuf.Timestamp" => {
                let s = expect_str(v, "RFC 3339 timestamp string")?;
                let (secs, nanos) = wkt::parse_timestamp(s).ok_or_else(|| {
                    Error::invalid(
                        "RFC 3339 timestamp (e.g. 1972-01-01T10:00:20.021Z)",
                        quoted(s),
                    )
                })?;
                put_seconds_nanos(out, secs, nanos);
                return Ok(());
            }
            "google.protobuf.Duration" => {
                let s = expect_str(v, "duration string")?;
                let (secs, nanos) = wkt::parse_duration(s).ok_or_else(|| {
                    Error::invalid("duration like \"1.5s\" within ±315576000000s", quoted(s))
                })?;
                put_seconds_nanos(out, secs, nanos);
                return Ok(());
            }
            "google.protobuf.FieldMask" => {
                let s = expect_str(v, "field mask string")?;
                if !s.is_empty() {
                    for path in s.split(',') {
                        let snake = wkt::field_mask_path_from_json(path).ok_or_else(|| {
                            Error::invalid("lowerCamelCase field mask path", quoted(path))
                        })?;
                        put_len_prefixed(out, 1, snake.as_bytes());
                    }
                }
                return Ok(());
            }
            "google.protobuf.Struct" => {
                let In::Map(entries) = v else {
                    return Err(Error::wrong_type("object", v.type_name()));
                };
                let value_desc = struct_value_desc(desc);
                for (k, item) in entries {
                    let In::Str(key) = k else {
                        return Err(Error::wrong_type("string key", k.type_name()));
                    };
                    let mut entry = Vec::new();
                    put_len_prefixed(&mut entry, 1, key.as_bytes());
                    let mut val = Vec::new();
                    self.message(&value_desc, item, &mut val)
                        .map_err(|e| e.at(PathSeg::Field(key.clone())))?;
                    put_len_prefixed(&mut entry, 2, &val);
                    put_len_prefixed(out, 1, &entry);
                }
                return Ok(());
            }
            "google.protobuf.ListValue" => {
                let In::List(items) = v else {
                    return Err(Error::wrong_type("array", v.type_name()));
                };
                let value_desc = field_message(desc, 1);
                for (i, item) in items.iter().enumerate() {
                    let mut val = Vec::new();
                    self.message(&value_desc, item, &mut val)
                        .map_err(|e| e.at_index(i))?;
                    put_len_prefixed(out, 1, &val);
                }
                return Ok(());
            }
            "google.protobuf.Value" => {
                match v {
                    In::Null => {
                        put_tag(out, 1, wire::VARINT);
                        put_varint(out, 0);
                    }
                    In::Bool(b) => {
                        put_tag(out, 4, wire::VARINT);
                        put_varint(out, *b as u64);
                    }
                    In::Str(s) => put_len_prefixed(out, 3, s.as_bytes()),
                    In::I64(_) | In::U64(_) | In::F64(_) | In::BigInt(_) => {
                        let n = match v {
                            In::I64(i) => *i as f64,
                            In::U64(u) => *u as f64,
                            In::F64(f) | In::BigInt(f) => *f,
                            _ => unreachable!(),
                        };
                        put_tag(out, 2, wire::I64);
                        out.extend_from_slice(&n.to_le_bytes());
                    }
                    In::Map(_) => {
                        let mut sub = Vec::new();
                        self.message(&field_message(desc, 5), v, &mut sub)?;
                        put_len_prefixed(out, 5, &sub);
                    }
                    In::List(_) => {
                        let mut sub = Vec::new();
                        self.message(&field_message(desc, 6), v, &mut sub)?;
                        put_len_prefixed(out, 6, &sub);
                    }
                    In::Bytes(_) => return Err(Error::wrong_type("JSON value", v.type_name())),
                }
                return Ok(());
            }
            _ => {}
        }
        if is_wrapper(desc) {
            let field = desc.get_field(1).expect("wrapper types have field 1");
            return match self.convert(&field, v)? {
                Converted::Value(s) => {
                    put_scalar(out, &field, s, true);
                    Ok(())
                }
                Converted::OwnedBytes(b) => {
                    put_scalar(out, &field, Scalar::Bytes(&b), true);
                    Ok(())
                }
                Converted::Skip => Ok(()),
            };
        }
        let In::Map(entries) = v else {
            return Err(Error::wrong_type("object", v.type_name()));
        };
        self.fields(desc, entries.iter().map(|(k, v)| (k, v)), out)
    }

    /// The fields of a regular message (or of a message packed in an Any).
    fn fields<'v>(
        &mut self,
        desc: &MessageDescriptor,
        entries: impl Iterator<Item = (&'v In, &'v In)>,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let mut seen: Vec<u32> = Vec::new();
        let mut oneofs: Vec<(String, String)> = Vec::new();
        for (k, v) in entries {
            let In::Str(key) = k else {
                return Err(Error::wrong_type("string key", k.type_name()));
            };
            let Some(field) = desc
                .get_field_by_json_name(key)
                .or_else(|| desc.get_field_by_name(key))
            else {
                if self.opts.ignore_unknown_fields {
                    self.path.push(PathSeg::Field(key.clone()));
                    self.findings.ignored_keys.push(format_path(&self.path));
                    self.path.pop();
                    continue;
                }
                return Err(Error::new(ErrorKind::UnknownField {
                    message: desc.full_name().to_owned(),
                })
                .at_field(key));
            };
            if seen.contains(&field.number()) {
                return Err(Error::new(ErrorKind::DuplicateField).at_field(key));
            }
            seen.push(field.number());
            if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic())
                && !matches!(v, In::Null)
            {
                if let Some((_, first)) = oneofs.iter().find(|(o, _)| o == oneof.name()) {
                    return Err(Error::new(ErrorKind::DuplicateOneof {
                        oneof: oneof.name().to_owned(),
                        first: first.clone(),
                    })
                    .at_field(key));
                }
                oneofs.push((oneof.name().to_owned(), key.clone()));
            }
            self.path.push(PathSeg::Field(key.clone()));
            let r = self.field(&field, v, out);
            self.path.pop();
            r.map_err(|e| e.at_field(key))?;
        }
        Ok(())
    }

    fn field(&mut self, field: &FieldDescriptor, v: &In, out: &mut Vec<u8>) -> Result<(), Error> {
        let kind = field.kind();
        if matches!(v, In::Null) {
            // `null` means "not set", except where null is itself a value.
            let is_value =
                matches!(&kind, Kind::Message(m) if m.full_name() == "google.protobuf.Value");
            if field.is_list() || field.is_map() {
                let elem_is_value = match &kind {
                    Kind::Message(m) if field.is_map() => {
                        matches!(m.map_entry_value_field().kind(), Kind::Message(v) if v.full_name() == "google.protobuf.Value")
                    }
                    _ => is_value,
                };
                if elem_is_value {
                    // json_format fails on these; so do we, rather than guess.
                    return Err(Error::wrong_type("array or object", "null"));
                }
                return Ok(());
            }
            if is_value {
                put_len_prefixed(out, field.number(), &[0x08, 0x00]);
            } else if matches!(&kind, Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue")
            {
                put_scalar(out, field, Scalar::I32(0), field.supports_presence());
            }
            return Ok(());
        }
        if field.is_map() {
            let In::Map(entries) = v else {
                return Err(Error::wrong_type("object", v.type_name()));
            };
            let Kind::Message(entry_desc) = kind else {
                unreachable!("map fields are messages")
            };
            let key_field = entry_desc.map_entry_key_field();
            let value_field = entry_desc.map_entry_value_field();
            for (k, item) in entries {
                let key_text = map_key_text(k);
                let mut entry = Vec::new();
                self.map_key(&key_field, k, &mut entry)
                    .map_err(|e| e.at(PathSeg::Key(key_text.clone())))?;
                self.path.push(PathSeg::Key(key_text.clone()));
                let r = self.element(&value_field, item, &mut entry, true);
                self.path.pop();
                if r.map_err(|e| e.at(PathSeg::Key(key_text)))? {
                    put_len_prefixed(out, field.number(), &entry);
                }
            }
            return Ok(());
        }
        if field.is_list() {
            let In::List(items) = v else {
                return Err(Error::wrong_type("array", v.type_name()));
            };
            if field.is_packed() {
                let mut packed = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match self.convert(field, item).map_err(|e| e.at_index(i))? {
                        Converted::Value(s) => put_scalar_value_kind(&mut packed, &kind, s),
                        Converted::OwnedBytes(_) => unreachable!("bytes are never packed"),
                        Converted::Skip => {}
                    }
                }
                if !packed.is_empty() {
                    put_len_prefixed(out, field.number(), &packed);
                }
            } else {
                for (i, item) in items.iter().enumerate() {
                    let is_value_msg = matches!(&kind, Kind::Message(m) if m.full_name() == "google.protobuf.Value");
                    if matches!(item, In::Null) && !is_value_msg {
                        return Err(Error::wrong_type("array element", "null").at_index(i));
                    }
                    self.path.push(PathSeg::Index(i));
                    let r = self.element(field, item, out, false);
                    self.path.pop();
                    r.map_err(|e| e.at_index(i))?;
                }
            }
            return Ok(());
        }
        self.element(field, v, out, false).map(|_| ())
    }

    /// One value of `field` (singular, a list element, or a map entry's value when `in_map`,
    /// where the value is field 2 and always written). Returns false if it was skipped.
    fn element(
        &mut self,
        field: &FieldDescriptor,
        v: &In,
        out: &mut Vec<u8>,
        in_map: bool,
    ) -> Result<bool, Error> {
        let number = if in_map { 2 } else { field.number() };
        if let Kind::Message(m) = field.kind() {
            if matches!(v, In::Null) && m.full_name() != "google.protobuf.Value" {
                return Err(Error::wrong_type(
                    if in_map { "map value" } else { "object" },
                    "null",
                ));
            }
            let mut sub = Vec::new();
            self.message(&m, v, &mut sub)?;
            put_len_prefixed(out, number, &sub);
            return Ok(true);
        }
        let always = in_map || field.is_list() || field.supports_presence();
        match self.convert(field, v)? {
            Converted::Value(s) => put_scalar_numbered(out, number, field, s, always),
            Converted::OwnedBytes(b) => {
                put_scalar_numbered(out, number, field, Scalar::Bytes(&b), always)
            }
            Converted::Skip => return Ok(false),
        }
        Ok(true)
    }

    fn map_key(
        &mut self,
        key_field: &FieldDescriptor,
        k: &In,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let s = match (key_field.kind(), k) {
            (Kind::String, In::Str(s)) => Scalar::Str(s),
            (Kind::String, _) => return Err(Error::wrong_type("string map key", k.type_name())),
            (Kind::Bool, In::Str(s)) => match s.as_str() {
                "true" => Scalar::Bool(true),
                "false" => Scalar::Bool(false),
                _ => return Err(Error::invalid("map key \"true\" or \"false\"", quoted(s))),
            },
            (Kind::Bool, In::Bool(b)) => Scalar::Bool(*b),
            (kind, In::Str(_) | In::I64(_) | In::U64(_)) => integer_scalar(&kind, k)?,
            (_, other) => return Err(Error::wrong_type("integer map key", other.type_name())),
        };
        put_scalar_numbered(out, 1, key_field, s, true);
        Ok(())
    }

    fn convert<'v>(&mut self, field: &FieldDescriptor, v: &'v In) -> Result<Converted<'v>, Error> {
        let kind = field.kind();
        Ok(Converted::Value(match kind {
            Kind::Double => Scalar::F64(float_value(v)?),
            Kind::Float => {
                let f = float_value(v)?;
                // Values that round to a finite float32 are accepted: the shortest form of
                // float32's maximum (3.4028235e38) lies just above it.
                if f.is_finite() && f.abs() >= FLOAT_ROUNDS_TO_INFINITY {
                    return Err(Error::invalid(
                        "number within the float range",
                        number_text(v),
                    ));
                }
                Scalar::F32(f as f32)
            }
            Kind::Bool => match v {
                In::Bool(b) => Scalar::Bool(*b),
                other => return Err(Error::wrong_type("boolean", other.type_name())),
            },
            Kind::String => match v {
                In::Str(s) => Scalar::Str(s),
                In::Bytes(_) => return Err(Error::new(ErrorKind::InvalidUtf8)),
                other => return Err(Error::wrong_type("string", other.type_name())),
            },
            Kind::Bytes => match v {
                In::Bytes(b) => Scalar::Bytes(b),
                In::Str(s) => return Ok(Converted::OwnedBytes(decode_base64(s)?)),
                other => return Err(Error::wrong_type("base64 string", other.type_name())),
            },
            Kind::Enum(e) => match v {
                // NullValue's JSON form is null (a singular null is handled by the caller).
                In::Null if e.full_name() == "google.protobuf.NullValue" => Scalar::I32(0),
                In::Str(s) => {
                    if let Some(ev) = e.get_value_by_name(s) {
                        Scalar::I32(ev.number())
                    } else if looks_like_integer(s) {
                        Scalar::I32(enum_number(&integer_value(v)?, v)?)
                    } else if self.opts.ignore_unknown_fields {
                        self.findings.ignored_keys.push(format_path(&self.path));
                        return Ok(Converted::Skip);
                    } else {
                        return Err(Error::invalid(
                            "enum value name or number",
                            format!("{} (not a value of {})", quoted(s), e.full_name()),
                        ));
                    }
                }
                In::I64(_) | In::U64(_) | In::F64(_) | In::BigInt(_) => {
                    Scalar::I32(enum_number(&integer_value(v)?, v)?)
                }
                other => return Err(Error::wrong_type("enum name or number", other.type_name())),
            },
            Kind::Message(_) => unreachable!("messages are handled by the caller"),
            ref k => integer_scalar(k, v)?,
        }))
    }

    fn any(&mut self, desc: &MessageDescriptor, v: &In, out: &mut Vec<u8>) -> Result<(), Error> {
        let In::Map(entries) = v else {
            return Err(Error::wrong_type("object", v.type_name()));
        };
        if entries.is_empty() {
            return Ok(());
        }
        let type_url = match entries
            .iter()
            .find(|(k, _)| matches!(k, In::Str(s) if s == "@type"))
        {
            Some((_, In::Str(t))) => t.as_str(),
            Some((_, other)) => {
                return Err(Error::wrong_type("string", other.type_name()).at_field("@type"));
            }
            None => {
                return Err(Error::invalid(
                    "Any with an \"@type\" key",
                    "an object without one",
                ));
            }
        };
        let type_name = type_url.rsplit('/').next().unwrap_or(type_url);
        let Some(inner) = desc.parent_pool().get_message_by_name(type_name) else {
            return Err(
                Error::invalid("type known to the schema", quoted(type_url)).at_field("@type")
            );
        };
        let mut value = Vec::new();
        if is_wrapper(&inner) || has_special_json(inner.full_name()) {
            let mut packed = None;
            for (k, item) in entries {
                match k {
                    In::Str(s) if s == "@type" => {}
                    In::Str(s) if s == "value" => packed = Some(item),
                    In::Str(s) => {
                        return Err(Error::new(ErrorKind::UnknownField {
                            message: type_name.to_owned(),
                        })
                        .at_field(s));
                    }
                    other => return Err(Error::wrong_type("string key", other.type_name())),
                }
            }
            let Some(item) = packed else {
                return Err(Error::invalid(
                    "\"value\" key for a well-known type in Any",
                    "none",
                ));
            };
            self.message(&inner, item, &mut value)
                .map_err(|e| e.at_field("value"))?;
        } else {
            let rest = entries
                .iter()
                .filter(|(k, _)| !matches!(k, In::Str(s) if s == "@type"));
            self.fields(&inner, rest.map(|(k, v)| (k, v)), &mut value)?;
        }
        put_len_prefixed(out, 1, type_url.as_bytes());
        if !value.is_empty() {
            put_len_prefixed(out, 2, &value);
        }
        Ok(())
    }
}

/// The smallest double that rounds to infinity as a float32: float32's maximum plus half an ULP.
const FLOAT_ROUNDS_TO_INFINITY: f64 = 3.4028235677973366e38;

pub(crate) fn is_wrapper(desc: &MessageDescriptor) -> bool {
    desc.parent_file().name() == "google/protobuf/wrappers.proto"
}

/// Well-known types whose JSON form is not an object of their fields.
pub(crate) fn has_special_json(full_name: &str) -> bool {
    matches!(
        full_name,
        "google.protobuf.Any"
            | "google.protobuf.Timestamp"
            | "google.protobuf.Duration"
            | "google.protobuf.FieldMask"
            | "google.protobuf.Struct"
            | "google.protobuf.Value"
            | "google.protobuf.ListValue"
    )
}

fn field_message(desc: &MessageDescriptor, number: u32) -> MessageDescriptor {
    match desc.get_field(number).map(|f| f.kind()) {
        Some(Kind::Message(m)) => m,
        _ => unreachable!("well-known type layout"),
    }
}

fn struct_value_desc(desc: &MessageDescriptor) -> MessageDescriptor {
    match field_message(desc, 1).map_entry_value_field().kind() {
        Kind::Message(m) => m,
        _ => unreachable!("Struct.fields is map<string, Value>"),
    }
}

fn put_seconds_nanos(out: &mut Vec<u8>, secs: i64, nanos: i32) {
    if secs != 0 {
        put_tag(out, 1, wire::VARINT);
        put_varint(out, secs as u64);
    }
    if nanos != 0 {
        put_tag(out, 2, wire::VARINT);
        put_varint(out, nanos as i64 as u64);
    }
}

fn is_default(s: Scalar<'_>) -> bool {
    match s {
        Scalar::I32(v) => v == 0,
        Scalar::I64(v) => v == 0,
        Scalar::U32(v) => v == 0,
        Scalar::U64(v) => v == 0,
        // -0.0 is not the default: it is written, as the reference runtimes do.
        Scalar::F32(v) => v.to_bits() == 0,
        Scalar::F64(v) => v.to_bits() == 0,
        Scalar::Bool(v) => !v,
        Scalar::Str(v) => v.is_empty(),
        Scalar::Bytes(v) => v.is_empty(),
    }
}

fn put_scalar(out: &mut Vec<u8>, field: &FieldDescriptor, s: Scalar<'_>, always: bool) {
    put_scalar_numbered(out, field.number(), field, s, always)
}

fn put_scalar_numbered(
    out: &mut Vec<u8>,
    number: u32,
    field: &FieldDescriptor,
    s: Scalar<'_>,
    always: bool,
) {
    if !always && is_default(s) {
        return;
    }
    let wire_type = match field.kind() {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => wire::I64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => wire::I32,
        Kind::String | Kind::Bytes | Kind::Message(_) => wire::LEN,
        _ => wire::VARINT,
    };
    put_tag(out, number, wire_type);
    if wire_type == wire::LEN {
        let b = match s {
            Scalar::Str(v) => v.as_bytes(),
            Scalar::Bytes(v) => v,
            _ => unreachable!(),
        };
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
    } else {
        put_scalar_value_kind(out, &field.kind(), s);
    }
}

/// A scalar's value without tag, for packed lists (the wire encoding follows from the kind,
/// which `convert` already folded into the Scalar variant except for zigzag and fixed kinds).
fn put_scalar_value(out: &mut Vec<u8>, s: Scalar<'_>) {
    match s {
        Scalar::I32(v) => put_varint(out, v as i64 as u64),
        Scalar::I64(v) => put_varint(out, v as u64),
        Scalar::U32(v) => put_varint(out, v as u64),
        Scalar::U64(v) => put_varint(out, v),
        Scalar::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::Bool(v) => put_varint(out, v as u64),
        Scalar::Str(_) | Scalar::Bytes(_) => unreachable!("not packable"),
    }
}

fn put_scalar_value_kind(out: &mut Vec<u8>, kind: &Kind, s: Scalar<'_>) {
    match (kind, s) {
        (Kind::Sint32, Scalar::I32(v)) => put_varint(out, wire::zigzag32(v)),
        (Kind::Sint64, Scalar::I64(v)) => put_varint(out, wire::zigzag64(v)),
        (Kind::Fixed32, Scalar::U32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Kind::Sfixed32, Scalar::I32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Kind::Fixed64, Scalar::U64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Kind::Sfixed64, Scalar::I64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (_, s) => put_scalar_value(out, s),
    }
}

fn expect_str<'v>(v: &'v In, what: &'static str) -> Result<&'v str, Error> {
    match v {
        In::Str(s) => Ok(s),
        other => Err(Error::wrong_type(what, other.type_name())),
    }
}

fn quoted(s: &str) -> String {
    let mut q = format!("{s:?}");
    if q.len() > 80 {
        q.truncate(q.floor_char_boundary(76));
        q.push_str("...\"");
    }
    q
}

fn number_text(v: &In) -> String {
    match v {
        In::I64(i) => i.to_string(),
        In::U64(u) => u.to_string(),
        In::F64(f) => f.to_string(),
        In::BigInt(_) => "an integer beyond the 64-bit range".to_owned(),
        In::Str(s) => quoted(s),
        other => other.type_name().to_owned(),
    }
}

/// Strict JSON number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_len = i - int_start;
    if int_len == 0 || (int_len > 1 && b[int_start] == b'0') {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == b.len()
}

fn looks_like_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
}

fn float_value(v: &In) -> Result<f64, Error> {
    match v {
        In::F64(f) | In::BigInt(f) => Ok(*f),
        In::I64(i) => Ok(*i as f64),
        In::U64(u) => Ok(*u as f64),
        In::Str(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ if is_json_number(s) => {
                let f: f64 = s.parse().map_err(|_| Error::invalid("number", quoted(s)))?;
                if f.is_infinite() {
                    return Err(Error::invalid("number within the double range", quoted(s)));
                }
                Ok(f)
            }
            _ => Err(Error::invalid(
                "number or \"NaN\", \"Infinity\", \"-Infinity\"",
                quoted(s),
            )),
        },
        other => Err(Error::wrong_type("number", other.type_name())),
    }
}

/// An integer from a JSON number (integral), a decimal string, or an exponent form that
/// denotes an integer (`"1e3"`), as the proto3 JSON mapping allows.
fn integer_value(v: &In) -> Result<i128, Error> {
    match v {
        In::I64(i) => Ok(*i as i128),
        In::U64(u) => Ok(*u as i128),
        In::F64(f) => float_to_integer(*f).ok_or_else(|| Error::invalid("integer", f.to_string())),
        In::BigInt(_) => Err(Error::invalid(
            "integer in the 64-bit range",
            number_text(v),
        )),
        In::Str(s) => {
            if looks_like_integer(s) {
                if s.trim_start_matches('-').len() > 30 {
                    return Err(Error::invalid("integer in range", quoted(s)));
                }
                return s
                    .parse::<i128>()
                    .map_err(|_| Error::invalid("integer", quoted(s)));
            }
            if is_json_number(s) {
                let f: f64 = s
                    .parse()
                    .map_err(|_| Error::invalid("integer", quoted(s)))?;
                return float_to_integer(f).ok_or_else(|| Error::invalid("integer", quoted(s)));
            }
            Err(Error::invalid("integer", quoted(s)))
        }
        other => Err(Error::wrong_type("integer", other.type_name())),
    }
}

fn float_to_integer(f: f64) -> Option<i128> {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 {
        Some(f as i128)
    } else {
        None
    }
}

fn enum_number(n: &i128, v: &In) -> Result<i32, Error> {
    i32::try_from(*n).map_err(|_| Error::invalid("enum number in the int32 range", number_text(v)))
}

fn integer_scalar<'v>(kind: &Kind, v: &In) -> Result<Scalar<'v>, Error> {
    let n = integer_value(v)?;
    let range_err = |what: &'static str| Error::invalid(what, number_text(v));
    Ok(match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Scalar::I32(i32::try_from(n).map_err(|_| range_err("integer in the int32 range"))?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Scalar::I64(i64::try_from(n).map_err(|_| range_err("integer in the int64 range"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => {
            Scalar::U32(u32::try_from(n).map_err(|_| range_err("integer in the uint32 range"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => {
            Scalar::U64(u64::try_from(n).map_err(|_| range_err("integer in the uint64 range"))?)
        }
        _ => unreachable!("integer kinds only"),
    })
}

fn map_key_text(k: &In) -> String {
    match k {
        In::Str(s) => s.clone(),
        In::I64(i) => i.to_string(),
        In::U64(u) => u.to_string(),
        In::Bool(b) => b.to_string(),
        other => other.type_name().to_owned(),
    }
}

/// Standard or URL-safe base64, with or without padding.
pub(crate) fn decode_base64(s: &str) -> Result<Vec<u8>, Error> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, CONFIG);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, CONFIG);
    let engine = if s.contains(['-', '_']) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    engine
        .decode(s)
        .map_err(|e| Error::invalid("base64 string", format!("{} ({e})", quoted(s))))
}

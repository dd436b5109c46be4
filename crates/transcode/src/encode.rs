//! The reference path from a parsed JSON/MessagePack tree to protobuf wire bytes, following
//! the proto3 JSON mapping as json_format implements it (stricter where json_format is lax).

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::error::{ErrorKind, PathSeg, format_path};
use crate::scalar::{self, Converted, Scalar, quoted};
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

impl<'a> Encoder<'a> {
    pub(crate) fn new(opts: &'a Options, findings: &'a mut Findings) -> Self {
        Encoder {
            opts,
            findings,
            path: Vec::new(),
            depth: 0,
        }
    }

    /// An encoder for a message nested `depth` messages below the root.
    pub(crate) fn at_depth(opts: &'a Options, findings: &'a mut Findings, depth: usize) -> Self {
        let mut e = Encoder::new(opts, findings);
        e.depth = depth;
        e
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
                        // What JSON cannot hold in a Value (MessagePack can send it): refused
                        // here, as the JSON renderer would refuse to write it back.
                        if !n.is_finite() {
                            return Err(Error::invalid(
                                "a finite number (google.protobuf.Value)",
                                n.to_string(),
                            ));
                        }
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
        // Every wrapper has field 1 (a schema whose copy lacks it is refused when it loads).
        if is_wrapper(desc)
            && let Some(field) = desc.get_field(1)
        {
            return match self.convert(&field, v)? {
                Converted::Value(s) => {
                    scalar::put_field(out, field.number(), &field.kind(), s, true);
                    Ok(())
                }
                Converted::OwnedBytes(b) => {
                    scalar::put_field(out, field.number(), &field.kind(), Scalar::Bytes(&b), true);
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
                scalar::put_field(
                    out,
                    field.number(),
                    &kind,
                    Scalar::Enum(0),
                    field.supports_presence(),
                );
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
                let key_text = scalar::map_key_text(&k.lit());
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
                        Converted::Value(s) => {
                            scalar::put_value(&mut packed, scalar::Op::of(&kind), s)
                        }
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
            Converted::Value(s) => scalar::put_field(out, number, &field.kind(), s, always),
            Converted::OwnedBytes(b) => {
                scalar::put_field(out, number, &field.kind(), Scalar::Bytes(&b), always)
            }
            Converted::Skip => return Ok(false),
        }
        Ok(true)
    }

    fn convert<'v>(&mut self, field: &FieldDescriptor, v: &'v In) -> Result<Converted<'v>, Error> {
        let converted = scalar::convert(&field.kind(), &v.lit(), self.opts.ignore_unknown_fields)?;
        if let Converted::Skip = converted {
            self.findings.ignored_keys.push(format_path(&self.path));
        }
        Ok(converted)
    }

    fn map_key(
        &mut self,
        key_field: &FieldDescriptor,
        k: &In,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let s = scalar::map_key(&key_field.kind(), &k.lit())?;
        scalar::put_field(out, 1, &key_field.kind(), s, true);
        Ok(())
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

fn expect_str<'v>(v: &'v In, what: &'static str) -> Result<&'v str, Error> {
    match v {
        In::Str(s) => Ok(s),
        other => Err(Error::wrong_type(what, other.type_name())),
    }
}

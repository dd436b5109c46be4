//! `components.schemas`: the JSON Schema of every message and enum an operation reaches, in
//! the JSON mapping's shape, and the inline forms of the well-known types; the `Generator`
//! that queues the components as operations name them.

use std::collections::{BTreeMap, HashSet};

use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use super::comments::Comments;

/// How a value is written: in a body (the JSON mapping) or as a URL string (path variable,
/// query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Body,
    Url,
}

/// The components under construction: a message or an enum is queued when an operation or
/// another schema first refers to it, and written by `finish`.
#[derive(Default)]
pub(super) struct Generator {
    pub(super) comments: Comments,
    /// Full names of the components written or queued.
    pub(super) seen: HashSet<String>,
    queue: Vec<Pending>,
    pub(super) components: BTreeMap<String, Value>,
}

enum Pending {
    Message(MessageDescriptor),
    Enum(EnumDescriptor),
}

pub(super) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

pub(super) fn is_deprecated_field(f: &FieldDescriptor) -> bool {
    f.field_descriptor_proto()
        .options
        .as_ref()
        .is_some_and(|o| o.deprecated())
}

impl Generator {
    /// The components, once every operation is written.
    pub(super) fn finish(&mut self) -> Value {
        while let Some(p) = self.queue.pop() {
            let (name, schema) = match p {
                Pending::Message(m) => (m.full_name().to_owned(), self.message_schema(&m)),
                Pending::Enum(e) => (e.full_name().to_owned(), self.enum_schema(&e)),
            };
            self.components.insert(name, schema);
        }
        json!(std::mem::take(&mut self.components))
    }

    pub(super) fn message_ref(&mut self, m: &MessageDescriptor) -> Value {
        if self.seen.insert(m.full_name().to_owned()) {
            self.queue.push(Pending::Message(m.clone()));
        }
        reference(m.full_name())
    }

    fn enum_ref(&mut self, e: &EnumDescriptor) -> Value {
        if self.seen.insert(e.full_name().to_owned()) {
            self.queue.push(Pending::Enum(e.clone()));
        }
        reference(e.full_name())
    }

    fn message_schema(&mut self, m: &MessageDescriptor) -> Value {
        let mut properties = Map::new();
        for f in m.fields() {
            let mut s = self.field_schema(&f);
            let mut notes: Vec<String> = self
                .comments
                .get(&f.parent_file(), f.path())
                .into_iter()
                .collect();
            if let Some(o) = f.containing_oneof().filter(|o| !o.is_synthetic()) {
                let members: Vec<String> =
                    o.fields().map(|f| format!("`{}`", f.json_name())).collect();
                notes.push(format!(
                    "Part of oneof `{}`: at most one of {} is set.",
                    o.name(),
                    members.join(", ")
                ));
            }
            if !notes.is_empty() {
                // The field's words first, then the type's (a well-known type's form).
                if let Some(Value::String(d)) = s.get("description") {
                    notes.push(d.clone());
                }
                s["description"] = notes.join("\n\n").into();
            }
            if is_deprecated_field(&f) {
                s["deprecated"] = true.into();
            }
            properties.insert(f.json_name().to_owned(), s);
        }
        let mut s = json!({ "type": "object", "properties": properties });
        if let Some(c) = self.comments.get(&m.parent_file(), m.path()) {
            s["description"] = c.into();
        }
        if m.descriptor_proto()
            .options
            .as_ref()
            .is_some_and(|o| o.deprecated())
        {
            s["deprecated"] = true.into();
        }
        s
    }

    fn enum_schema(&mut self, e: &EnumDescriptor) -> Value {
        let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
        let numbers: Vec<String> = e
            .values()
            .map(|v| format!("{} = {}", v.name(), v.number()))
            .collect();
        let mut s = json!({
            "oneOf": [
                { "type": "string", "enum": names },
                {
                    "type": "integer",
                    "format": "int32",
                    "description": format!("The value's number: {}.", numbers.join(", ")),
                },
            ],
        });
        if let Some(c) = self.comments.get(&e.parent_file(), e.path()) {
            s["description"] = c.into();
        }
        s
    }

    /// The schema of a field's value in a body: maps and repeated fields included.
    pub(super) fn field_schema(&mut self, f: &FieldDescriptor) -> Value {
        if f.is_map()
            && let Kind::Message(entry) = f.kind()
        {
            let key = entry.map_entry_key_field();
            let value = entry.map_entry_value_field();
            let mut s = json!({
                "type": "object",
                "additionalProperties": self.kind_schema(&value.kind(), Mode::Body),
            });
            let names = match key.kind() {
                Kind::Bool => Some(json!({ "enum": ["true", "false"] })),
                Kind::String => None,
                Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => {
                    Some(json!({ "pattern": "^[0-9]+$" }))
                }
                _ => Some(json!({ "pattern": "^-?[0-9]+$" })),
            };
            if let Some(names) = names {
                s["propertyNames"] = names;
            }
            s
        } else if f.is_list() {
            json!({ "type": "array", "items": self.kind_schema(&f.kind(), Mode::Body) })
        } else {
            self.kind_schema(&f.kind(), Mode::Body)
        }
    }

    /// The schema of a field's value as URL strings: repeated fields are arrays (the
    /// parameter repeats).
    pub(super) fn url_schema(&mut self, f: &FieldDescriptor) -> Value {
        let one = self.kind_schema(&f.kind(), Mode::Url);
        if f.is_list() {
            json!({ "type": "array", "items": one })
        } else {
            one
        }
    }

    /// The schema of one value of a kind.
    fn kind_schema(&mut self, kind: &Kind, mode: Mode) -> Value {
        let float = |format: &str| {
            json!({
                "oneOf": [
                    { "type": "number", "format": format },
                    { "type": "string", "enum": ["NaN", "Infinity", "-Infinity"] },
                ],
            })
        };
        // 64-bit integers are strings in JSON (numbers are accepted too); in a URL they are
        // digits either way.
        let long = |format: &str| match mode {
            Mode::Body => json!({ "type": "string", "format": format }),
            Mode::Url => json!({ "type": "integer", "format": format }),
        };
        match kind {
            Kind::Double => float("double"),
            Kind::Float => float("float"),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Kind::Uint32 | Kind::Fixed32 => json!({
                "type": "integer",
                "format": "uint32",
                "minimum": 0,
                "maximum": u32::MAX,
            }),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => long("int64"),
            Kind::Uint64 | Kind::Fixed64 => long("uint64"),
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::String => json!({ "type": "string" }),
            Kind::Bytes => json!({
                "type": "string",
                "format": "byte",
                "contentEncoding": "base64",
            }),
            Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue" => match mode {
                Mode::Body => json!({ "type": "null" }),
                Mode::Url => json!({ "type": "string", "enum": ["NULL_VALUE"] }),
            },
            Kind::Enum(e) => self.enum_ref(e),
            Kind::Message(m) => self.message_value(m, mode),
        }
    }

    /// A message-typed value: the well-known types' JSON forms inline, other messages by
    /// reference.
    pub(super) fn message_value(&mut self, m: &MessageDescriptor, mode: Mode) -> Value {
        if crate::encode::is_wrapper(m) {
            let inner = m.get_field(1).map_or(Kind::String, |f| f.kind());
            let inner = self.kind_schema(&inner, mode);
            return match mode {
                Mode::Body => nullable(inner),
                Mode::Url => inner,
            };
        }
        match m.full_name() {
            "google.protobuf.Timestamp" => json!({
                "type": "string",
                "format": "date-time",
                "description": "RFC 3339, in UTC (`Z`) on output: 1972-01-01T10:00:20.021Z.",
            }),
            "google.protobuf.Duration" => json!({
                "type": "string",
                "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$",
                "description": "Seconds with up to nine fractional digits and the suffix `s`: 1.5s.",
            }),
            "google.protobuf.FieldMask" => json!({
                "type": "string",
                "format": "field-mask",
                "description": "Comma-separated field paths: `displayName,address.city`.",
            }),
            "google.protobuf.Struct" => json!({ "type": "object" }),
            "google.protobuf.Value" => json!({ "description": "Any JSON value." }),
            "google.protobuf.ListValue" => json!({ "type": "array" }),
            "google.protobuf.Any" => any_schema(),
            _ => self.message_ref(m),
        }
    }
}

/// google.protobuf.Any in JSON.
pub(super) fn any_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "@type": {
                "type": "string",
                "description": "`type.googleapis.com/` and the full name of the message.",
            },
        },
        "description": "The message's fields next to `@type` (a well-known type with a JSON \
            form of its own under `value`).",
    })
}

/// `schema` or null.
fn nullable(mut schema: Value) -> Value {
    if let Some(Value::String(t)) = schema.get("type").cloned() {
        schema["type"] = json!([t, "null"]);
        return schema;
    }
    if let Some(Value::Array(alternatives)) = schema.get_mut("oneOf") {
        alternatives.push(json!({ "type": "null" }));
        return schema;
    }
    json!({ "anyOf": [schema, { "type": "null" }] })
}

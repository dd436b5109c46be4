//! protogate's transcoding core: schema-driven conversion between the proto3 JSON mapping,
//! MessagePack and protobuf wire bytes. Bytes and a schema in; bytes and findings out. No I/O.
//!
//! # Layout
//! - [`schema`]: load descriptor sets or compile `.proto` text; look methods up by gRPC path.
//! - `json`: JSON text in and out (the canonical proto3 JSON mapping).
//! - `msgpack`: MessagePack in and out (the JSON mapping's shape with native integers and
//!   binary; see the module docs for the exact mapping).
//! - `encode`: JSON/MessagePack tree → protobuf wire bytes.
//! - `decode`: protobuf wire bytes → rendered tree, reporting unknown fields.
//! - `wkt`: string forms of Timestamp, Duration and FieldMask.
//! - [`error`]: conversion errors with the path of the failing value.
//! - [`media`]: the media types of each format and stream framing, canonical first.
//! - [`openapi`]: the OpenAPI 3.1 document of the schema's methods and HTTP rules.
//!
//! # The JSON mapping
//! Output names are `json_name` (or the proto names with [`Options::proto_field_names`]);
//! implicit-presence fields at their default are omitted ([`Options::emit_defaults`] prints
//! them), fields with explicit presence are printed whenever set; 64-bit integers are decimal
//! strings (accepted as numbers or strings, exponent forms that denote an integer included);
//! floats print NaN/±Infinity as strings and keep -0.0; bytes are standard base64 (standard or
//! URL-safe, padded or not, on input); enums are names (unknown numbers as numbers); every
//! well-known type has its special form. Input accepts json_name or the proto field name;
//! unknown keys are errors unless [`Options::ignore_unknown_fields`].
//!
//! Where the reference (`google.protobuf.json_format`) fails a whole rendering because an
//! `Any` names a type the schema lacks, this crate renders `{"@type": …, "value": "<base64>"}`
//! and reports it in [`Findings::unresolved_any`].
//!
//! # MessagePack mapping
//! The JSON mapping's shape, with these differences: 64-bit integers are native integers;
//! `bytes` are `bin` (base64 strings accepted on input); `float`/`double` are native float32 /
//! float64 including NaN and infinities; map keys are strings on output (native integer or
//! boolean keys accepted on input).

pub mod error;
pub mod media;
pub mod openapi;
pub mod rest;
pub mod schema;
pub mod stream;

mod decode;
mod direct;
mod encode;
mod json;
mod msgpack;
mod scalar;
mod special;
mod tree;
mod validate;
mod wire;
mod wkt;

/// A seeded xorshift64 generator for the unit tests: repeatable inputs without a dependency.
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

pub use error::{Error, ErrorKind};
pub use prost_reflect::{DescriptorPool, MessageDescriptor};
pub use schema::{Method, Schema, SchemaError, StreamingKind};

/// A wire format protogate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Json,
    Msgpack,
    Protobuf,
}

impl Format {
    /// The name used in logs, metrics and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Msgpack => "msgpack",
            Format::Protobuf => "protobuf",
        }
    }
}

/// Conversion options. The defaults are the canonical mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Output proto field names (`user_id`) instead of json_name (`userId`).
    pub proto_field_names: bool,
    /// Print implicit-presence fields at their default value (0, "", [], {}).
    pub emit_defaults: bool,
    /// Print enum values as numbers instead of names.
    pub enum_numbers: bool,
    /// On input, skip keys that name no field (and enum names the schema lacks) instead of
    /// failing; they are reported in [`Findings::ignored_keys`].
    pub ignore_unknown_fields: bool,
    /// Maximum message nesting, counted as json_format counts it (default 100).
    pub max_depth: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            proto_field_names: false,
            emit_defaults: false,
            enum_numbers: false,
            ignore_unknown_fields: false,
            max_depth: 100,
        }
    }
}

/// A field the schema does not know, dropped by a JSON or MessagePack rendering.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnknownField {
    /// Path of the message that held it (`items[0]`; empty for the root).
    pub path: String,
    pub number: u32,
}

/// An `Any` whose type the schema lacks, rendered with its payload as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedAny {
    pub path: String,
    pub type_url: String,
}

/// What a successful conversion noticed without failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Unknown fields dropped while rendering protobuf as JSON or MessagePack.
    pub unknown_fields: Vec<UnknownField>,
    /// `Any` payloads of types the schema lacks.
    pub unresolved_any: Vec<UnresolvedAny>,
    /// Input keys skipped under [`Options::ignore_unknown_fields`], by path.
    pub ignored_keys: Vec<String>,
}

impl Findings {
    /// True when the rendering lost information: unknown fields or unresolved `Any` payloads.
    pub fn dropped_data(&self) -> bool {
        !self.unknown_fields.is_empty() || !self.unresolved_any.is_empty()
    }

    /// How many of each finding there are, to [`truncate`](Findings::truncate) back to.
    pub(crate) fn lens(&self) -> [usize; 3] {
        [
            self.unknown_fields.len(),
            self.unresolved_any.len(),
            self.ignored_keys.len(),
        ]
    }

    /// Drops the findings made since [`lens`](Findings::lens) gave `lens`.
    pub(crate) fn truncate(&mut self, [unknown, any, ignored]: [usize; 3]) {
        self.unknown_fields.truncate(unknown);
        self.unresolved_any.truncate(any);
        self.ignored_keys.truncate(ignored);
    }
}

/// Checks that `input` is well-formed protobuf wire data for message `desc` (tags, wire
/// types, lengths, UTF-8 of string fields, nesting within [`Options::max_depth`]) without
/// decoding it. Unknown fields are fine: they are skipped, not judged.
pub fn validate_protobuf(
    desc: &MessageDescriptor,
    input: &[u8],
    opts: &Options,
) -> Result<(), Error> {
    validate::message(desc, input, 0, opts.max_depth, opts.max_depth)
}

/// Encodes a google.rpc.Status without details, for errors the gateway makes itself.
pub fn encode_status(code: i32, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 8);
    if code != 0 {
        wire::put_tag(&mut out, 1, wire::VARINT);
        wire::put_varint(&mut out, code as i64 as u64);
    }
    if !message.is_empty() {
        wire::put_len_prefixed(&mut out, 2, message.as_bytes());
    }
    out
}

/// Containers (arrays and objects) allowed in a parsed input: every message level is at most
/// two (an object inside an array), so this never rejects what the message limit accepts.
pub(crate) fn max_containers(opts: &Options) -> usize {
    opts.max_depth.saturating_mul(2).saturating_add(2)
}

/// The reference ("tree") path: parse into a value tree, walk it against the schema, render
/// through a tree. Obviously correct rather than fast; the direct transcoder behind
/// [`Schema::to_protobuf`](crate::Schema::to_protobuf) and
/// [`Schema::from_protobuf`](crate::Schema::from_protobuf) is tested against it.
pub mod reference {
    use crate::{Error, Findings, Format, MessageDescriptor, Options};

    /// Converts `input` in format `from` to protobuf wire bytes of message `desc`, appended to
    /// `out`. Protobuf input is copied unchanged (pass-through never re-encodes).
    pub fn to_protobuf(
        desc: &MessageDescriptor,
        from: Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &Options,
    ) -> Result<Findings, Error> {
        let tree = match from {
            Format::Protobuf => {
                out.extend_from_slice(input);
                return Ok(Findings::default());
            }
            Format::Json => crate::json::parse(input, crate::max_containers(opts))?,
            Format::Msgpack => crate::msgpack::parse(input, crate::max_containers(opts))?,
        };
        let mut findings = Findings::default();
        let start = out.len();
        let r = crate::encode::Encoder::new(opts, &mut findings).message(desc, &tree, out);
        if r.is_err() {
            out.truncate(start);
        }
        r.map(|()| findings)
    }

    /// Renders protobuf wire bytes of message `desc` as `to`, appended to `out`. Protobuf output
    /// is the input unchanged.
    pub fn from_protobuf(
        desc: &MessageDescriptor,
        to: Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &Options,
    ) -> Result<Findings, Error> {
        if to == Format::Protobuf {
            out.extend_from_slice(input);
            return Ok(Findings::default());
        }
        let mut findings = Findings::default();
        let tree = crate::decode::Renderer::new(opts, &mut findings).message(desc, input, 0)?;
        match to {
            Format::Json => crate::json::write(&tree, out),
            Format::Msgpack => crate::msgpack::write(&tree, out),
            Format::Protobuf => unreachable!(),
        }
        Ok(findings)
    }
}

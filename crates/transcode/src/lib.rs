//! protogate's transcoding core: schema-driven conversion between the proto3 JSON mapping,
//! MessagePack and protobuf wire bytes. Bytes and a schema in; bytes and findings out. No I/O.
//!
//! # Layout
//! - [`schema`]: load descriptor sets or compile `.proto` text; look methods up by gRPC path.
//! - `json`: JSON text in and out (the canonical proto3 JSON mapping); `indent`: its
//!   indented layout.
//! - `msgpack`: MessagePack in and out (the JSON mapping's shape with native integers and
//!   binary; see the module docs for the exact mapping).
//! - `encode`: JSON/MessagePack tree → protobuf wire bytes.
//! - `decode`: protobuf wire bytes → rendered tree, reporting unknown fields.
//! - `wkt`: string forms of Timestamp, Duration and FieldMask.
//! - [`error`]: conversion errors with the path of the failing value.
//! - `format`, `options`, `findings`: [`Format`], [`Options`], [`Findings`] — what every
//!   conversion takes and returns.
//! - `direct`: the fast path behind [`Schema::to_protobuf`] and [`Schema::from_protobuf`];
//!   [`reference`](mod@reference): the obviously correct tree path it is held to.
//! - `validate`: [`validate_protobuf`], a structural check of wire bytes.
//! - `status`: [`encode_status`], the google.rpc.Status of the gateway's own errors.
//! - [`rest`]: the google.api.http mapping; [`stream`]: stream framings.
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
pub mod reference;
pub mod rest;
pub mod schema;
pub mod stream;

mod decode;
mod direct;
mod encode;
mod findings;
mod format;
mod indent;
mod json;
mod msgpack;
mod options;
mod scalar;
mod special;
mod status;
#[cfg(test)]
mod testing;
mod tree;
mod validate;
mod wire;
mod wkt;

pub use error::{Error, ErrorKind};
pub use findings::{Findings, UnknownField, UnresolvedAny};
pub use format::Format;
pub use options::Options;
pub(crate) use options::max_containers;
pub use prost_reflect::{DescriptorPool, MessageDescriptor};
pub use schema::{Method, Schema, SchemaError, StreamingKind};
pub use status::encode_status;
#[cfg(test)]
pub(crate) use testing::xorshift;
pub use validate::validate_protobuf;

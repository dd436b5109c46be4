//! Media types: the names each format and stream framing goes by, defined once for the edge's
//! negotiation, the stream framings' `Content-Type` and the OpenAPI document. In each list the
//! canonical name (the one answers carry and the document lists) comes first; the others are
//! accepted aliases. All are lowercase `type/subtype`, without parameters.

/// The proto3 JSON mapping; a stream of messages as one JSON array.
pub const JSON: &[&str] = &["application/json"];

/// MessagePack (the JSON mapping's shape); a stream as consecutive values.
pub const MSGPACK: &[&str] = &[
    "application/msgpack",
    "application/x-msgpack",
    "application/vnd.msgpack",
];

/// Protobuf wire bytes; a stream as varint-delimited messages.
pub const PROTOBUF: &[&str] = &[
    "application/x-protobuf",
    "application/protobuf",
    "application/x-google-protobuf",
];

/// A stream of JSON messages, one a line.
pub const NDJSON: &[&str] = &["application/x-ndjson", "application/jsonl"];

/// A stream of JSON messages as server-sent events.
pub const SSE: &[&str] = &["text/event-stream"];

/// Connect's streaming protocol: messages in 5-byte envelopes, JSON or protobuf, and an
/// end-of-stream message.
pub const CONNECT_JSON: &[&str] = &["application/connect+json"];
pub const CONNECT_PROTO: &[&str] = &["application/connect+proto"];

/// Connect's unary protobuf (its JSON is [`JSON`]).
pub const PROTO: &[&str] = &["application/proto"];

//! The REST binder: a request line (`METHOD /path?query`, read as the edge's `http` crate reads
//! a request target) resolved against the library and shop routes (every google.api.http rule
//! form), then the request message built from path variables, query parameters and a body,
//! as the edge's `decode_request` does; and the body's bytes rendered as the route's answer.
//! Nothing may panic; a request built from JSON or MessagePack validates and renders.
//!
//! Input: a flags byte (bits 0-1 the body: empty, JSON, MessagePack, protobuf; bit 2 unknown
//! query parameters ignored; bit 3 ignore unknown fields; bits 4-5 the answer's format: JSON,
//! MessagePack, protobuf), the request line up to `\n`, then the body.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use transcode::rest::{RequestBody, Resolution, Routes, UnknownQuery};
use transcode::{Format, Options};

fn routes() -> &'static Routes {
    static R: OnceLock<Routes> = OnceLock::new();
    R.get_or_init(|| {
        Routes::new(protogate_fuzz::schema_v1(), &[]).expect("the test protos' routes build")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (line, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return;
    };
    let (method, target) = line.split_once(' ').unwrap_or(("GET", line));
    let Ok(method) = http::Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let Ok(target) = http::uri::PathAndQuery::try_from(target) else {
        return;
    };
    let schema = protogate_fuzz::schema_v1();
    let Resolution::Found(found) = routes().resolve(schema, method.as_str(), target.path()) else {
        return;
    };
    let binding = found.binding();
    let opts = Options {
        ignore_unknown_fields: flags & 8 != 0,
        ..Options::default()
    };
    let unknown = if flags & 4 != 0 {
        UnknownQuery::Ignore
    } else {
        UnknownQuery::Reject
    };
    let format = [
        None,
        Some(Format::Json),
        Some(Format::Msgpack),
        Some(Format::Protobuf),
    ][usize::from(flags & 3)];
    let request_body = match format {
        None => RequestBody::Empty,
        Some(_) if binding.rule().is_some() && body.is_empty() => RequestBody::Empty,
        Some(_) if binding.raw_request() => RequestBody::Raw {
            content_type: "application/octet-stream",
            data: body,
        },
        Some(f) => RequestBody::Formatted(f, body),
    };
    let mut out = Vec::new();
    let built = binding.request(
        schema,
        target.query(),
        request_body,
        unknown,
        &opts,
        &mut out,
    );
    if built.is_ok() && matches!(format, Some(Format::Json | Format::Msgpack)) {
        let input = &found.method.input;
        if let Err(e) = schema.validate_protobuf(input, &out, &opts) {
            panic!("{line:?}: the request built does not validate: {e}");
        }
        let mut json = Vec::new();
        if let Err(e) = schema.from_protobuf(input, Format::Json, &out, &mut json, &opts) {
            panic!("{line:?}: the request built does not render: {e}");
        }
    }
    // The body's bytes as the method's answer, through the route's response_body.
    let to = [
        Format::Json,
        Format::Msgpack,
        Format::Protobuf,
        Format::Json,
    ][usize::from(flags >> 4 & 3)];
    let mut answer = Vec::new();
    if binding.raw_response() {
        let _ = binding.raw_response_parts(body);
    } else if to != Format::Protobuf || binding.protobuf_response() {
        let _ = binding.response(schema, to, body, &mut answer, &opts);
    }
});

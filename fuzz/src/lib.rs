//! What the fuzz targets (and the seed generator) share: the schemas of the test workloads,
//! the messages an input may name, the options an input selects, and the comparison of the
//! direct transcoder with the reference path.
//!
//! Input layout of the three transcoding targets: byte 0 picks the message (`% messages().len()`),
//! byte 1 the options ([`options`]), the rest is the body.

use std::sync::OnceLock;

use transcode::{Error, Findings, Format, MessageDescriptor, Options, Schema, reference};

/// The project's protos, by import name within their include directory, compiled in.
const V1: &[(&str, &str, &str)] = &[
    (
        "bench.proto",
        "bench",
        include_str!("../../proto/bench/bench.proto"),
    ),
    (
        "kitchen_sink.proto",
        "test",
        include_str!("../../proto/test/kitchen_sink.proto"),
    ),
    (
        "tree.proto",
        "test",
        include_str!("../../proto/test/tree.proto"),
    ),
    (
        "plain.proto",
        "test",
        include_str!("../../proto/test/plain.proto"),
    ),
    (
        "library.proto",
        "test/rest/v1",
        include_str!("../../proto/test/rest/v1/library.proto"),
    ),
    (
        "testsvc.proto",
        "test/svc/v1",
        include_str!("../../proto/test/svc/v1/testsvc.proto"),
    ),
    (
        "shop.proto",
        "demo/v1",
        include_str!("../../proto/demo/v1/shop.proto"),
    ),
];

/// The second versions (same packages, more fields): a schema of their own.
const V2: &[(&str, &str, &str)] = &[
    (
        "testsvc.proto",
        "test/svc/v2",
        include_str!("../../proto/test/svc/v2/testsvc.proto"),
    ),
    (
        "shop.proto",
        "demo/v2",
        include_str!("../../proto/demo/v2/shop.proto"),
    ),
];

fn compile(files: &'static [(&'static str, &'static str, &'static str)]) -> Schema {
    // Files of different directories share no import names, so one flat table does.
    let names: Vec<String> = files.iter().map(|(n, _, _)| (*n).to_owned()).collect();
    Schema::compile(&names, move |name| {
        files
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, _, text)| (*text).to_owned())
    })
    .unwrap_or_else(|e| panic!("the test protos compile: {e}"))
}

/// The schema of the v1 protos (bench, kitchen sink, tree, plain, library, test service, demo
/// shop).
pub fn schema_v1() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| compile(V1))
}

/// The schema of the v2 protos (test service, demo shop).
pub fn schema_v2() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| compile(V2))
}

/// Well-known and google.rpc messages that are fine roots too (methods take and answer them).
const EXTRA_ROOTS: &[&str] = &[
    "google.protobuf.Any",
    "google.protobuf.Duration",
    "google.protobuf.Empty",
    "google.protobuf.FieldMask",
    "google.protobuf.ListValue",
    "google.protobuf.Struct",
    "google.protobuf.Timestamp",
    "google.protobuf.Value",
    "google.protobuf.Int64Value",
    "google.protobuf.BytesValue",
    "google.rpc.Status",
];

/// Every message an input may name, with the schema it belongs to: the messages of the test
/// protos (map entries aside), sorted by schema and name, then [`EXTRA_ROOTS`]. The seed
/// generator writes the same indices.
pub fn messages() -> &'static [(&'static Schema, MessageDescriptor)] {
    static M: OnceLock<Vec<(&'static Schema, MessageDescriptor)>> = OnceLock::new();
    M.get_or_init(|| {
        let mut all = Vec::new();
        for (schema, files) in [(schema_v1(), V1), (schema_v2(), V2)] {
            let mut own: Vec<MessageDescriptor> = schema
                .pool()
                .all_messages()
                .filter(|m| !m.is_map_entry())
                .filter(|m| files.iter().any(|(n, _, _)| m.parent_file().name() == *n))
                .collect();
            own.sort_by(|a, b| a.full_name().cmp(b.full_name()));
            all.extend(own.into_iter().map(|m| (schema, m)));
        }
        let v1 = schema_v1();
        for name in EXTRA_ROOTS {
            let m = v1
                .message(name)
                .unwrap_or_else(|| panic!("{name} in the schema"));
            all.push((v1, m));
        }
        all
    })
}

/// The index of message `full_name` (of the v1 schema, or of v2 when `v2`) in [`messages`].
pub fn message_index(full_name: &str, v2: bool) -> Option<u8> {
    let want: *const Schema = if v2 { schema_v2() } else { schema_v1() };
    messages()
        .iter()
        .position(|(s, m)| std::ptr::eq(*s, want) && m.full_name() == full_name)
        .and_then(|i| u8::try_from(i).ok())
}

/// The options byte: bit 0 proto field names, bit 1 emit defaults, bit 2 enum numbers, bit 3
/// ignore unknown fields (input) and indent 2 (output); the high nibble, when not 0, a small `max_depth` (1-15) instead of
/// the default 100.
pub fn options(b: u8) -> Options {
    Options {
        proto_field_names: b & 1 != 0,
        emit_defaults: b & 2 != 0,
        enum_numbers: b & 4 != 0,
        ignore_unknown_fields: b & 8 != 0,
        indent: if b & 8 != 0 { 2 } else { 0 },
        max_depth: match b >> 4 {
            0 => Options::default().max_depth,
            n => n as usize,
        },
    }
}

/// Splits a transcoding input into its message, options and body; `None` when too short.
pub fn split(data: &[u8]) -> Option<(&'static Schema, &'static MessageDescriptor, Options, &[u8])> {
    let [m, o, body @ ..] = data else {
        return None;
    };
    let all = messages();
    let (schema, desc) = &all[*m as usize % all.len()];
    Some((schema, desc, options(*o), body))
}

/// Bytes already in the output buffer before a conversion: both paths must append after them
/// and leave them alone (as the differential test's harness has it).
const PREFIX: &[u8] = b"\xA5pre";

/// One path's outcome: the whole buffer, and the findings or the error's text.
#[derive(Debug, PartialEq)]
struct Outcome {
    out: Vec<u8>,
    res: Result<Findings, String>,
}

fn run(f: impl FnOnce(&mut Vec<u8>) -> Result<Findings, Error>) -> Outcome {
    let mut out = PREFIX.to_vec();
    let res = f(&mut out).map_err(|e| e.to_string());
    Outcome { out, res }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The production conversion (`Schema::to_protobuf` or `from_protobuf`: the direct path, or the
/// reference where it hands over) against the reference path alone, and the direct path's own
/// answer against what `Schema` returned. Panics (a libFuzzer crash) on any difference: output
/// bytes, findings, error or not, the error's text. Returns the production output (without the
/// prefix) when it succeeded.
pub fn check(
    schema: &Schema,
    desc: &MessageDescriptor,
    from: Format,
    to: Format,
    input: &[u8],
    opts: &Options,
) -> Option<Vec<u8>> {
    let (prod, refr) = if to == Format::Protobuf {
        (
            run(|o| schema.to_protobuf(desc, from, input, o, opts)),
            run(|o| reference::to_protobuf(desc, from, input, o, opts)),
        )
    } else {
        (
            run(|o| schema.from_protobuf(desc, to, input, o, opts)),
            run(|o| reference::from_protobuf(desc, to, input, o, opts)),
        )
    };
    let text = to == Format::Json;
    match (&prod.res, &refr.res) {
        (Err(_), Err(_)) if prod.res == refr.res && prod.out == PREFIX && refr.out == PREFIX => {}
        (Ok(_), Ok(_)) if prod == refr => {}
        _ => panic!(
            "direct != reference: {} {} -> {} {opts:?}\n production: {:?} {}\n reference:  {:?} {}",
            desc.full_name(),
            from.as_str(),
            to.as_str(),
            prod.res,
            if text {
                show(&prod.out)
            } else {
                format!("{:02x?}", prod.out)
            },
            refr.res,
            if text {
                show(&refr.out)
            } else {
                format!("{:02x?}", refr.out)
            },
        ),
    }
    let body = prod.out[PREFIX.len()..].to_vec();
    if let Some(direct) = schema.direct_only(desc, from, to, input, opts) {
        assert!(
            prod.res.is_ok() && direct == body,
            "the direct path answered, but not what Schema returned: {} {} -> {}",
            desc.full_name(),
            from.as_str(),
            to.as_str()
        );
    }
    prod.res.is_ok().then_some(body)
}

/// The JSON / MessagePack → protobuf targets: direct == reference, and what is accepted can be
/// rendered back (the limits agree in both directions) and validates.
pub fn to_protobuf_target(from: Format, data: &[u8]) {
    let Some((schema, desc, opts, body)) = split(data) else {
        return;
    };
    let Some(wire) = check(schema, desc, from, Format::Protobuf, body, &opts) else {
        return;
    };
    if let Err(e) = schema.validate_protobuf(desc, &wire, &opts) {
        panic!(
            "accepted {} as {} but the protobuf does not validate: {e}",
            from.as_str(),
            desc.full_name()
        );
    }
    for to in [Format::Json, Format::Msgpack] {
        if check(schema, desc, Format::Protobuf, to, &wire, &opts).is_none() {
            panic!(
                "accepted {} as {} but its protobuf does not render as {}",
                from.as_str(),
                desc.full_name(),
                to.as_str()
            );
        }
    }
}

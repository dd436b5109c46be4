//! Protobuf → JSON and → MessagePack: the direct renderer against the reference path on every
//! input (same bytes, findings, error), nothing panics; a body that renders also validates
//! (the pass-through check never refuses what the renderer takes), and its JSON and
//! MessagePack renderings are read back by both paths alike.
//! Input: message byte, options byte, protobuf body (protogate_fuzz::split).
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcode::{Format, Options};

fuzz_target!(|data: &[u8]| {
    let Some((schema, desc, opts, body)) = protogate_fuzz::split(data) else {
        return;
    };
    let valid = schema.validate_protobuf(desc, body, &opts).is_ok();
    for to in [Format::Json, Format::Msgpack] {
        let rendered = protogate_fuzz::check(schema, desc, Format::Protobuf, to, body, &opts);
        assert!(
            valid || rendered.is_none(),
            "{} renders as {} but does not validate",
            desc.full_name(),
            to.as_str()
        );
        if let Some(text) = rendered {
            // What the gateway writes, read back (with the default options: the rendering
            // may use proto names or enum numbers, which input accepts too).
            let back = Options {
                max_depth: opts.max_depth,
                ..Options::default()
            };
            protogate_fuzz::check(schema, desc, to, Format::Protobuf, &text, &back);
        }
    }
});

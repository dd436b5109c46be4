//! Limits and hostile input: deep nesting is an error (never a stack overflow), random bytes
//! never panic, bad schemas name the file and line.

use transcode::{Format, Options, Schema};

mod common;

use common::Rng;

fn kitchen_sink() -> Schema {
    common::compile_proto("test", "kitchen_sink.proto")
}

#[test]
fn a_hundred_thousand_levels_are_an_error_not_a_stack_overflow() {
    let schema = kitchen_sink();
    let node = schema.message("protogate.test.v1.Node").unwrap();
    let value = schema.message("google.protobuf.Value").unwrap();
    let opts = Options::default();
    let n = 100_000;
    let mut out = Vec::new();
    // JSON: nested messages, nested arrays in a Value.
    let json = format!("{}{}", r#"{"child":"#.repeat(n), "}".repeat(n));
    let e = schema
        .to_protobuf(&node, Format::Json, json.as_bytes(), &mut out, &opts)
        .unwrap_err();
    assert!(e.to_string().contains("deep"), "{e}");
    let json = format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(
        schema
            .to_protobuf(&value, Format::Json, json.as_bytes(), &mut out, &opts)
            .is_err()
    );
    // MessagePack: 100,000 nested one-element arrays.
    let mut mp = vec![0x91u8; n];
    mp.push(0xc0);
    assert!(
        schema
            .to_protobuf(&value, Format::Msgpack, &mp, &mut out, &opts)
            .is_err()
    );
    // Protobuf: Node.child nested 100,000 times, built inside out.
    let mut pb: Vec<u8> = Vec::new();
    for _ in 0..n {
        let mut outer = vec![0x0a];
        let mut len = pb.len();
        while len >= 0x80 {
            outer.push((len as u8) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend_from_slice(&pb);
        pb = outer;
        if pb.len() > 4_000_000 {
            break;
        }
    }
    for to in [Format::Json, Format::Msgpack] {
        let e = schema
            .from_protobuf(&node, to, &pb, &mut out, &opts)
            .unwrap_err();
        assert!(e.to_string().contains("deep"), "{e}");
    }
    assert!(transcode::validate_protobuf(&node, &pb, &opts).is_err());
    // At the limit it works: the root and 99 nested messages, as json_format allows.
    let json = format!("{}{{}}{}", r#"{"child":"#.repeat(99), "}".repeat(99));
    schema
        .to_protobuf(&node, Format::Json, json.as_bytes(), &mut out, &opts)
        .unwrap();
    let json = format!("{}{{}}{}", r#"{"child":"#.repeat(100), "}".repeat(100));
    assert!(
        schema
            .to_protobuf(&node, Format::Json, json.as_bytes(), &mut out, &opts)
            .is_err()
    );
}

#[test]
fn random_and_mutated_input_never_panics() {
    let schema = kitchen_sink();
    let ks = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    let seed_json = br#"{"fInt64":"5","fString":"x","rep_nested":[{"a":1,"ids":["1",2]}],"wTimestamp":"2020-01-01T00:00:00Z","wAny":{"@type":"type.googleapis.com/google.protobuf.Duration","value":"1s"},"mapStringNested":{"k":{"b":"v"}},"wStruct":{"a":[1,null,{"b":true}]},"oneofString":"o"}"#;
    let mut seed_pb = Vec::new();
    schema
        .to_protobuf(&ks, Format::Json, seed_json, &mut seed_pb, &opts)
        .unwrap();
    let mut seed_mp = Vec::new();
    schema
        .from_protobuf(&ks, Format::Msgpack, &seed_pb, &mut seed_mp, &opts)
        .unwrap();
    let mut rng = Rng::from_state(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::new();
    for i in 0..30_000 {
        let (seed, format): (&[u8], Format) = match i % 3 {
            0 => (seed_json, Format::Json),
            1 => (&seed_pb, Format::Protobuf),
            _ => (&seed_mp, Format::Msgpack),
        };
        let mut input = seed.to_vec();
        match rng.u64() % 4 {
            // Pure noise.
            0 => input = (0..rng.u64() % 64).map(|_| rng.u64() as u8).collect(),
            // Flip, insert and delete a few bytes.
            _ => {
                for _ in 0..1 + rng.u64() % 4 {
                    let at = (rng.u64() as usize) % (input.len() + 1);
                    match rng.u64() % 3 {
                        0 if at < input.len() => input[at] ^= 1 << (rng.u64() % 8),
                        1 => input.insert(at, rng.u64() as u8),
                        _ if at < input.len() => {
                            input.remove(at);
                        }
                        _ => {}
                    }
                }
            }
        }
        out.clear();
        let _ = match format {
            Format::Protobuf => {
                // The table-driven check and the descriptor-driven one agree.
                assert_eq!(
                    schema.validate_protobuf(&ks, &input, &opts).is_ok(),
                    transcode::validate_protobuf(&ks, &input, &opts).is_ok(),
                    "{input:?}"
                );
                schema
                    .from_protobuf(&ks, Format::Json, &input, &mut out, &opts)
                    .and_then(|_| {
                        schema.from_protobuf(&ks, Format::Msgpack, &input, &mut out, &opts)
                    })
            }
            from => schema.to_protobuf(&ks, from, &input, &mut out, &opts),
        };
    }
}

#[test]
fn bad_schemas_name_the_file_and_line() {
    let compile = |files: &'static [(&'static str, &'static str)]| {
        let names: Vec<String> = files.iter().take(1).map(|(n, _)| (*n).to_owned()).collect();
        Schema::compile(&names, move |name| {
            files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| (*t).to_owned())
        })
        .unwrap_err()
        .to_string()
    };
    let e = compile(&[(
        "a.proto",
        "syntax = \"proto3\";\nimport \"missing.proto\";\n",
    )]);
    assert!(
        e.starts_with("a.proto:2:") && e.contains("missing.proto"),
        "{e}"
    );
    let e = compile(&[(
        "a.proto",
        "syntax = \"proto3\";\nmessage A {\n  Nope n = 1;\n}\n",
    )]);
    assert!(e.starts_with("a.proto:3:3") && e.contains("Nope"), "{e}");
    let e = compile(&[(
        "a.proto",
        "syntax = \"proto3\";\nmessage A {}\nmessage A {}\n",
    )]);
    assert!(
        e.starts_with("a.proto:") && e.contains("'A' is defined twice"),
        "{e}"
    );
    let e = compile(&[(
        "a.proto",
        "syntax = \"proto3\";\nmessage A {\n  int32 x = 1\n}\n",
    )]);
    assert!(
        e.starts_with("a.proto:4:") || e.starts_with("a.proto:3:"),
        "{e}"
    );
    let e = Schema::from_descriptor_set(b"\x0a\x03abc")
        .unwrap_err()
        .to_string();
    assert!(!e.is_empty());
}

#[test]
fn descriptor_sets_with_and_without_imports_load() {
    let schema = kitchen_sink();
    let full = schema.to_descriptor_set();
    let with = Schema::from_descriptor_set(&full).unwrap();
    assert!(with.message("protogate.test.v1.KitchenSink").is_some());
    // Only the kitchen-sink file itself: its google/protobuf imports come from the bundled copies.
    use prost::Message as _;
    let mut set = prost_types::FileDescriptorSet::decode(full.as_slice()).unwrap();
    set.file.retain(|f| f.name() == "kitchen_sink.proto");
    assert_eq!(set.file.len(), 1);
    let without = Schema::from_descriptor_set(&set.encode_to_vec()).unwrap();
    let ks = without.message("protogate.test.v1.KitchenSink").unwrap();
    let mut out = Vec::new();
    schema
        .to_protobuf(
            &ks,
            Format::Json,
            br#"{"wTimestamp":"2020-01-01T00:00:00Z"}"#,
            &mut out,
            &Options::default(),
        )
        .unwrap();
}

#[test]
fn a_well_known_type_with_another_layout_is_refused_at_load() {
    let files: &[(&str, &str)] = &[
        (
            "a.proto",
            "syntax = \"proto3\";\nimport \"google/protobuf/timestamp.proto\";\nmessage A { google.protobuf.Timestamp t = 1; }\n",
        ),
        (
            "google/protobuf/timestamp.proto",
            "syntax = \"proto3\";\npackage google.protobuf;\nmessage Timestamp { string seconds = 1; }\n",
        ),
    ];
    let e = Schema::compile(&["a.proto".to_owned()], move |name| {
        files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| (*t).to_owned())
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("google.protobuf.Timestamp") && e.contains("field 1 should be int64"),
        "{e}"
    );
}

/// Random paths, query strings and bodies through the REST mapping, and random bytes through
/// every request-stream framing: errors, never a panic.
#[test]
fn random_requests_through_rest_and_stream_framing_never_panic() {
    use transcode::rest::{Lookup, RequestBody, Routes, UnknownQuery};
    use transcode::stream::{InFraming, Splitter};

    let schema = common::compile_proto("test/rest/v1", "library.proto");
    let routes = Routes::new(&schema, &[]).expect("routes");
    let mut rng = Rng::from_state(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.u64();
    let pieces: &[&str] = &[
        "/",
        "v1",
        "shelves",
        "books",
        "1",
        "echo",
        ":archive",
        ":watch",
        "%2F",
        "%",
        "%zz",
        "%C3%A9",
        "%FF",
        "*",
        "{",
        "}",
        "=",
        "?",
        "&",
        "pageSize=",
        "genres=",
        "filter.pages.min=",
        "ids=",
        "publishedAfter=",
        "maxAge=",
        "x",
        "-1",
        "1e400",
        "true",
        "é",
        "+",
        "..",
        "",
    ];
    let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "SEARCH", "HEAD"];
    let bodies: &[&[u8]] = &[
        b"",
        b"{}",
        b"{\"title\":",
        b"[1,2]",
        b"\x81\xa1a\x01",
        b"\x12\x02hi",
        b"\xff\xff",
        b"{\"book\":{\"title\":\"x\"}}",
        b"null",
        b"\"s\"",
    ];
    for _ in 0..20_000 {
        let mut path = String::from("/");
        for _ in 0..(next() % 8) {
            path.push_str(pieces[(next() % pieces.len() as u64) as usize]);
        }
        let mut query = String::new();
        for _ in 0..(next() % 5) {
            query.push_str(pieces[(next() % pieces.len() as u64) as usize]);
        }
        let method = methods[(next() % methods.len() as u64) as usize];
        if let Lookup::Found(route, values) = routes.find(method, &path) {
            let data = bodies[(next() % bodies.len() as u64) as usize];
            let body = match next() % 4 {
                0 => RequestBody::Empty,
                1 => RequestBody::Formatted(Format::Json, data),
                2 => RequestBody::Formatted(Format::Msgpack, data),
                _ => RequestBody::Formatted(Format::Protobuf, data),
            };
            let mut out = Vec::new();
            let _ = route.request(
                &schema,
                &values,
                Some(&query),
                body,
                UnknownQuery::Reject,
                &Options::default(),
                &mut out,
            );
            let mut rendered = Vec::new();
            let _ = route.response(
                &schema,
                Format::Json,
                data,
                &mut rendered,
                &Options::default(),
            );
            let _ = route.raw_response_parts(data);
        }
    }
    for framing in [
        InFraming::Ndjson,
        InFraming::JsonArray,
        InFraming::Msgpack,
        InFraming::Delimited,
    ] {
        for _ in 0..5_000 {
            let len = (next() % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    b"[]{},\"\\\n :1a\x81\x90\xa1\xc4\xdc\xde\x02\x05\xff"[(next() % 21) as usize]
                })
                .collect();
            let mut s = Splitter::new(framing, 32);
            for chunk in bytes.chunks(1 + (next() % 7) as usize) {
                s.push(chunk);
                while let Ok(Some(_)) = s.next_message() {}
            }
            s.end();
            while let Ok(Some(_)) = s.next_message() {}
            let _ = s.finish();
        }
    }
}

/// A singular message field given twice is the merge of two messages, each of which must be
/// whole: a field cut short at the end of the first is an error, not completed by the bytes of
/// the second (found by the fuzz target protobuf_to_json_msgpack: joined first, the two parsed
/// and rendered while the pass-through check refused them).
#[test]
fn a_message_given_twice_is_read_occurrence_by_occurrence() {
    let schema = common::compile_proto("test/rest/v1", "library.proto");
    let desc = schema.message("library.v1.UpdateBookRequest").unwrap();
    let opts = Options::default();
    // book = 1: first "\x61" (field 12, fixed64) and five of its eight bytes, then three more.
    let wire = b"\x0a\x06\x61true\"\x0a\x03\xef\xbb\xbf";
    let valid = schema.validate_protobuf(&desc, wire, &opts);
    assert!(valid.is_err(), "{valid:?}");
    for to in [Format::Json, Format::Msgpack] {
        let mut out = Vec::new();
        let e = schema
            .from_protobuf(&desc, to, wire, &mut out, &opts)
            .unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        assert_eq!(e.to_string(), valid.clone().unwrap_err().to_string());
    }
    // Two whole occurrences still merge.
    let wire = b"\x0a\x03\x0a\x01a\x0a\x03\x12\x01b";
    let mut out = Vec::new();
    schema
        .from_protobuf(&desc, Format::Json, wire, &mut out, &opts)
        .unwrap();
    assert_eq!(out, br#"{"book":{"name":"a","title":"b"}}"#);
}

/// The depth limit agrees both ways: whatever nesting a request is accepted with, its echo
/// renders, through plain fields, repeated fields, map values and google.protobuf.Value alike
/// (a map entry and a Struct's entries are messages on the wire), in JSON and MessagePack.
#[test]
fn what_is_accepted_at_any_depth_renders_back() {
    let schema = kitchen_sink();
    let node = schema.message("protogate.test.v1.Node").unwrap();
    let value = schema.message("google.protobuf.Value").unwrap();
    let opts = Options::default();
    type Shape = (&'static str, &'static str, &'static str);
    // (open, innermost, close) of one level, per path.
    let shapes: [(&str, &transcode::MessageDescriptor, Shape); 4] = [
        ("child", &node, (r#"{"child":"#, "{}", "}")),
        ("children", &node, (r#"{"children":["#, "{}", "]}")),
        ("by_name", &node, (r#"{"byName":{"k":"#, "{}", "}}")),
        ("Value", &value, (r#"{"k":"#, "1", "}")),
    ];
    for (what, desc, (open, inner, close)) in shapes {
        let mut accepted = 0;
        for n in 0..=130 {
            let json = format!("{}{inner}{}", open.repeat(n), close.repeat(n));
            let mut pb = Vec::new();
            if schema
                .to_protobuf(desc, Format::Json, json.as_bytes(), &mut pb, &opts)
                .is_err()
            {
                continue;
            }
            accepted = n;
            for to in [Format::Json, Format::Msgpack] {
                let mut out = Vec::new();
                if let Err(e) = schema.from_protobuf(desc, to, &pb, &mut out, &opts) {
                    panic!("{what}: {n} levels accepted from JSON do not render as {to:?}: {e}");
                }
            }
        }
        assert!(accepted >= 30, "{what}: only {accepted} levels accepted");
    }
}

/// A oneof's message member that a later member replaces is never rendered, but a malformed
/// one still makes the body malformed (a runtime parses every occurrence; `validate_protobuf`
/// refuses it too): it must not render as the member after it. Found by the
/// protobuf_to_json_msgpack fuzz target (a Value: bool, a broken struct, then null).
#[test]
fn a_malformed_oneof_member_is_an_error_even_when_a_later_member_replaces_it() {
    let schema = kitchen_sink();
    let opts = Options::default();
    let value = schema.message("google.protobuf.Value").unwrap();
    let sink = schema.message("protogate.test.v1.KitchenSink").unwrap();
    // Value: struct_value (5) with a truncated varint inside, then null_value (1) = 0.
    let broken_value: &[u8] = &[0x2a, 0x02, 0x08, 0xff, 0x08, 0x00];
    // KitchenSink: oneof_nested (65) broken the same way, then oneof_string (62) = "x".
    let broken_sink: &[u8] = &[0x8a, 0x04, 0x02, 0x08, 0xff, 0xf2, 0x03, 0x01, b'x'];
    // The same bodies with the replaced member well-formed render as the last member.
    let fine_value: &[u8] = &[0x2a, 0x00, 0x08, 0x00];
    let fine_sink: &[u8] = &[0x8a, 0x04, 0x02, 0x08, 0x01, 0xf2, 0x03, 0x01, b'x'];
    for (desc, broken, fine, want) in [
        (&value, broken_value, fine_value, "null"),
        (&sink, broken_sink, fine_sink, r#"{"oneofString":"x"}"#),
    ] {
        assert!(schema.validate_protobuf(desc, broken, &opts).is_err());
        for to in [Format::Json, Format::Msgpack] {
            let mut out = Vec::new();
            let e = schema
                .from_protobuf(desc, to, broken, &mut out, &opts)
                .expect_err(desc.full_name());
            assert!(e.to_string().contains("truncated varint"), "{e}");
        }
        assert!(schema.validate_protobuf(desc, fine, &opts).is_ok());
        let mut out = Vec::new();
        schema
            .from_protobuf(desc, Format::Json, fine, &mut out, &opts)
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}

/// Every path counts nesting the same way (messages, not map entries), so whatever JSON the
/// encoder accepts under a depth limit, the protobuf it writes validates and renders under
/// that limit, and nothing deeper is accepted anywhere. Found by the json_to_protobuf fuzz
/// target: a Struct of one string accepted under a limit of 2, its protobuf refused ("nesting
/// deeper than 2 levels": the check counted the map entry as a level).
#[test]
fn json_accepted_under_a_depth_limit_validates_and_renders_under_it() {
    let schema = kitchen_sink();
    let node = schema.message("protogate.test.v1.Node").unwrap();
    let strukt = schema.message("google.protobuf.Struct").unwrap();
    let cases = [
        (&node, r#"{"byName":{"a":{"byName":{"b":{"value":1}}}}}"#, 3),
        (&node, r#"{"child":{"byName":{"a":{}}}}"#, 3),
        (&strukt, r#"{"a":"x"}"#, 2),
        (&strukt, r#"{"a":{"b":["x",{"c":null}]}}"#, 8),
    ];
    for (desc, json, levels) in cases {
        let limit = |max_depth| Options {
            max_depth,
            ..Options::default()
        };
        // The protobuf validates, and renders, under `opts`.
        let checks = |pb: &[u8], opts: &Options| {
            let mut out = Vec::new();
            (
                schema.validate_protobuf(desc, pb, opts).is_ok(),
                schema
                    .from_protobuf(desc, Format::Json, pb, &mut out, opts)
                    .is_ok(),
            )
        };
        for max_depth in 1..=levels + 1 {
            let mut pb = Vec::new();
            let accepted = schema
                .to_protobuf(
                    desc,
                    Format::Json,
                    json.as_bytes(),
                    &mut pb,
                    &limit(max_depth),
                )
                .is_ok();
            assert_eq!(accepted, max_depth >= levels, "{json} under {max_depth}");
            if !accepted {
                continue;
            }
            assert_eq!(
                checks(&pb, &limit(max_depth)),
                (true, true),
                "{json} under {max_depth}"
            );
            // One level less refuses the same protobuf in both checks.
            if max_depth == levels && levels > 1 {
                assert_eq!(checks(&pb, &limit(max_depth - 1)), (false, false), "{json}");
            }
        }
    }
}

/// MessagePack can carry NaN and the infinities where JSON cannot: in a plain double they
/// travel (JSON writes them as strings), in a google.protobuf.Value they are refused on the
/// way in, as JSON could not write them back. Found by the msgpack_to_protobuf fuzz target.
#[test]
fn a_value_refuses_a_number_json_cannot_hold() {
    let schema = kitchen_sink();
    let opts = Options::default();
    let list = schema.message("google.protobuf.ListValue").unwrap();
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut mp = vec![0x91, 0xcb];
        mp.extend_from_slice(&x.to_be_bytes());
        let mut out = Vec::new();
        let e = schema
            .to_protobuf(&list, Format::Msgpack, &mp, &mut out, &opts)
            .unwrap_err();
        assert!(e.to_string().contains("finite number"), "{x}: {e}");
    }
    let mut mp = vec![0x91, 0xcb];
    mp.extend_from_slice(&1.5f64.to_be_bytes());
    let mut out = Vec::new();
    schema
        .to_protobuf(&list, Format::Msgpack, &mp, &mut out, &opts)
        .unwrap();
    // A plain double keeps them.
    let sink = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let mut mp = vec![0x81, 0xa7];
    mp.extend_from_slice(b"fDouble");
    mp.push(0xcb);
    mp.extend_from_slice(&f64::NAN.to_be_bytes());
    let mut out = Vec::new();
    schema
        .to_protobuf(&sink, Format::Msgpack, &mp, &mut out, &opts)
        .unwrap();
}

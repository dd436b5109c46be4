//! Scalar values at the edges of the direct encoder's fast paths against the reference.

use transcode::{Format, Options, reference};

use crate::common::compile_proto;
use crate::harness::{Outcome, diff};

/// Scalar values at the edges of the direct encoder's fast paths (integers as numbers and
/// strings at the 18/19-digit and 32/64-bit bounds, `-0`, floats at the float32 bound,
/// fractions at the exact-division bound and at 16-19 significant digits, strings, booleans,
/// base64, enum names and numbers) in every scalar field kind — implicit presence, explicit
/// presence and packed — agree with the reference, over compact and spaced JSON, and with
/// input that ends right after a value or a key. Strings of 15 to 129 bytes cross the
/// fixed-size copies and one-byte lengths.
#[test]
fn fast_path_scalar_edges_agree() {
    let kinds = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
        "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes", "enum",
    ];
    scalar_edges_agree(
        "kitchen_sink.proto",
        "protogate.test.v1.KitchenSink",
        &kinds,
    );
}

/// [`fast_path_scalar_edges_agree`] in a message `direct::json_fast` takes whole (every
/// field a number, string, bool or message: no bytes, enums or maps), so that the edge values
/// reach that loop first.
#[test]
fn json_fast_scalar_edges_agree() {
    let kinds = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
        "fixed64", "sfixed32", "sfixed64", "bool", "string", "far", "farther",
    ];
    scalar_edges_agree("plain.proto", "protogate.test.v1.Plain", &kinds);
}

/// Every value of the list below in every field of `kinds` (`f<Kind>`, `opt<Kind>`,
/// `rep<Kind>`, where the message has them) of `message`, converted by the gateway's path and
/// by the reference: the same bytes or the same error.
fn scalar_edges_agree(proto: &str, message: &str, kinds: &[&str]) {
    let schema = compile_proto("test", proto);
    let desc = schema.message(message).unwrap();
    let opts = Options::default();
    let values = [
        "0",
        "-0",
        "1",
        "-1",
        "0.0",
        "-0.0",
        "1.0",
        "1e0",
        "1E2",
        "\"1e2\"",
        "007",
        "\"007\"",
        "\"-0\"",
        "\"\"",
        "\"-\"",
        "\"+1\"",
        "\" 1\"",
        "\"1 \"",
        "\"0x10\"",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "4294967295",
        "4294967296",
        "\"2147483648\"",
        "\"-2147483649\"",
        "\"4294967296\"",
        "999999999999999999",
        "\"999999999999999999\"",
        "-999999999999999999",
        "1000000000000000000",
        "\"1000000000000000000\"",
        "\"-1000000000000000000\"",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "\"9223372036854775807\"",
        "\"9223372036854775808\"",
        "\"18446744073709551615\"",
        "\"18446744073709551616\"",
        "99999999999999999999",
        "0.1",
        "0.15",
        "99.99",
        "-0.000001",
        "9007199254740992.5",
        "9007199254740993",
        "0.9007199254740993",
        "1.2345678901234567",
        "123456789012345678.9",
        // 16-19 significant digits (the reciprocal multiplication and its ties).
        "18.016010181088284",
        "148.7013839806217",
        "9007199254740993.0",
        "9007199254740995.0",
        "18014398509481985.0",
        "0.100000000000000005",
        "0.1000000000000000055511151231257827",
        "1.7976931348623157",
        "9999999999999999.999",
        "-0.0000000000000000001",
        "0.9999999999999999999",
        "3.4028235e38",
        "3.4028236e38",
        "-3.4028236e38",
        "3.4028235677973366e38",
        "3.4028235677973362e38",
        "1e308",
        "1e309",
        "\"NaN\"",
        "\"Infinity\"",
        "\"1.5\"",
        "true",
        "false",
        "\"true\"",
        "null",
        "\"x\"",
        "\"\\u00e9\"",
        "[]",
        "{}",
        "\"AQID\"",
        "\"AQ==\"",
        "\"-_8\"",
        "\"COLOR_RED\"",
        "\"COLOR_NEGATIVE\"",
        "\"color_red\"",
        "-5",
        "3",
        "4",
        "tru",
        "fals",
        "truee",
        "\"12a\"",
        "\"12\\u0033\"",
        "\"0\"",
        "\"--1\"",
        "\"-999999999999999999\"",
        "\"1\\\"\"",
        "\"1.\"",
    ];
    // Strings around the lengths where the fast path's fixed-size copies and one-byte
    // lengths end, ASCII and not.
    let mut values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    for n in [15, 16, 17, 31, 32, 33, 127, 128, 129] {
        values.push(format!("\"{}\"", "a".repeat(n)));
        values.push(format!("\"{}é\"", "b".repeat(n - 1)));
    }
    for kind in kinds {
        for value in &values {
            let texts = [
                format!(r#"{{"f{}":{value}}}"#, capitalize(kind)),
                format!(r#"{{ "opt{}" : {value} }}"#, capitalize(kind)),
                format!(r#"{{"rep{}":[{value},{value}]}}"#, capitalize(kind)),
                format!(r#"{{"fInt32":1,"f{}":{value}}}"#, capitalize(kind)),
                // Input that ends right after the value, or after the key.
                format!(r#"{{"f{}":{value}"#, capitalize(kind)),
                format!(r#"{{"fInt32":{value},"f{}""#, capitalize(kind)),
                // Nested, in a list, and after keys out of declaration order (Plain's child
                // and children; KitchenSink has neither, and both paths refuse them).
                format!(r#"{{"child":{{"f{}":{value}}}}}"#, capitalize(kind)),
                format!(
                    r#"{{"children":[{{"f{0}":{value}}}, {{"opt{0}":{value},"fInt32":2}}]}}"#,
                    capitalize(kind)
                ),
                format!(
                    r#"{{"fString":"x","fDouble":1,"f{}":{value}}}"#,
                    capitalize(kind)
                ),
            ];
            for text in texts {
                let production = Outcome::run(|o| {
                    schema.to_protobuf(&desc, Format::Json, text.as_bytes(), o, &opts)
                });
                let reference = Outcome::run(|o| {
                    reference::to_protobuf(&desc, Format::Json, text.as_bytes(), o, &opts)
                });
                assert_eq!(
                    diff(&production, &reference),
                    None,
                    "{text}: {production:?} vs {reference:?}"
                );
            }
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// MessagePack values at the edges of the direct encoder's fast paths agree with the
/// reference: strings under every header (fixstr to 31 bytes, str8 from 32, and a short one
/// under a wider header than needed), ASCII, not ASCII and not UTF-8, cut short by the end
/// of input; integers and floats of every width; in string, integer and double fields, single,
/// optional and repeated, and after a key the fast path does not know.
#[test]
fn msgpack_fast_path_edges_agree() {
    msgpack_edges_agree("kitchen_sink.proto", "protogate.test.v1.KitchenSink");
}

/// [`msgpack_fast_path_edges_agree`] in a message `direct::msgpack_fast` takes whole.
#[test]
fn msgpack_fast_loop_edges_agree() {
    msgpack_edges_agree("plain.proto", "protogate.test.v1.Plain");
}

fn msgpack_edges_agree(proto: &str, message: &str) {
    let schema = compile_proto("test", proto);
    let desc = schema.message(message).unwrap();
    let opts = Options::default();
    let mut values: Vec<Vec<u8>> = Vec::new();
    for n in [0usize, 1, 15, 16, 17, 31, 32, 33, 40, 255, 256] {
        let ascii = "a".repeat(n);
        let mut v = Vec::new();
        rmp::encode::write_str(&mut v, &ascii).unwrap();
        values.push(v);
        if n > 0 {
            let mut v = Vec::new();
            rmp::encode::write_str(&mut v, &format!("{}é", "b".repeat(n - 1))).unwrap();
            values.push(v);
            // Not UTF-8: the header of a str, an invalid byte last.
            let mut v = values[values.len() - 2].clone();
            *v.last_mut().unwrap() = 0xff;
            values.push(v);
        }
    }
    // A short string under str8 and str16 headers; a str whose bytes run past the input.
    values.push(vec![0xd9, 3, b'a', b'b', b'c']);
    values.push(vec![0xda, 0, 2, b'h', b'i']);
    values.push(vec![0xa5, b'a', b'b']);
    values.push(vec![0xd9, 40, b'a']);
    for v in [
        0i64,
        1,
        -1,
        127,
        128,
        -32,
        -33,
        255,
        256,
        65_535,
        65_536,
        i32::MAX as i64,
    ] {
        let mut b = Vec::new();
        rmp::encode::write_sint(&mut b, v).unwrap();
        values.push(b);
    }
    for v in [u32::MAX as u64 + 1, i64::MAX as u64, u64::MAX] {
        let mut b = Vec::new();
        rmp::encode::write_uint(&mut b, v).unwrap();
        values.push(b);
    }
    for f in [0.0f64, -0.0, 1.5, 1e300] {
        let mut b = Vec::new();
        rmp::encode::write_f64(&mut b, f).unwrap();
        values.push(b);
    }
    let mut b = Vec::new();
    rmp::encode::write_f32(&mut b, 3.5).unwrap();
    values.push(b);
    values.extend([
        vec![0xc0],
        vec![0xc2],
        vec![0xc3],
        vec![0xc4, 1, 7],
        vec![0x90],
    ]);
    let key = |name: &str| {
        let mut k = Vec::new();
        rmp::encode::write_str(&mut k, name).unwrap();
        k
    };
    for field in [
        "fString",
        "optString",
        "fInt64",
        "fInt32",
        "fDouble",
        "f_string",
    ] {
        for value in &values {
            let mut one = vec![0x81];
            one.extend(key(field));
            one.extend(value);
            let mut list = vec![0x81];
            list.extend(key(&format!("rep{}", &field[1..])));
            list.push(0x92);
            list.extend(value);
            list.extend(value);
            // A key under a str8 header, then the field.
            let mut wide = vec![0x82, 0xd9, 6];
            wide.extend(b"fInt32");
            wide.push(1);
            wide.extend(key(field));
            wide.extend(value);
            for text in [one, list, wide] {
                let production =
                    Outcome::run(|o| schema.to_protobuf(&desc, Format::Msgpack, &text, o, &opts));
                let reference = Outcome::run(|o| {
                    reference::to_protobuf(&desc, Format::Msgpack, &text, o, &opts)
                });
                assert_eq!(
                    diff(&production, &reference),
                    None,
                    "{text:02x?}: {production:?} vs {reference:?}"
                );
            }
        }
    }
}

/// Lists of messages whose sizes cross the length varint's 1/2/3-byte bounds in every order
/// (each element reserves the bytes its predecessor's length took, and the content moves
/// when that guess is wrong, up or down), nested inside each other, from JSON and
/// MessagePack: the direct path answers, with the reference's bytes.
#[test]
fn list_element_lengths_agree() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    // Content sizes of `{"b": …}` elements: under 128, 128 to 16 KiB, 16 KiB and over.
    let sizes = [
        0usize, 200, 10, 20_000, 5, 300, 300, 20_000, 20_000, 1, 125, 126, 16_381,
    ];
    let elements: Vec<serde_json::Value> = sizes
        .iter()
        .map(|&n| serde_json::json!({ "b": "x".repeat(n), "a": n }))
        .collect();
    let nodes: Vec<serde_json::Value> = sizes
        .iter()
        .map(|&n| {
            let children: Vec<_> = [n, 3, n / 2]
                .iter()
                .map(|&m| serde_json::json!({ "value": m, "byName": { "k": { "children": vec![serde_json::json!({"value": 1}); m / 4] } } }))
                .collect();
            serde_json::json!({ "value": n, "children": children })
        })
        .collect();
    for value in [
        serde_json::json!({ "repNested": elements }),
        serde_json::json!({ "nodes": nodes, "repNested": elements[..3] }),
    ] {
        let json = serde_json::to_vec(&value).unwrap();
        let msgpack = rmp_serde::to_vec(&value).unwrap();
        for (format, input) in [(Format::Json, &json), (Format::Msgpack, &msgpack)] {
            let direct = schema
                .direct_only(&desc, format, Format::Protobuf, input, &opts)
                .expect("the direct path answers");
            let mut want = Vec::new();
            reference::to_protobuf(&desc, format, input, &mut want, &opts).unwrap();
            assert!(
                direct == want,
                "{format:?}: {} vs {} bytes",
                direct.len(),
                want.len()
            );
        }
    }
}

/// A oneof's members in every pair, each value null or not, in both orders and around other
/// fields, from JSON and MessagePack: two members set is an error, a null member is not set,
/// and the direct path agrees with the reference on every one (it never accepts two).
#[test]
fn oneof_members_agree() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    let members = [
        ("oneofUint32", serde_json::json!(7)),
        ("oneofString", serde_json::json!("s")),
        ("oneofBytes", serde_json::json!("AQI=")),
        ("oneofEnum", serde_json::json!("COLOR_RED")),
        ("oneofNested", serde_json::json!({ "a": 1 })),
        ("oneofDouble", serde_json::json!(1.5)),
        ("oneofTimestamp", serde_json::json!("1970-01-01T00:00:01Z")),
        ("oneofValue", serde_json::json!([1, "x"])),
        ("oneofNullValue", serde_json::json!(null)),
    ];
    let mut answered = 0;
    for (a, va) in &members {
        for (b, vb) in &members {
            for (null_a, null_b) in [(false, false), (true, false), (false, true)] {
                let value = |v: &serde_json::Value, null: bool| {
                    if null {
                        serde_json::Value::Null
                    } else {
                        v.clone()
                    }
                };
                let mut object = serde_json::Map::new();
                object.insert("fInt32".into(), serde_json::json!(1));
                object.insert((*a).into(), value(va, null_a));
                object.insert("fString".into(), serde_json::json!("t"));
                object.insert((*b).into(), value(vb, null_b));
                let text = serde_json::to_vec(&object).unwrap();
                let msgpack = rmp_serde::to_vec(&object).unwrap();
                for (format, input) in [(Format::Json, &text), (Format::Msgpack, &msgpack)] {
                    let production =
                        Outcome::run(|o| schema.to_protobuf(&desc, format, input, o, &opts));
                    let reference =
                        Outcome::run(|o| reference::to_protobuf(&desc, format, input, o, &opts));
                    let shown = String::from_utf8_lossy(&text);
                    assert_eq!(
                        diff(&production, &reference),
                        None,
                        "{format:?} {shown}: {production:?} vs {reference:?}"
                    );
                    if let Some(direct) =
                        schema.direct_only(&desc, format, Format::Protobuf, input, &opts)
                    {
                        answered += 1;
                        assert!(reference.res.is_ok(), "{format:?} {shown}: direct accepted");
                        assert_eq!(direct, reference.body(), "{format:?} {shown}");
                    }
                }
            }
        }
    }
    // The direct path answers the plain members (not the well-known types').
    assert!(answered > 50, "{answered}");
}

/// Strings of 0 to 70 characters with one special character — a quote, a backslash, a
/// control character, DEL (not special), a two-, three- or four-byte character — at every
/// place, so that it falls before, on and after each 16- and 32-byte chunk bound of the
/// string scans (`special.rs`), as the last value of the input (the scan's tail near the
/// input's end) and before another field: JSON and MessagePack to protobuf, and the protobuf
/// back to JSON and MessagePack, agree with the reference; the direct path answers all but
/// the JSON strings with escapes.
#[test]
fn strings_with_a_special_character_at_every_place_agree() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    let mut checked = 0;
    for len in 0..=70usize {
        for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', '\u{7f}', 'é', '€', '😀'] {
            for at in 0..len.max(1) {
                let s: String = (0..len)
                    .map(|i| {
                        if i == at {
                            special
                        } else {
                            (b'a' + (i % 26) as u8) as char
                        }
                    })
                    .collect();
                for value in [
                    serde_json::json!({ "fString": s }),
                    serde_json::json!({ "fString": s, "fInt32": 7 }),
                    serde_json::json!({ "repString": [s, s] }),
                ] {
                    let json = serde_json::to_vec(&value).unwrap();
                    let msgpack = rmp_serde::to_vec(&value).unwrap();
                    let mut pb = Vec::new();
                    reference::to_protobuf(&desc, Format::Json, &json, &mut pb, &opts).unwrap();
                    for (format, input) in [(Format::Json, &json), (Format::Msgpack, &msgpack)] {
                        let production =
                            Outcome::run(|o| schema.to_protobuf(&desc, format, input, o, &opts));
                        assert_eq!(production.body(), pb, "{value} from {format:?}");
                        if format == Format::Msgpack
                            || !matches!(special, '"' | '\\' | '\0'..='\u{1f}')
                        {
                            let direct = schema
                                .direct_only(&desc, format, Format::Protobuf, input, &opts)
                                .unwrap_or_else(|| panic!("{value} from {format:?}: handed over"));
                            assert_eq!(direct, pb, "{value} from {format:?}, direct");
                        }
                        let reference = Outcome::run(|o| {
                            reference::from_protobuf(&desc, format, &pb, o, &opts)
                        });
                        let direct = schema
                            .direct_only(&desc, Format::Protobuf, format, &pb, &opts)
                            .unwrap_or_else(|| panic!("{value} to {format:?}: handed over"));
                        assert_eq!(direct, reference.body(), "{value} to {format:?}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 50_000, "{checked}");
}

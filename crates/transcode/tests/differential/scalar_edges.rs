//! Scalar values at the edges of the direct encoder's fast paths against the reference.

use transcode::{Format, Options, reference};

use crate::common::compile_proto;
use crate::harness::{Outcome, diff};

/// Scalar values at the edges of the direct encoder's fast paths (integers as numbers and
/// strings at the 18/19-digit and 32/64-bit bounds, `-0`, floats at the float32 bound,
/// fractions at the exact-division bound, strings, booleans, base64, enum names and numbers)
/// in every scalar field kind — implicit presence, explicit presence and packed — agree with
/// the reference, over compact and spaced JSON, and with input that ends right after a value
/// or a key. Strings of 15 to 129 bytes cross the fixed-size copies and one-byte lengths.
#[test]
fn fast_path_scalar_edges_agree() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    let kinds = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
        "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes", "enum",
    ];
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

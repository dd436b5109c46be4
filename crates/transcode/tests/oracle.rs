//! Conformance against the reference implementation. `tests/oracle/oracle.py` renders random
//! `KitchenSink` messages and parses hand-written and re-parsed JSON with the official Python
//! runtime (`google.protobuf.json_format`, pinned in `tests/oracle/requirements.txt`); every
//! case must come out the same here, apart from the deliberate deviations listed in
//! [`STRICTER`], [`MORE_LENIENT`] and [`UNRESOLVED_ANY`].
//!
//! Needs Python with that protobuf version: `$PROTOGATE_ORACLE_PYTHON`, else
//! `<workspace>/.venv/bin/python` (what `make test` sets up), else `python3`. Without it each
//! test prints one `SKIPPED:` line naming what is missing and passes, unless
//! `PROTOGATE_REQUIRE_ORACLES=1` (set by `make test`, hence CI): then it fails with that line.
//! `PROTOGATE_ORACLE_SHOW=N` prints N mismatches instead of 30.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use transcode::{Findings, Format, MessageDescriptor, Options, Schema};

mod common;
mod external;

use common::{compile_proto, workspace};

const SEED: u64 = 20261129;
const COUNT: usize = 3000;
const PROTOBUF_VERSION: &str = "7.36.2";

/// Parse cases json_format accepts and we reject on purpose: json_format is lax there (mostly
/// Python's int()/float()/b64decode leniency); the proto3 JSON mapping does not allow these.
const STRICTER: &[&str] = &[
    // Integer strings: ASCII digits with an optional '-', nothing else.
    "edge-int32-string-tab",            // "\t42" (json_format rejects " 42")
    "edge-int32-string-newline",        // "42\n"
    "edge-int32-string-underscore",     // "1_000": Python int() digit separators
    "edge-int32-string-plus",           // "+5"
    "edge-int32-string-unicode-digits", // fullwidth digits, fine for Python int()
    // Floats: JSON numbers, or exactly "NaN", "Infinity", "-Infinity".
    "edge-double-inf-lowercase",      // "inf": Python float() spelling
    "edge-double-infinity-lowercase", // "infinity": Python float() spelling
    "edge-double-neg-inf-short",      // "-inf": Python float() spelling
    "edge-double-string-spaces",      // whitespace around a number string
    "edge-double-string-underscore",  // Python float() digit separators ("1_0.5")
    "edge-double-bool",               // true is not a number (json_format reads 1.0)
    "edge-float-overflow-string",     // "3.5e38" is finite; json_format turns it into Infinity
    "edge-double-overflow-string",    // "1e400" is finite; json_format turns it into Infinity
    // google.protobuf.Value holds finite numbers only.
    "edge-value-nan-token",       // NaN is not a JSON token
    "edge-value-infinity-token",  // Infinity is not a JSON token
    "edge-value-overflow-number", // 1e400 overflows a double
    // Bytes: standard or URL-safe base64, padding optional, nothing else.
    "edge-bytes-invalid-chars", // "!!!!": b64decode drops non-alphabet bytes
    "edge-bytes-with-space",    // whitespace inside base64
    "edge-bytes-with-newline",  // whitespace after base64
    "edge-bytes-padding-in-middle", // data after the padding
    "edge-bytes-extra-padding", // more padding than needed
    "edge-bytes-mixed-alphabets", // standard and URL-safe alphabets mixed
    // Enums: a name or an integer.
    "edge-enum-fraction", // 1.5 is not an enum number (json_format truncates to 1)
    "edge-enum-bool",     // true is not an enum number
    // One field once, under either of its names.
    "edge-json-name-and-proto-name-same-field", // fInt32 and f_int32 in one object
    "edge-custom-json-name-both",               // renamedField and custom_named in one object
    // Messages are JSON objects.
    "edge-wrong-type-empty-array-for-message", // [] for a message field
    "edge-root-empty-array",                   // [] for the root message
    // Timestamp: RFC 3339 as the mapping spells it.
    "edge-timestamp-single-digit-fields", // "2017-1-5T1:2:3Z": RFC 3339 fields have fixed width
    "edge-timestamp-offset-out-of-range", // "+99:99" is no UTC offset
    "edge-timestamp-fraction-empty",      // "15.Z": a '.' needs digits
    // Duration: -?digits(.1 to 9 digits)?s.
    "edge-duration-fraction-10-digits", // below nanoseconds (json_format truncates)
    "edge-duration-plus-sign",          // a leading '+'
    "edge-duration-space",              // "1 s"
    "edge-duration-trailing-dot",       // "1.s": a '.' needs digits
    "edge-duration-underscore",         // Python int() digit separators ("1_0s")
    // Any: a well-known type's payload is exactly {"@type", "value"}.
    "edge-any-duration-extra-key", // unknown key next to "value"; json_format ignores it
];

/// A parse case json_format rejects and we accept on purpose, recognised narrowly.
struct Lenient {
    /// A substring of json_format's error.
    error: &'static str,
    /// The error must also contain one of these (the field concerned; `""`: any).
    error_also: &'static [&'static str],
    /// The input must contain one of these.
    input: &'static [&'static str],
    /// Only for cases parsed with `ignore_unknown_fields`.
    ignore_unknown: bool,
    reason: &'static str,
}

/// Parse cases json_format rejects and we accept on purpose, mostly where json_format fails on
/// its own output. What we make of them is checked against the message json_format rendered
/// (`rand-N-json*`) or against [`LENIENT_EDGES`].
const MORE_LENIENT: &[Lenient] = &[
    Lenient {
        error: "Float value too large",
        error_also: &[""],
        input: &["3.4028235e+38", "3.4028235e38"],
        ignore_unknown: false,
        reason: "json_format prints float32's maximum as 3.4028235e+38, a double just above \
                 it; we accept values that round to a finite float32",
    },
    Lenient {
        error: "Float value too small",
        error_also: &[""],
        input: &["-3.4028235e+38", "-3.4028235e38"],
        ignore_unknown: false,
        reason: "the same for float32's minimum",
    },
    Lenient {
        error: "null is not allowed to be used as an element in a repeated field",
        error_also: &["repNullValue", "rep_null_value"],
        input: &["null"],
        ignore_unknown: false,
        reason: "null is the JSON form of NULL_VALUE, also as an element of repeated NullValue",
    },
    Lenient {
        error: "int() argument must be a string, a bytes-like object or a real number, \
                not 'NoneType'",
        error_also: &["mapStringNullValue", "map_string_null_value"],
        input: &["null"],
        ignore_unknown: false,
        reason: "null is the JSON form of NULL_VALUE, also as a value of map<_, NullValue>",
    },
    Lenient {
        error: "does not have extensions",
        error_also: &[""],
        input: &[r#""["#],
        ignore_unknown: true,
        reason: "with ignore_unknown_fields, an extension-style key (\"[foo.bar]\") that the \
                 message cannot have is skipped like any unknown key (as protobuf-go's \
                 DiscardUnknown does); json_format fails on it",
    },
];

/// Our result for the hand-written [`MORE_LENIENT`] cases (rendered with enum numbers).
const LENIENT_EDGES: &[(&str, &str)] = &[
    ("edge-float-max-shortest", r#"{"fFloat": 3.4028235e38}"#),
    ("edge-float-min-shortest", r#"{"fFloat": -3.4028235e38}"#),
    (
        "edge-null-in-repeated-null-value",
        r#"{"repNullValue": [0]}"#,
    ),
    (
        "edge-null-map-value-null-value",
        r#"{"mapStringNullValue": {"a": 0}}"#,
    ),
    ("edge-ignore-unknown-extension-key", "{}"),
];

/// json_format fails a whole rendering on an `Any` whose type the schema lacks; we render it
/// as `{"@type", "value": "<base64>"}` and report it in `Findings::unresolved_any` (see the
/// crate docs). Render cases failing with this error must show that finding instead.
const UNRESOLVED_ANY: &str = "Can not find message descriptor by type_url: ";

// ---------------------------------------------------------------------------------------------
// Running the oracle.
// ---------------------------------------------------------------------------------------------

struct Oracle {
    schema: Schema,
    cases: Vec<Value>,
    elapsed: Duration,
}

/// The oracle's cases, generated once per test binary, or what is missing to generate them.
fn generated() -> &'static Result<Oracle, String> {
    static ORACLE: OnceLock<Result<Oracle, String>> = OnceLock::new();
    ORACLE.get_or_init(run_oracle)
}

/// The oracle for `test`, or `None` after the skip line (a failure when oracles are required).
fn oracle_for(test: &str) -> Option<&'static Oracle> {
    match generated() {
        Ok(o) => Some(o),
        Err(missing) => {
            external::oracle_missing(test, missing, "oracle-env");
            None
        }
    }
}

/// The oracle, once a test has it.
fn oracle() -> &'static Oracle {
    generated()
        .as_ref()
        .expect("the test checked for the oracle")
}

fn python() -> String {
    if let Ok(p) = std::env::var("PROTOGATE_ORACLE_PYTHON")
        && !p.is_empty()
    {
        return p;
    }
    let venv = workspace().join(".venv/bin/python");
    if venv.exists() {
        return venv.to_string_lossy().into_owned();
    }
    "python3".to_owned()
}

/// Python starts in well under a second; a minute allows for a loaded machine.
const PROBE_LIMIT: Duration = Duration::from_secs(60);
/// oracle.py takes about 30 s for its 3,000 cases on a quiet machine.
const ORACLE_LIMIT: Duration = Duration::from_secs(600);

/// Checks that `py` runs and has the pinned protobuf; `Err` says what is missing.
fn check_python(py: &str) -> Result<(), String> {
    let out = external::output(
        Command::new(py).args([
            "-c",
            "import google.protobuf; print(google.protobuf.__version__)",
        ]),
        None,
        PROBE_LIMIT,
    )
    .map_err(|e| {
        format!("Python {py:?} cannot be run ({e}); PROTOGATE_ORACLE_PYTHON selects an interpreter")
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "Python {py:?} cannot import google.protobuf ({})",
            err.trim().lines().last().unwrap_or("no message")
        ));
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if version != PROTOBUF_VERSION {
        return Err(format!(
            "Python {py:?} has protobuf {version}; the oracle is pinned to protobuf=={PROTOBUF_VERSION}"
        ));
    }
    Ok(())
}

fn run_oracle() -> Result<Oracle, String> {
    let root = workspace();
    let schema = compile_proto("test", "kitchen_sink.proto");

    let py = python();
    check_python(&py)?;
    let set = std::env::temp_dir().join(format!(
        "protogate-oracle-{}-kitchen-sink.pb",
        std::process::id()
    ));
    std::fs::write(&set, schema.to_descriptor_set()).expect("write the descriptor set");
    let started = Instant::now();
    let out = external::output(
        Command::new(&py)
            .arg(root.join("tests/oracle/oracle.py"))
            .arg("--descriptor-set")
            .arg(&set)
            .args(["--seed", &SEED.to_string(), "--count", &COUNT.to_string()]),
        None,
        ORACLE_LIMIT,
    );
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&set);
    let out = out.unwrap_or_else(|e| panic!("cannot run {py:?}: {e}"));
    assert!(
        out.status.success(),
        "oracle.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("oracle output is ASCII");
    let cases: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad oracle line ({e}): {l}")))
        .collect();
    assert!(cases.len() > COUNT, "oracle produced {} lines", cases.len());
    Ok(Oracle {
        schema,
        cases,
        elapsed,
    })
}

// ---------------------------------------------------------------------------------------------
// Comparing JSON values.
// ---------------------------------------------------------------------------------------------

/// Structural equality: objects as key sets, numbers by their f64 value (the sign of zero
/// included), strings exactly, arrays in order.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x.to_bits() == y.to_bits(),
            _ => false,
        },
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => false,
    }
}

/// Where two values first differ (`$.a[2].b: expected 1, got 2`), for mismatch reports.
fn first_difference(expected: &Value, got: &Value, path: &str) -> String {
    match (expected, got) {
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                if !same_json(x, y) {
                    return first_difference(x, y, &format!("{path}[{i}]"));
                }
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    None => return format!("{path}.{k}: missing, expected {v}"),
                    Some(w) if !same_json(v, w) => {
                        return first_difference(v, w, &format!("{path}.{k}"));
                    }
                    Some(_) => {}
                }
            }
            if let Some((k, w)) = y.iter().find(|(k, _)| !x.contains_key(*k)) {
                return format!("{path}.{k}: unexpected {w}");
            }
        }
        _ => {}
    }
    format!("{path}: expected {expected}, got {got}")
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|e| panic!("bad base64 from the oracle ({e}): {s}"))
}

/// Renders protobuf bytes as JSON and reads the text back as a value.
fn render(
    desc: &MessageDescriptor,
    bytes: &[u8],
    opts: &Options,
) -> Result<(Value, Findings), String> {
    let mut out = Vec::new();
    let findings = oracle()
        .schema
        .from_protobuf(desc, Format::Json, bytes, &mut out, opts)
        .map_err(|e| format!("render failed: {e}"))?;
    let v = serde_json::from_slice(&out).map_err(|e| {
        format!(
            "rendered invalid JSON ({e}): {}",
            String::from_utf8_lossy(&out)
        )
    })?;
    Ok((v, findings))
}

fn parse(
    desc: &MessageDescriptor,
    format: Format,
    input: &[u8],
    opts: &Options,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    oracle()
        .schema
        .to_protobuf(desc, format, input, &mut out, opts)
        .map_err(|e| format!("parse failed: {e}"))?;
    Ok(out)
}

/// Options for rendering two messages to compare them: enum numbers show what names hide.
fn comparing() -> Options {
    Options {
        enum_numbers: true,
        ..Options::default()
    }
}

/// The four renderings of a render case, by its key.
fn render_variants() -> [(&'static str, Options); 4] {
    [
        ("dict", Options::default()),
        (
            "dict_proto_names",
            Options {
                proto_field_names: true,
                ..Options::default()
            },
        ),
        (
            "dict_enum_ints",
            Options {
                enum_numbers: true,
                ..Options::default()
            },
        ),
        (
            "dict_defaults",
            Options {
                emit_defaults: true,
                ..Options::default()
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping.
// ---------------------------------------------------------------------------------------------

struct Mismatch {
    id: String,
    what: String,
    input: String,
    expected: String,
    got: String,
}

#[derive(Default)]
struct Report {
    counts: BTreeMap<&'static str, usize>,
    mismatches: Vec<Mismatch>,
}

impl Report {
    fn count(&mut self, category: &'static str) {
        *self.counts.entry(category).or_default() += 1;
    }

    fn mismatch(
        &mut self,
        id: &str,
        what: impl Into<String>,
        input: &str,
        expected: impl fmt::Display,
        got: impl fmt::Display,
    ) {
        self.mismatches.push(Mismatch {
            id: id.to_owned(),
            what: what.into(),
            input: input.to_owned(),
            expected: expected.to_string(),
            got: got.to_string(),
        });
    }

    /// Prints the summary; panics with the first mismatches if there are any.
    fn finish(self, title: &str, elapsed: Duration) {
        let mut s = format!("{title} (oracle.py took {elapsed:.1?}):\n");
        for (k, n) in &self.counts {
            let _ = writeln!(s, "  {k:<66} {n:>5}");
        }
        let _ = writeln!(s, "  {:<66} {:>5}", "MISMATCHES", self.mismatches.len());
        eprint!("{s}");
        if self.mismatches.is_empty() {
            return;
        }
        let show = std::env::var("PROTOGATE_ORACLE_SHOW")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(30);
        for m in self.mismatches.iter().take(show) {
            let _ = writeln!(
                s,
                "\n--- {} ({})\n  input:    {}\n  expected: {}\n  got:      {}",
                m.id,
                m.what,
                truncate(&m.input, 300),
                truncate(&m.expected, 300),
                truncate(&m.got, 300)
            );
        }
        if self.mismatches.len() > show {
            let _ = writeln!(s, "\n... and {} more", self.mismatches.len() - show);
        }
        panic!("{s}");
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

fn str_field<'v>(case: &'v Value, key: &str) -> &'v str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("oracle case without {key:?}: {case}"))
}

fn message(o: &Oracle, case: &Value) -> MessageDescriptor {
    let name = str_field(case, "message");
    o.schema
        .message(name)
        .unwrap_or_else(|| panic!("{name} is not in the schema"))
}

// ---------------------------------------------------------------------------------------------
// JSON against json_format.
// ---------------------------------------------------------------------------------------------

#[test]
fn json_matches_json_format() {
    let Some(o) = oracle_for("json_matches_json_format") else {
        return;
    };
    let mut report = Report::default();
    // Protobuf bytes of the render cases, for checking what we accept in `rand-N-json*`.
    let mut rendered: HashMap<&str, Vec<u8>> = HashMap::new();
    let mut seen = BTreeSet::new();
    for case in &o.cases {
        let id = str_field(case, "id");
        seen.insert(id);
        let desc = message(o, case);
        match str_field(case, "kind") {
            "render" => {
                check_render(&mut report, id, &desc, case);
                rendered.insert(id, b64(str_field(case, "proto")));
            }
            "parse" => check_parse(&mut report, id, &desc, case, &rendered),
            other => panic!("unknown case kind {other:?}"),
        }
    }
    for id in STRICTER
        .iter()
        .chain(LENIENT_EDGES.iter().map(|(id, _)| id))
    {
        if !seen.contains(id) {
            report.mismatch(id, "allowlisted id the oracle no longer emits", "", id, "");
        }
    }
    report.finish("JSON against json_format", o.elapsed);
}

fn check_render(report: &mut Report, id: &str, desc: &MessageDescriptor, case: &Value) {
    let proto_b64 = str_field(case, "proto");
    let proto = b64(proto_b64);
    if let Some(err) = case.get("render_error") {
        let err = err.as_str().unwrap_or_default();
        match render(desc, &proto, &Options::default()) {
            Err(_) => report.count("render: both fail"),
            Ok((_, findings))
                if err.strip_prefix(UNRESOLVED_ANY).is_some_and(|url| {
                    findings.unresolved_any.iter().any(|u| u.type_url == url)
                }) =>
            {
                report.count("render: json_format fails, we report the Any (UNRESOLVED_ANY)")
            }
            Ok((v, _)) => report.mismatch(id, "render should fail", proto_b64, err, v),
        }
        return;
    }
    report.count("render: both succeed");
    let expected_unknown: BTreeSet<(String, u32)> = case["unknown"]
        .as_array()
        .expect("unknown list")
        .iter()
        .map(|u| {
            (
                u[0].as_str().expect("path").to_owned(),
                u[1].as_u64().expect("number") as u32,
            )
        })
        .collect();
    if !expected_unknown.is_empty() {
        report.count("render: ... with unknown fields");
    }
    let mut ok = true;
    for (key, opts) in &render_variants() {
        let expected = &case[*key];
        match render(desc, &proto, opts) {
            Err(e) => {
                ok = false;
                report.mismatch(id, format!("render {key}"), proto_b64, expected, e);
            }
            Ok((v, findings)) => {
                if !same_json(&v, expected) {
                    ok = false;
                    let diff = first_difference(expected, &v, "$");
                    report.mismatch(id, format!("render {key}: {diff}"), proto_b64, expected, v);
                }
                let got: BTreeSet<(String, u32)> = findings
                    .unknown_fields
                    .iter()
                    .map(|u| (u.path.clone(), u.number))
                    .collect();
                if got != expected_unknown || got.len() != findings.unknown_fields.len() {
                    ok = false;
                    report.mismatch(
                        id,
                        format!("unknown fields ({key})"),
                        proto_b64,
                        format!("{expected_unknown:?}"),
                        format!("{:?}", findings.unknown_fields),
                    );
                }
            }
        }
    }
    if ok {
        round_trips(report, id, desc, proto_b64, &proto);
    }
}

/// protobuf → JSON → protobuf and protobuf → MessagePack → protobuf give the same message
/// (compared by rendering: the JSON and MessagePack forms drop unknown fields).
fn round_trips(
    report: &mut Report,
    id: &str,
    desc: &MessageDescriptor,
    proto_b64: &str,
    proto: &[u8],
) {
    let opts = Options::default();
    let (reference, _) = render(desc, proto, &comparing()).expect("rendered before");
    for (format, category) in [
        (Format::Json, "round trip: protobuf -> JSON -> protobuf"),
        (
            Format::Msgpack,
            "round trip: protobuf -> MessagePack -> protobuf",
        ),
    ] {
        let mut text = Vec::new();
        let back = oracle()
            .schema
            .from_protobuf(desc, format, proto, &mut text, &opts)
            .map_err(|e| format!("render failed: {e}"))
            .and_then(|_| parse(desc, format, &text, &opts))
            .and_then(|back| render(desc, &back, &comparing()));
        match back {
            Ok((v, _)) if same_json(&v, &reference) => report.count(category),
            Ok((v, _)) => {
                let diff = first_difference(&reference, &v, "$");
                report.mismatch(id, format!("{category}: {diff}"), proto_b64, &reference, v);
            }
            Err(e) => report.mismatch(id, category, proto_b64, &reference, e),
        }
    }
}

fn check_parse(
    report: &mut Report,
    id: &str,
    desc: &MessageDescriptor,
    case: &Value,
    rendered: &HashMap<&str, Vec<u8>>,
) {
    let input = str_field(case, "input");
    let opts = Options {
        ignore_unknown_fields: case
            .get("ignore_unknown")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ..Options::default()
    };
    let ours = parse(desc, Format::Json, input.as_bytes(), &opts);
    let stricter = STRICTER.contains(&id);
    if case["ok"].as_bool() == Some(true) {
        let proto_b64 = str_field(case, "proto");
        if stricter {
            match ours {
                Err(_) => report.count("parse: json_format accepts, we reject (STRICTER)"),
                Ok(_) => report.mismatch(
                    id,
                    "STRICTER, but we accept it",
                    input,
                    "rejection",
                    "success",
                ),
            }
            return;
        }
        let expected = match render(desc, &b64(proto_b64), &comparing()) {
            Ok((v, _)) => v,
            Err(e) => {
                report.mismatch(
                    id,
                    "cannot render json_format's message",
                    input,
                    proto_b64,
                    e,
                );
                return;
            }
        };
        match ours.and_then(|bytes| render(desc, &bytes, &comparing())) {
            Ok((v, _)) if same_json(&v, &expected) => {
                report.count("parse: both accept, same message")
            }
            Ok((v, _)) => {
                let diff = first_difference(&expected, &v, "$");
                report.mismatch(id, format!("parse result: {diff}"), input, expected, v);
            }
            Err(e) => report.mismatch(id, "parse should succeed", input, expected, e),
        }
        return;
    }
    let error = str_field(case, "error");
    if stricter {
        report.mismatch(
            id,
            "STRICTER, but json_format rejects it",
            input,
            "acceptance",
            error,
        );
    }
    let lenient = MORE_LENIENT.iter().find(|l| {
        error.contains(l.error)
            && l.error_also.iter().any(|c| error.contains(c))
            && l.input.iter().any(|i| input.contains(i))
            && l.ignore_unknown == opts.ignore_unknown_fields
    });
    match (ours, lenient) {
        (Err(_), None) => report.count("parse: both reject"),
        (Err(e), Some(l)) => {
            let what = format!("MORE_LENIENT ({}), but we reject it", l.reason);
            report.mismatch(id, what, input, error, e)
        }
        (Ok(bytes), None) => {
            let got = render(desc, &bytes, &comparing())
                .map(|(v, _)| v.to_string())
                .unwrap_or_else(|e| e);
            report.mismatch(id, "parse should fail", input, error, got);
        }
        (Ok(bytes), Some(_)) => {
            // What we accepted must be the message json_format rendered (or the documented one).
            let reference = if let Some(base) = id
                .strip_suffix("-json-proto-names")
                .or_else(|| id.strip_suffix("-json"))
                .and_then(|base| rendered.get(base))
            {
                render(desc, base, &comparing()).map(|(v, _)| v)
            } else if let Some((_, json)) = LENIENT_EDGES.iter().find(|(e, _)| *e == id) {
                Ok(serde_json::from_str(json).expect("LENIENT_EDGES holds JSON"))
            } else {
                Err("no reference: add the id to LENIENT_EDGES".to_owned())
            };
            match (reference, render(desc, &bytes, &comparing())) {
                (Ok(want), Ok((v, _))) if same_json(&want, &v) => {
                    report.count("parse: json_format rejects, we accept (MORE_LENIENT)")
                }
                (Ok(want), Ok((v, _))) => {
                    let diff = first_difference(&want, &v, "$");
                    report.mismatch(id, format!("MORE_LENIENT result: {diff}"), input, want, v);
                }
                (want, got) => report.mismatch(
                    id,
                    "MORE_LENIENT result",
                    input,
                    format!("{want:?}"),
                    format!("{got:?}"),
                ),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MessagePack against json_format's JSON.
// ---------------------------------------------------------------------------------------------

/// A decoded MessagePack value, keeping what JSON loses (binary, float32, integer width).
#[derive(Debug)]
enum Mp {
    Nil,
    Bool(bool),
    Int(i128),
    F32(f32),
    F64(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Mp>),
    Map(Vec<(Mp, Mp)>),
}

struct MpVisitor;

impl<'de> de::Deserialize<'de> for Mp {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Mp, D::Error> {
        d.deserialize_any(MpVisitor)
    }
}

impl<'de> Visitor<'de> for MpVisitor {
    type Value = Mp;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a MessagePack value")
    }
    fn visit_unit<E>(self) -> Result<Mp, E> {
        Ok(Mp::Nil)
    }
    fn visit_none<E>(self) -> Result<Mp, E> {
        Ok(Mp::Nil)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Mp, E> {
        Ok(Mp::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Mp, E> {
        Ok(Mp::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Mp, E> {
        Ok(Mp::Int(v.into()))
    }
    fn visit_f32<E>(self, v: f32) -> Result<Mp, E> {
        Ok(Mp::F32(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Mp, E> {
        Ok(Mp::F64(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Mp, E> {
        Ok(Mp::Str(v.to_owned()))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Mp, E> {
        Ok(Mp::Bin(v.to_vec()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Mp, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Mp::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Mp, A::Error> {
        let mut entries = Vec::new();
        while let Some(kv) = map.next_entry()? {
            entries.push(kv);
        }
        Ok(Mp::Map(entries))
    }
}

fn same_float(x: f64, json: &Value) -> bool {
    match json {
        Value::Number(n) => n.as_f64().is_some_and(|n| n.to_bits() == x.to_bits()),
        Value::String(s) => match s.as_str() {
            "NaN" => x.is_nan(),
            "Infinity" => x == f64::INFINITY,
            "-Infinity" => x == f64::NEG_INFINITY,
            _ => false,
        },
        _ => false,
    }
}

/// The MessagePack mapping is the JSON mapping's shape with native 64-bit integers, binary
/// bytes and native floats: `mp` must be `json` in those terms.
fn same_shape(mp: &Mp, json: &Value) -> bool {
    match (mp, json) {
        (Mp::Nil, Value::Null) => true,
        (Mp::Bool(x), Value::Bool(y)) => x == y,
        (Mp::Int(i), Value::Number(n)) => {
            n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)) == Some(*i)
        }
        (Mp::Int(i), Value::String(s)) => *s == i.to_string(),
        // json_format prints float fields with float32 precision: compare as float32.
        (Mp::F32(x), Value::Number(n)) => n
            .as_f64()
            .is_some_and(|n| (n as f32).to_bits() == x.to_bits()),
        (Mp::F32(x), json) => same_float(f64::from(*x), json),
        (Mp::F64(x), json) => same_float(*x, json),
        (Mp::Str(x), Value::String(y)) => x == y,
        (Mp::Bin(b), Value::String(s)) => base64::engine::general_purpose::STANDARD.encode(b) == *s,
        (Mp::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_shape(x, y))
        }
        (Mp::Map(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| match k {
                    Mp::Str(k) => y.get(k).is_some_and(|w| same_shape(v, w)),
                    _ => false,
                })
        }
        _ => false,
    }
}

#[test]
fn msgpack_matches_json_format_shape() {
    let Some(o) = oracle_for("msgpack_matches_json_format_shape") else {
        return;
    };
    let mut report = Report::default();
    for case in &o.cases {
        if case["kind"] != "render" || case.get("render_error").is_some() {
            continue;
        }
        let id = str_field(case, "id");
        let desc = message(o, case);
        let proto_b64 = str_field(case, "proto");
        let proto = b64(proto_b64);
        for (key, opts) in &render_variants() {
            let mut out = Vec::new();
            let mp = oracle()
                .schema
                .from_protobuf(&desc, Format::Msgpack, &proto, &mut out, opts)
                .map_err(|e| format!("render failed: {e}"))
                .and_then(|_| {
                    let mut de = rmp_serde::Deserializer::new(out.as_slice());
                    let v = de::Deserialize::deserialize(&mut de)
                        .map_err(|e| format!("invalid MessagePack: {e}"))?;
                    if de.get_ref().is_empty() {
                        Ok(v)
                    } else {
                        Err("trailing bytes after the MessagePack value".to_owned())
                    }
                });
            match mp {
                Ok(v) if same_shape(&v, &case[*key]) => report.count("msgpack: same shape"),
                Ok(v) => report.mismatch(
                    id,
                    format!("msgpack {key}"),
                    proto_b64,
                    &case[*key],
                    format!("{v:?}"),
                ),
                Err(e) => report.mismatch(id, format!("msgpack {key}"), proto_b64, &case[*key], e),
            }
        }
    }
    report.finish("MessagePack against json_format's JSON", o.elapsed);
}

// ---------------------------------------------------------------------------------------------
// Without the oracle.
// ---------------------------------------------------------------------------------------------

/// Without Python the oracle's tests skip with one line, unless oracles are required: this
/// test binary, run again on one of them with an interpreter that is not there.
#[test]
fn a_missing_oracle_skips_loudly_or_fails_when_required() {
    assert!(external::oracles_required(Some("1")));
    assert!(!external::oracles_required(None));
    assert!(!external::oracles_required(Some("")));
    assert!(!external::oracles_required(Some("0")));
    external::assert_missing_oracle_skips_or_fails(
        "json_matches_json_format",
        ("PROTOGATE_ORACLE_PYTHON", "/nonexistent/python3"),
        "json_matches_json_format: Python \"/nonexistent/python3\" cannot be run",
        "oracle-env",
        PROBE_LIMIT,
    );
}

//! `[json]` through the real gateway: every rendering option against Python's
//! `json_format.MessageToJson` with the same options (tests/oracle/render_json.py), the
//! overrides per service and method, and the framing of JSON answer streams.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use protogate_tests::{Http, TempDir, library, start_library_toml, workspace};
use serde_json::Value;

use crate::external;
use crate::python::{PYTHON_LIMIT, python};

const ECHO: &str = "/library.v1.Library/Echo";

/// Request bodies of `ListBooksRequest` (Echo answers them unchanged): defaults left out and
/// set, an enum list, a multi-word field, well-known types, one map entry (json_format's
/// map order is its hash order), an explicit-presence field.
const BODIES: &[&str] = &[
    r#"{}"#,
    r#"{"parent":"shelves/1","pageSize":0,"genres":["GENRE_UNSPECIFIED","FICTION"],"includeDrafts":true}"#,
    r#"{"page_token":"t","ids":["1","-2"],"filter":{"author":"A","pages":{}},"cursor":"AAE=","minRating":4.5,"labels":{"k":"v"},"big":"18446744073709551615","note":""}"#,
    r#"{"publishedAfter":"2026-12-07T10:00:00Z","maxAge":"1.5s","minPages":"0","readMask":"pageSize,filter.author"}"#,
];

/// The `[json]` tables each gateway is started with, and the options they mean.
fn settings() -> Vec<(&'static str, [bool; 3], u8)> {
    vec![
        ("", [false, false, false], 0),
        ("emit_unpopulated = true", [true, false, false], 0),
        ("use_proto_names = true", [false, true, false], 0),
        ("enums_as_ints = true", [false, false, true], 0),
        ("indent = 2", [false, false, false], 2),
        (
            "emit_unpopulated = true\nuse_proto_names = true\nenums_as_ints = true\nindent = 4",
            [true, true, true],
            4,
        ),
    ]
}

/// The text with every string, number and literal replaced by `_`: its layout alone.
fn layout(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push('_');
            }
            '{' | '}' | '[' | ']' | ',' | ':' | ' ' | '\n' => out.push(c),
            _ => {
                while chars.peek().is_some_and(|n| !"{}[],: \n".contains(*n)) {
                    chars.next();
                }
                out.push('_');
            }
        }
    }
    out
}

/// What `json_format.MessageToJson` prints for each of `cases` (tests/oracle/render_json.py's
/// input lines), the messages' types in the descriptor set `set`.
pub(crate) fn json_format(py: &str, set: &std::path::Path, cases: String) -> Vec<String> {
    let out = external::output(
        Command::new(py)
            .arg(workspace().join("tests/oracle/render_json.py"))
            .arg(set),
        Some(cases.into_bytes()),
        PYTHON_LIMIT,
    )
    .expect("render_json.py runs");
    assert!(
        out.status.success(),
        "render_json.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_option_renders_as_json_format_does() {
    let test = "each_option_renders_as_json_format_does";
    let Some(py) = python(test, "google.protobuf") else {
        return;
    };
    let dir = TempDir::new("json-options");
    let set = dir.write("library.pb", library::schema().to_descriptor_set());
    let http = Http::h1();
    let mut cases = String::new();
    let mut ours: Vec<(String, String)> = Vec::new();
    for (table, [emit, names, ints], indent) in settings() {
        let s = start_library_toml(&format!("[json]\n{table}\n")).await;
        for body in BODIES {
            let pb = http
                .post(
                    s.gw.addr,
                    ECHO,
                    "application/json",
                    &[("accept", "application/x-protobuf")],
                    *body,
                )
                .await;
            assert_eq!(pb.status, 200, "{body}: {:?}", pb.body);
            let json = http
                .post(s.gw.addr, ECHO, "application/json", &[], *body)
                .await;
            assert_eq!(json.status, 200, "{body}: {:?}", json.body);
            assert_eq!(json.header("content-type"), Some("application/json"));
            use base64::Engine as _;
            let case = serde_json::json!({
                "message": "library.v1.ListBooksRequest",
                "proto": base64::engine::general_purpose::STANDARD.encode(&pb.body),
                "emit_unpopulated": emit,
                "use_proto_names": names,
                "enums_as_ints": ints,
                "indent": indent,
            });
            cases.push_str(&format!("{case}\n"));
            ours.push((
                format!("[json] {table:?}, body {body}"),
                String::from_utf8(json.body.to_vec()).unwrap(),
            ));
        }
        s.gw.stop().await;
        s.backend.stop().await;
    }
    let theirs = json_format(&py, &set, cases);
    assert_eq!(theirs.len(), ours.len());
    for ((what, ours), theirs) in ours.iter().zip(&theirs) {
        let (a, b): (Value, Value) = (
            serde_json::from_str(ours).unwrap(),
            serde_json::from_str(theirs).unwrap(),
        );
        assert_eq!(a, b, "{what}:\nours   {ours}\ntheirs {theirs}");
        // Indented: laid out as json_format lays it out. (With defaults printed, json_format
        // appends the unset fields after the set ones, in declaration order; protogate
        // prints every field in number order: same values, another order.)
        if what.contains("indent = 2") {
            assert_eq!(ours, theirs, "{what}");
        } else if what.contains("indent = 4") {
            assert_eq!(
                layout(ours).len(),
                layout(theirs).len(),
                "{what}:\nours   {ours}\ntheirs {theirs}"
            );
            assert!(
                ours.contains("\n    \"") && !ours.contains(": \n"),
                "{ours}"
            );
        } else {
            assert!(
                !ours.contains('\n') && !ours.contains(' '),
                "{what}: {ours}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_override_wins_over_its_service_and_the_global_table() {
    let s = start_library_toml(
        "[json]\nuse_proto_names = true\n\
         [services.\"library.v1.Library\".json]\nemit_unpopulated = true\n\
         [services.\"library.v1.Library.Echo\".json]\nuse_proto_names = false\nindent = 1\n",
    )
    .await;
    let http = Http::h1();
    let echo = http
        .post(
            s.gw.addr,
            ECHO,
            "application/json",
            &[],
            r#"{"page_size":3}"#,
        )
        .await;
    let text = std::str::from_utf8(&echo.body).unwrap();
    // The method's own (json names, indented), over its service's (defaults printed).
    assert!(
        text.starts_with("{\n \"parent\": \"\",\n \"pageSize\": 3,"),
        "{text}"
    );
    let book = http.get(s.gw.addr, "/v1/shelves/1/books/2").await;
    assert_eq!(book.status, 200, "{:?}", book.body);
    let v = book.json();
    // The service's (defaults printed) over the global table's (proto names).
    assert_eq!(v["tags"], serde_json::json!([]), "{v}");
    assert!(
        v.get("pages").is_some() && !book.body.contains(&b'\n'),
        "{v}"
    );

    // A name that is no service or method stops the start, naming it.
    let text = protogate_tests::gateway_toml(
        "http://127.0.0.1:1",
        protogate_tests::LIBRARY_PROTO,
        "[services.\"library.v1.Library.Nope\".json]\nindent = 2\n",
    );
    let resolved = protogate_tests::config_from_toml(&text, workspace());
    let upstreams = protogate::build_upstreams(&resolved).unwrap();
    let e = edge::Edge::new(library::schema(), upstreams, resolved.edge)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("library.v1.Library.Nope"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_frames_json_answer_streams_that_accept_leaves_open() {
    let s = start_library_toml("[json]\nstream = \"ndjson\"\nindent = 2\n").await;
    let http = Http::h1();
    let watch = "/v1/shelves/1/books:watch?count=2";
    for accept in [None, Some("*/*"), Some("application/json")] {
        let headers: Vec<(&str, &str)> = accept.map(|a| ("accept", a)).into_iter().collect();
        let a = http
            .request("GET", s.gw.addr, watch, &headers, bytes::Bytes::new())
            .await;
        assert_eq!(a.status, 200, "{accept:?}: {:?}", a.body);
        assert_eq!(a.header("content-type"), Some("application/x-ndjson"));
        let text = std::str::from_utf8(&a.body).unwrap();
        // One compact line per message, whatever the indentation of whole answers.
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{accept:?}: {text}");
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            assert!(v["name"].as_str().unwrap().starts_with("shelves/1/books/"));
            assert!(!line.contains(' '), "{line}");
        }
    }
    // A framing Accept names still wins.
    let a = http
        .request(
            "GET",
            s.gw.addr,
            watch,
            &[("accept", "text/event-stream")],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(a.header("content-type"), Some("text/event-stream"));
    // Without the setting: one JSON array, each message indented.
    let plain = start_library_toml("[json]\nindent = 2\n").await;
    let a = http.get(plain.gw.addr, watch).await;
    assert_eq!(a.header("content-type"), Some("application/json"));
    let v = a.json();
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    assert!(a.body.windows(4).any(|w| w == b"\n  \""), "{:?}", a.body);
}

//! Connect (version 1) through the gateway: `@connectrpc/connect-node`'s three transports
//! (tests/clients/connect_client.mjs: Connect JSON and binary over HTTP/1.1 and h2, gRPC-Web,
//! gRPC), and Connect requests by hand — GET, the error JSON, the streaming protocol's
//! envelopes and its end-of-stream message, bad input in Connect's own error form — and REST
//! unchanged without `Connect-Protocol-Version`.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use protogate_tests::{
    Http, TempDir, metric, start_backend, start_gateway_toml, start_library_toml, workspace,
};
use serde_json::{Value, json};

use crate::external;
use crate::grpc_clients::{descriptor_sets, run_client};

/// The Node.js that runs the client, with its packages installed (`make clients-env`,
/// `npm ci` in tests/clients); `None` when missing (after the skip line; a failure when
/// oracles are required).
fn node(test: &str) -> Option<()> {
    let modules = workspace().join("tests/clients/node_modules/@connectrpc/connect-node");
    let probe = external::output(
        Command::new("node").arg("--version"),
        None,
        Duration::from_secs(60),
    );
    let missing = match probe {
        Err(e) => format!("node cannot be run ({e})"),
        Ok(out) if !out.status.success() => "node --version failed".to_owned(),
        Ok(_) if !modules.exists() => format!("{} is not installed", modules.display()),
        Ok(_) => return Some(()),
    };
    external::oracle_missing(test, &missing, "clients-env");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_node_calls_through_every_transport() {
    let test = "connect_node_calls_through_every_transport";
    if node(test).is_none() {
        return;
    }
    let backend = start_backend().await;
    let (svc, _) = start_gateway_toml("", &format!("http://{}", backend.addr)).await;
    let lib = start_library_toml("").await;
    let dir = TempDir::new("connect-node");
    let (svc_pb, lib_pb) = descriptor_sets(&dir);
    let script = workspace().join("tests/clients/connect_client.mjs");
    let (svc_addr, lib_addr) = (svc.addr.to_string(), lib.gw.addr.to_string());
    let mut cmd = Command::new("node");
    cmd.arg(script).args([
        svc_addr.as_ref(),
        svc_pb.as_os_str(),
        lib_addr.as_ref(),
        lib_pb.as_os_str(),
    ]);
    let text = run_client(cmd, Duration::from_secs(180)).await;
    for transport in [
        "connect-json-h1",
        "connect-json-h2",
        "connect-proto-h1",
        "connect-proto-h2",
        "grpc-web-h1",
        "grpc-web-h2",
        "grpc-h2",
    ] {
        assert!(
            text.contains(&format!("ok {transport} ")),
            "{transport}: {text}"
        );
    }
    // Each protocol counted under its name; Connect JSON as JSON, its binary as protobuf.
    let metrics = Http::h1().metrics(svc.addr).await;
    let echo = |format: &str, protocol: &str| {
        format!(
            r#"protogate_requests_total{{method="protogate.test.svc.TestService/Echo",request_format="{format}",response_format="{format}",code="200",grpc_code="OK",protocol="{protocol}"}}"#
        )
    };
    for (format, protocol, calls) in [
        ("json", "connect", 2.0),
        ("protobuf", "connect", 2.0),
        ("protobuf", "grpc-web", 2.0),
        ("protobuf", "grpc", 1.0),
    ] {
        assert_eq!(
            metric(&metrics, &echo(format, protocol)),
            calls,
            "{format} {protocol}: {metrics}"
        );
    }
}

const GET_BOOK: &str = "/library.v1.Library/GetBook";

fn connect_headers(content_type: &str) -> Vec<(&str, &str)> {
    vec![
        ("content-type", content_type),
        ("connect-protocol-version", "1"),
    ]
}

#[tokio::test]
async fn connect_unary_get_and_errors() {
    let s = start_library_toml("").await;
    let gw = s.gw.addr;
    let http = Http::h1();
    // POST, JSON both ways.
    let a = http
        .request(
            "POST",
            gw,
            GET_BOOK,
            &connect_headers("application/json"),
            r#"{"name":"shelves/1/books/2"}"#,
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.json()["title"], "Title of shelves/1/books/2");
    // GET: JSON percent-encoded, and protobuf in base64url.
    let a = http
        .get(
            gw,
            &format!(
                "{GET_BOOK}?connect=v1&encoding=json&message=%7B%22name%22%3A%22shelves%2F1%2Fbooks%2F3%22%7D"
            ),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.json()["title"], "Title of shelves/1/books/3");
    let mut message = vec![0x0a, 17];
    message.extend_from_slice(b"shelves/1/books/4");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&message);
    let a = http
        .get(
            gw,
            &format!("{GET_BOOK}?connect=v1&encoding=proto&base64=1&message={b64}"),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/proto"));
    assert!(
        a.body
            .windows(26)
            .any(|w| w == b"Title of shelves/1/books/4"),
        "{a:?}"
    );
    // The upstream's error: Connect's error JSON under the code's status.
    let a = http
        .request(
            "POST",
            gw,
            GET_BOOK,
            &connect_headers("application/json"),
            r#"{"name":"shelves/1/books/missing"}"#,
        )
        .await;
    assert_eq!(a.status, 404, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(
        a.json(),
        json!({"code": "not_found", "message": "no book shelves/1/books/missing"})
    );
    assert_eq!(
        a.header("grpc-status"),
        None,
        "no gRPC headers on a Connect error"
    );
    // Without Connect-Protocol-Version: REST/HTTP's google.rpc.Status, unchanged.
    let a = http
        .post(
            gw,
            GET_BOOK,
            "application/json",
            &[],
            r#"{"name":"shelves/1/books/missing"}"#,
        )
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["code"], 5);
    assert_eq!(a.header("grpc-status"), Some("5"));

    // Bad input, each in Connect's form.
    // method, path, headers, body; the answer's status, code and words of its message.
    type Case<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, &'a str)>,
        &'a str,
        u16,
        &'a str,
        &'a str,
    );
    let cases: [Case; 6] = [
        (
            "GET",
            "/library.v1.Library/CreateBook?connect=v1&encoding=json&message=%7B%7D",
            vec![],
            "",
            405,
            "unimplemented",
            "NO_SIDE_EFFECTS",
        ),
        (
            "GET",
            "/library.v1.Library/GetBook?connect=v1&encoding=json&message=%zz",
            vec![],
            "",
            400,
            "invalid_argument",
            "bad percent-encoding",
        ),
        (
            "GET",
            "/library.v1.Library/GetBook?connect=v1&encoding=proto&base64=1&message=***",
            vec![],
            "",
            400,
            "invalid_argument",
            "base64url",
        ),
        (
            "POST",
            GET_BOOK,
            vec![
                ("content-type", "application/json"),
                ("connect-protocol-version", "2"),
            ],
            "{}",
            400,
            "invalid_argument",
            "Connect-Protocol-Version",
        ),
        (
            "POST",
            GET_BOOK,
            vec![
                ("content-type", "application/json"),
                ("connect-protocol-version", "1"),
                ("connect-timeout-ms", "soon"),
            ],
            "{}",
            400,
            "invalid_argument",
            "Connect-Timeout-Ms",
        ),
        (
            "POST",
            GET_BOOK,
            connect_headers("application/json"),
            r#"{"nom":"x"}"#,
            400,
            "invalid_argument",
            "nom",
        ),
    ];
    for (method, path, headers, body, status, code, words) in cases {
        let a = http.request(method, gw, path, &headers, body).await;
        assert_eq!(a.status, status, "{path}: {a:?}");
        let error = a.json();
        assert_eq!(error["code"], code, "{path}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(words), "{path}: {message}");
    }
    let metrics = Http::h1().metrics(gw).await;
    let refused = r#"protogate_requests_total{method="library.v1.Library/GetBook",request_format="json",response_format="json",code="400",grpc_code="InvalidArgument",protocol="connect"}"#;
    assert!(metric(&metrics, refused) >= 2.0, "{metrics}");
}

/// A Connect envelope.
fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The envelopes of a Connect stream's body: (flags, message) each.
fn envelopes(mut body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push((body[0], body[5..5 + len].to_vec()));
        body = &body[5 + len..];
    }
    out
}

#[tokio::test]
async fn connect_streams_end_with_their_end_of_stream_message() {
    let s = start_library_toml("").await;
    let gw = s.gw.addr;
    let stream = |ct| vec![("content-type", ct)];
    // Server streaming over HTTP/1.1: the request one envelope, the answers envelopes, the
    // end-of-stream message last.
    let a = Http::h1()
        .request(
            "POST",
            gw,
            "/library.v1.Library/WatchBooks",
            &stream("application/connect+json"),
            envelope(0, br#"{"parent":"shelves/1","count":2}"#),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/connect+json"));
    let frames = envelopes(&a.body);
    assert!(frames.len() >= 2, "{frames:?}");
    let (last_flags, last) = frames.last().unwrap();
    assert_eq!(*last_flags, 2);
    let end: Value = serde_json::from_slice(last).unwrap();
    assert!(end.get("error").is_none(), "{end}");
    for (flags, message) in &frames[..frames.len() - 1] {
        assert_eq!(*flags, 0);
        let book: Value = serde_json::from_slice(message).unwrap();
        assert!(
            book["name"].as_str().unwrap().starts_with("shelves/1"),
            "{book}"
        );
    }
    // Client streaming over h2: every message in, one answer, then the end.
    let books: Vec<u8> = (0..3)
        .flat_map(|i| envelope(0, format!(r#"{{"name":"b{i}","title":"t{i}"}}"#).as_bytes()))
        .collect();
    let a = Http::h2()
        .request(
            "POST",
            gw,
            "/library.v1.Library/ImportBooks",
            &stream("application/connect+json"),
            books.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let frames = envelopes(&a.body);
    assert_eq!(frames.len(), 2, "{frames:?}");
    let answer: Value = serde_json::from_slice(&frames[0].1).unwrap();
    assert_eq!(answer["nextPageToken"], "3", "{answer}");
    assert_eq!(frames[1].0, 2);
    // A stream's error: 200, the error in the end-of-stream message.
    let mut failing = envelope(0, br#"{"title":"ok"}"#);
    failing.extend(envelope(0, br#"{"title":"fail"}"#));
    let a = Http::h2()
        .request(
            "POST",
            gw,
            "/library.v1.Library/ImportBooks",
            &stream("application/connect+json"),
            failing,
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let frames = envelopes(&a.body);
    let (flags, end) = frames.last().unwrap();
    assert_eq!(*flags, 2);
    let end: Value = serde_json::from_slice(end).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument", "{end}");
    assert!(
        end["error"]["message"].as_str().unwrap().contains("book 1"),
        "{end}"
    );
    // Broken envelopes: a compressed one, a truncated one; each named in the end message.
    for (body, words) in [
        (envelope(1, b"x"), "flags 0x01"),
        (books[..books.len() - 2].to_vec(), "ends inside a message"),
    ] {
        let a = Http::h2()
            .request(
                "POST",
                gw,
                "/library.v1.Library/ImportBooks",
                &stream("application/connect+json"),
                body,
            )
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        let frames = envelopes(&a.body);
        let (flags, end) = frames.last().unwrap();
        assert_eq!(*flags, 2, "{words}");
        let end: Value = serde_json::from_slice(end).unwrap();
        assert_eq!(end["error"]["code"], "invalid_argument", "{end}");
        assert!(
            end["error"]["message"].as_str().unwrap().contains(words),
            "{end}"
        );
    }
    // A unary method asked in the streaming protocol: refused, in it.
    let a = Http::h1()
        .request(
            "POST",
            gw,
            GET_BOOK,
            &stream("application/connect+json"),
            envelope(0, b"{}"),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let frames = envelopes(&a.body);
    let end: Value = serde_json::from_slice(&frames.last().unwrap().1).unwrap();
    assert!(
        end["error"]["message"].as_str().unwrap().contains("unary"),
        "{end}"
    );
}

/// A client that moves from REST/JSON to Connect protobuf: the migration view counts it by
/// protocol, and its format mix shows what it sends now.
#[tokio::test]
async fn the_migration_view_sees_a_client_move_from_rest_json_to_connect() {
    let s = start_library_toml("").await;
    let gw = s.gw.addr;
    let http = Http::h2();
    for _ in 0..2 {
        let a = http
            .post(
                gw,
                GET_BOOK,
                "application/json",
                &[("x-client-id", "mover")],
                r#"{"name":"shelves/1/books/1"}"#,
            )
            .await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    let mut message = vec![0x0a, 17];
    message.extend_from_slice(b"shelves/1/books/1");
    for _ in 0..3 {
        let mut headers = connect_headers("application/proto");
        headers.push(("x-client-id", "mover"));
        let a = http
            .request("POST", gw, GET_BOOK, &headers, message.clone())
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.header("content-type"), Some("application/proto"));
    }
    let doc = http.get(gw, "/admin/migration.json").await.json();
    let method = doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "library.v1.Library.GetBook")
        .unwrap_or_else(|| panic!("{doc}"));
    let mover = method["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mover")
        .unwrap_or_else(|| panic!("{method}"));
    assert_eq!(
        mover["protocols"],
        json!({"http": 2, "grpc": 0, "grpc-web": 0, "connect": 3}),
        "{mover}"
    );
    assert_eq!(mover["format_mix"]["json"]["json"], 2, "{mover}");
    assert_eq!(mover["format_mix"]["protobuf"]["protobuf"], 3, "{mover}");
    assert_eq!(mover["json_answers"], 2, "{mover}");
    let page = String::from_utf8_lossy(&http.get(gw, "/admin/migration").await.body).into_owned();
    assert!(
        page.contains(r#"<span class="protocol">connect</span> 3"#),
        "{page}"
    );
}

/// The JSON sunset holds Connect JSON as it holds REST/JSON (refused in Connect's error form,
/// counted as JSON refused); Connect protobuf and gRPC-Web text pass.
#[tokio::test]
async fn the_json_sunset_applies_to_connect_json() {
    let s = start_library_toml(
        "[[json_sunset]]\nselector = \"library.v1.Library.GetBook\"\nsunset = \"2020-01-01T00:00:00Z\"\n",
    )
    .await;
    let gw = s.gw.addr;
    let http = Http::h1();
    let a = http
        .request(
            "POST",
            gw,
            GET_BOOK,
            &connect_headers("application/json"),
            r#"{"name":"shelves/1/books/1"}"#,
        )
        .await;
    assert_eq!(a.status, 415, "{a:?}");
    let error = a.json();
    assert_eq!(error["code"], "failed_precondition", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("ended on 2020-01-01"),
        "{error}"
    );
    let mut message = vec![0x0a, 17];
    message.extend_from_slice(b"shelves/1/books/1");
    let a = http
        .request(
            "POST",
            gw,
            GET_BOOK,
            &connect_headers("application/proto"),
            message.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let text = base64::engine::general_purpose::STANDARD.encode(envelope(0, &message));
    let a = http
        .post(gw, GET_BOOK, "application/grpc-web-text", &[], text)
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        a.header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    let answer = base64::engine::general_purpose::STANDARD
        .decode(&a.body)
        .unwrap();
    let frames = envelopes(&answer);
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[1].0, 0x80);
    assert!(
        String::from_utf8_lossy(&frames[1].1).contains("grpc-status:0\r\n"),
        "{frames:?}"
    );
}

/// Connect stream messages compressed one by one (`Connect-Content-Encoding`, flag 0x01):
/// decoded for the transcoder under the message limit; an unknown coding refused.
#[tokio::test]
async fn connect_stream_messages_may_come_compressed() {
    use std::io::Write;
    let s = start_library_toml("").await;
    let gw = s.gw.addr;
    let gzip = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let headers = [
        ("content-type", "application/connect+json"),
        ("connect-content-encoding", "gzip"),
    ];
    // A client stream: one message compressed, one not.
    let mut body = envelope(1, &gzip(br#"{"name":"b0","title":"zipped"}"#));
    body.extend(envelope(0, br#"{"name":"b1","title":"plain"}"#));
    let a = Http::h2()
        .request(
            "POST",
            gw,
            "/library.v1.Library/ImportBooks",
            &headers,
            body,
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let frames = envelopes(&a.body);
    let answer: Value = serde_json::from_slice(&frames[0].1).unwrap();
    assert_eq!(answer["books"][0]["title"], "zipped", "{answer}");
    assert_eq!(answer["books"][1]["title"], "plain", "{answer}");
    // A server stream's one request message, compressed.
    let a = Http::h1()
        .request(
            "POST",
            gw,
            "/library.v1.Library/WatchBooks",
            &headers,
            envelope(1, &gzip(br#"{"parent":"shelves/9","count":1}"#)),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let frames = envelopes(&a.body);
    let book: Value = serde_json::from_slice(&frames[0].1).unwrap();
    assert_eq!(book["name"], "shelves/9/books/0", "{book}");
    // Not gzip data under gzip, and a coding the gateway does not read.
    for (coding, body, words) in [
        ("gzip", envelope(1, b"not gzip"), "not valid gzip"),
        ("lzma", envelope(1, b"x"), "lzma"),
    ] {
        let a = Http::h2()
            .request(
                "POST",
                gw,
                "/library.v1.Library/ImportBooks",
                &[
                    ("content-type", "application/connect+json"),
                    ("connect-content-encoding", coding),
                ],
                body,
            )
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        let frames = envelopes(&a.body);
        let end: Value = serde_json::from_slice(&frames.last().unwrap().1).unwrap();
        let message = end["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{coding}: {end}");
    }
}

//! gRPC and gRPC-Web clients no one here wrote, against the real gateway: Python's grpcio
//! (tests/clients/grpcio_client.py) for every call shape; and the gateway's own answers to
//! what such clients must never be sent (gRPC over HTTP/1.1, broken envelopes, an unknown
//! message coding), each in gRPC's error form, counted under `protocol`.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use protogate_tests::{
    Http, TempDir, compile_proto, library, metric, start_backend, start_gateway_toml,
    start_library_toml, workspace,
};

use crate::external;
use crate::python::python;

/// The backends' descriptor sets, for the client scripts to build their messages from: the
/// test service's v2 (which knows fields the gateway's v1 lacks) and the library's, in `dir`.
pub(crate) fn descriptor_sets(dir: &TempDir) -> (std::path::PathBuf, std::path::PathBuf) {
    let svc = dir.write(
        "svc.pb",
        compile_proto("test/svc/v2", "testsvc.proto").to_descriptor_set(),
    );
    (
        svc,
        dir.write("library.pb", library::schema().to_descriptor_set()),
    )
}

/// Runs a client script to its end (off the runtime's threads, killed past `limit`); fails
/// the test unless it exits 0 having printed `all checks passed`. Returns what it printed.
pub(crate) async fn run_client(mut cmd: Command, limit: Duration) -> String {
    let out = tokio::task::spawn_blocking(move || external::output(&mut cmd, None, limit))
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all checks passed"), "{text}");
    text
}

/// The test service's backend (v2) behind a gateway with the v1 schema, and the library
/// service behind another.
struct Stacks {
    svc: (protogate_tests::Running, protogate_tests::Running),
    library: library::Stack,
}

async fn stacks(toml: &str) -> Stacks {
    let backend = start_backend().await;
    let (gw, _) = start_gateway_toml(toml, &format!("http://{}", backend.addr)).await;
    Stacks {
        svc: (backend, gw),
        library: start_library_toml(toml).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_calls_every_shape_through_the_gateway() {
    let test = "grpcio_calls_every_shape_through_the_gateway";
    let Some(py) = python(test, "grpc") else {
        return;
    };
    let s = stacks("").await;
    let dir = TempDir::new("grpcio");
    let (svc, lib) = descriptor_sets(&dir);
    let script = workspace().join("tests/clients/grpcio_client.py");
    let (svc_addr, lib_addr) = (s.svc.1.addr.to_string(), s.library.gw.addr.to_string());
    let mut cmd = Command::new(py);
    cmd.arg(script).args([
        svc.as_os_str(),
        svc_addr.as_ref(),
        lib.as_os_str(),
        lib_addr.as_ref(),
    ]);
    run_client(cmd, Duration::from_secs(120)).await;
    // Counted as gRPC, protobuf both ways.
    let metrics = Http::h1().metrics(s.svc.1.addr).await;
    let echo = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="protobuf",response_format="protobuf",code="200",grpc_code="OK",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, echo), 1.0, "{metrics}");
    let fail = r#"protogate_requests_total{method="protogate.test.svc.TestService/Fail",request_format="protobuf",response_format="protobuf",code="200",grpc_code="NotFound",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, fail), 1.0, "{metrics}");
}

fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

const ECHO: &str = "/protogate.test.svc.TestService/Echo";

/// The status of an answer's trailers, else its head: (`grpc-status`, `grpc-message`).
fn status(a: &protogate_tests::Answer) -> (Option<String>, String) {
    let fields = a.trailers.as_ref().unwrap_or(&a.headers);
    let text = |name| {
        fields
            .get(name)
            .map(|v: &http::HeaderValue| v.to_str().unwrap().to_owned())
    };
    (
        text("grpc-status"),
        text("grpc-message").unwrap_or_default(),
    )
}

#[tokio::test]
async fn bad_grpc_requests_are_refused_in_grpcs_form() {
    let s = stacks("max_body_bytes = 1024\n").await;
    let gw = s.svc.1.addr;
    let grpc = |extra: &[(&'static str, &'static str)]| {
        let mut headers = vec![("content-type", "application/grpc"), ("te", "trailers")];
        headers.extend_from_slice(extra);
        headers
    };
    // gRPC over HTTP/1.1: refused, with an HTTP status a person reading it understands.
    let a = Http::h1()
        .request("POST", gw, ECHO, &grpc(&[]), envelope(0, b""))
        .await;
    assert_eq!(a.status, 501);
    let (code, message) = status(&a);
    assert_eq!(code.as_deref(), Some("12"));
    assert!(message.contains("HTTP/2"), "{message}");

    // The cases below are trailers-only answers (status 200, the status in the head), all on
    // one HTTP/2 connection, which each refusal leaves intact.
    let h2 = Http::h2();
    let truncated = envelope(0, b"\x08\x07")[..5].to_vec();
    for (what, headers, body, want_code, want_words) in [
        (
            "truncated",
            grpc(&[]),
            truncated,
            "3",
            "ends inside message 1",
        ),
        (
            "too long",
            grpc(&[]),
            envelope(0, &[0u8; 2000]),
            "8",
            "1024",
        ),
        ("flags", grpc(&[]), envelope(4, b""), "3", "flags byte 0x04"),
        (
            "compressed, no coding",
            grpc(&[]),
            envelope(1, b"x"),
            "3",
            "no grpc-encoding",
        ),
        (
            "unknown coding",
            grpc(&[("grpc-encoding", "lzma")]),
            envelope(1, b"x"),
            "12",
            "lzma",
        ),
        (
            "gRPC-Web text, not base64",
            vec![("content-type", "application/grpc-web-text")],
            b"AAAA*AAA".to_vec(),
            "3",
            "not base64",
        ),
    ] {
        let a = h2.request("POST", gw, ECHO, &headers, body).await;
        assert_eq!(a.status, 200, "{what}");
        let (code, message) = status(&a);
        assert_eq!(code.as_deref(), Some(want_code), "{what}: {message} {a:?}");
        assert!(message.contains(want_words), "{what}: {message}");
        assert!(a.body.is_empty(), "{what}");
    }
    // An unknown method: UNIMPLEMENTED in the head, no HTTP error page.
    let a = h2
        .request(
            "POST",
            gw,
            "/protogate.test.svc.TestService/Nope",
            &grpc(&[]),
            envelope(0, b""),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(status(&a).0.as_deref(), Some("12"));
    assert!(a.body.is_empty());
    // A good call after all of them, and the refusals counted under protocol="grpc".
    let a = h2
        .request("POST", gw, ECHO, &grpc(&[]), envelope(0, b"\x08\x07"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body.as_ref(), envelope(0, b"\x08\x07"));
    assert_eq!(status(&a).0.as_deref(), Some("0"));
    let metrics = Http::h1().metrics(gw).await;
    let refused = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="protobuf",response_format="protobuf",code="200",grpc_code="InvalidArgument",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, refused), 3.0, "{metrics}");
    // gRPC-Web over HTTP/1.1: a truncated body is answered in gRPC-Web's form.
    let a = Http::h1()
        .request(
            "POST",
            gw,
            ECHO,
            &[("content-type", "application/grpc-web+proto")],
            envelope(0, b"\x08\x07")[..6].to_vec(),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/grpc-web+proto"));
    let (code, message) = status(&a);
    assert_eq!(code.as_deref(), Some("3"), "{message}");
    assert!(message.contains("ends inside message 1"), "{message}");
}

/// A gzip-compressed message (flags 1, `grpc-encoding: gzip`) goes to an upstream that takes
/// gzip as it came, and its compressed answer comes back as the upstream sent it.
#[tokio::test]
async fn compressed_messages_are_relayed_as_they_are() {
    use std::io::{Read, Write};
    let backend = protogate_tests::start_gzip_backend(true).await;
    let (gw, _) = start_gateway_toml("", &format!("http://{}", backend.addr)).await;
    let thing = protogate_tests::encode(&protogate_tests::pb::Thing {
        id: 7,
        name: "compressed".into(),
        ..Default::default()
    });
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&thing).unwrap();
    let compressed = gz.finish().unwrap();
    let a = Http::h2()
        .request(
            "POST",
            gw.addr,
            ECHO,
            &[
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-encoding", "gzip"),
                ("grpc-accept-encoding", "gzip"),
            ],
            envelope(1, &compressed),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(status(&a).0.as_deref(), Some("0"), "{a:?}");
    assert_eq!(a.header("grpc-encoding"), Some("gzip"), "{a:?}");
    assert_eq!(a.body[0], 1, "the answer's message stays compressed");
    let mut answer = Vec::new();
    flate2::read::GzDecoder::new(&a.body[5..])
        .read_to_end(&mut answer)
        .unwrap();
    assert_eq!(answer, thing);
}

/// A gRPC-Web server stream over HTTP/1.1 is delivered as it arrives: the first message
/// reaches the client while the upstream holds the stream open, the trailers frame after.
#[tokio::test]
async fn grpc_web_server_streams_are_delivered_as_they_arrive() {
    use http_body_util::BodyExt;
    let s = start_library_toml("").await;
    // WatchRequest{parent: "shelves/1", count: 2}
    let mut request = vec![0x0a, 9];
    request.extend_from_slice(b"shelves/1");
    request.extend_from_slice(&[0x10, 2]);
    let req = http::Request::post(format!(
        "http://{}/library.v1.Library/WatchBooks",
        s.gw.addr
    ))
    .header("content-type", "application/grpc-web+proto")
    .header("x-test-stream", "hold")
    .body(http_body_util::Full::new(bytes::Bytes::from(envelope(
        0, &request,
    ))))
    .unwrap();
    let response = Http::h1().open(req).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let patience = Duration::from_secs(30);
    let first = protogate_tests::within("the first book", patience, body.frame())
        .await
        .expect("a frame")
        .expect("no error")
        .into_data()
        .expect("data");
    // One message, and nothing else (no trailers frame) while the upstream holds the stream.
    assert_eq!(first[0], 0, "a message first: {first:?}");
    let len = u32::from_be_bytes([first[1], first[2], first[3], first[4]]) as usize;
    assert_eq!(first.len(), 5 + len, "{first:?}");
    s.stats.release.notify_one();
    let rest = protogate_tests::within("the rest", patience, body.collect())
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8_lossy(&rest);
    assert!(text.contains("grpc-status:0"), "{text}");
}

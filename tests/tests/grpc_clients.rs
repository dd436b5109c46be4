//! gRPC and gRPC-Web clients no one here wrote, against the real gateway: Python's grpcio
//! (tests/clients/grpcio_client.py) for every call shape; and the gateway's own answers to
//! what such clients must never be sent (gRPC over HTTP/1.1, broken envelopes, an unknown
//! message coding), each in gRPC's error form, counted under `protocol`.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Full};
use protogate_tests::{
    Http, TempDir, compile_proto, library, metric, start_backend, start_gateway_toml,
    start_library_toml, workspace,
};

use crate::external;
use crate::python::python;

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
    let svc = dir.write(
        "svc.pb",
        compile_proto("test/svc/v2", "testsvc.proto").to_descriptor_set(),
    );
    let lib = dir.write("library.pb", library::schema().to_descriptor_set());
    let script = workspace().join("tests/clients/grpcio_client.py");
    let (svc_addr, lib_addr) = (s.svc.1.addr.to_string(), s.library.gw.addr.to_string());
    let out = tokio::task::spawn_blocking(move || {
        external::output(
            Command::new(py).arg(script).args([
                svc.as_os_str(),
                svc_addr.as_ref(),
                lib.as_os_str(),
                lib_addr.as_ref(),
            ]),
            None,
            Duration::from_secs(120),
        )
    })
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
    // Counted as gRPC, protobuf both ways.
    let metrics = Http::h1().metrics(s.svc.1.addr).await;
    let echo = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="protobuf",response_format="protobuf",code="200",grpc_code="OK",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, echo), 1.0, "{metrics}");
    let fail = r#"protogate_requests_total{method="protogate.test.svc.TestService/Fail",request_format="protobuf",response_format="protobuf",code="200",grpc_code="NotFound",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, fail), 1.0, "{metrics}");
}

/// A gRPC request by hand: `body` as the request's bytes over `version`.
async fn grpc_request(
    addr: std::net::SocketAddr,
    version: Version,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (http::response::Parts, Bytes, Option<http::HeaderMap>) {
    let http = if version == Version::HTTP_2 {
        Http::h2()
    } else {
        Http::h1()
    };
    let mut req = Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = http
        .open(req.body(Full::new(Bytes::from(body))).unwrap())
        .await;
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    (parts, collected.to_bytes(), trailers)
}

fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

const ECHO: &str = "/protogate.test.svc.TestService/Echo";

#[tokio::test]
async fn bad_grpc_requests_are_refused_in_grpcs_form() {
    let s = stacks("max_body_bytes = 1024\n").await;
    let gw = s.svc.1.addr;
    let status = |h: &http::HeaderMap| {
        (
            h.get("grpc-status").map(|v| v.to_str().unwrap().to_owned()),
            h.get("grpc-message")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
        )
    };
    // gRPC over HTTP/1.1: refused, with an HTTP status a person reading it understands.
    let (head, _, _) = grpc_request(gw, Version::HTTP_11, ECHO, &[], envelope(0, b"")).await;
    assert_eq!(head.status, 501);
    let (code, message) = status(&head.headers);
    assert_eq!(code.as_deref(), Some("12"));
    assert!(message.contains("HTTP/2"), "{message}");

    // The cases below are trailers-only answers (status 200, the status in the head).
    for (what, headers, body, want_code, want_words) in [
        (
            "truncated",
            vec![],
            envelope(0, b"\x08\x07")[..5].to_vec(),
            "3",
            "ends inside message 1",
        ),
        ("too long", vec![], envelope(0, &[0u8; 2000]), "8", "1024"),
        ("flags", vec![], envelope(4, b""), "3", "flags byte 0x04"),
        (
            "compressed, no coding",
            vec![],
            envelope(1, b"x"),
            "3",
            "no grpc-encoding",
        ),
        (
            "unknown coding",
            vec![("grpc-encoding", "lzma")],
            envelope(1, b"x"),
            "12",
            "lzma",
        ),
    ] {
        let (head, body, trailers) = grpc_request(gw, Version::HTTP_2, ECHO, &headers, body).await;
        assert_eq!(head.status, 200, "{what}");
        let fields = trailers.as_ref().unwrap_or(&head.headers);
        let (code, message) = status(fields);
        assert_eq!(
            code.as_deref(),
            Some(want_code),
            "{what}: {message} {head:?}"
        );
        assert!(message.contains(want_words), "{what}: {message}");
        assert!(body.is_empty(), "{what}");
    }
    // An unknown method: UNIMPLEMENTED in the head, no HTTP error page.
    let (head, body, _) = grpc_request(
        gw,
        Version::HTTP_2,
        "/protogate.test.svc.TestService/Nope",
        &[],
        envelope(0, b""),
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(status(&head.headers).0.as_deref(), Some("12"));
    assert!(body.is_empty());
    // A good call after all of them, and the refusals counted under protocol="grpc".
    let (head, body, trailers) =
        grpc_request(gw, Version::HTTP_2, ECHO, &[], envelope(0, b"\x08\x07")).await;
    assert_eq!(head.status, 200);
    assert_eq!(body.as_ref(), envelope(0, b"\x08\x07"));
    assert_eq!(status(&trailers.unwrap()).0.as_deref(), Some("0"));
    let metrics = Http::h1().metrics(gw).await;
    let refused = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="protobuf",response_format="protobuf",code="200",grpc_code="InvalidArgument",protocol="grpc"}"#;
    assert_eq!(metric(&metrics, refused), 3.0, "{metrics}");
}

//! An upstream's own status reaches the client exactly as the upstream sent it — code,
//! message, details, metadata — whatever the code, on unary and streaming calls alike; only
//! the gateway's own failure to get an answer is put in the gateway's words.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use http::{HeaderValue, Response};
use protogate_tests::{Http, start_gateway, within};
use tokio::net::TcpListener;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const WATCH: &str = "/protogate.test.svc.TestService/Watch";

/// What a raw upstream answers every call with.
#[derive(Clone, Copy, Default)]
struct Reply {
    /// A message, then status 0 in the trailers; without one, a trailers-only status.
    message: Option<&'static [u8]>,
    code: &'static str,
    text: &'static str,
    details: Option<&'static str>,
}

/// A trailers-only status: `grpc-status`, `grpc-message` and one metadata header.
async fn refusing_upstream(code: &'static str, text: &'static str) -> std::net::SocketAddr {
    raw_upstream(Reply {
        code,
        text,
        ..Reply::default()
    })
    .await
}

/// A raw HTTP/2 upstream on 127.0.0.1:0 that answers every call with `reply`, exactly as
/// given, and an `x-zone: b` metadata header.
async fn raw_upstream(reply: Reply) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((_, mut respond))) = conn.accept().await {
                    let mut head = Response::new(());
                    let h = head.headers_mut();
                    h.insert("content-type", HeaderValue::from_static("application/grpc"));
                    h.insert("x-zone", HeaderValue::from_static("b"));
                    let mut status = http::HeaderMap::new();
                    status.insert("grpc-status", HeaderValue::from_static(reply.code));
                    if !reply.text.is_empty() {
                        status.insert("grpc-message", HeaderValue::from_static(reply.text));
                    }
                    if let Some(details) = reply.details {
                        status.insert("grpc-status-details-bin", HeaderValue::from_static(details));
                    }
                    let Some(message) = reply.message else {
                        h.extend(status);
                        let _ = respond.send_response(head, true);
                        continue;
                    };
                    let Ok(mut send) = respond.send_response(head, false) else {
                        continue;
                    };
                    let mut framed = vec![0u8];
                    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                    framed.extend_from_slice(message);
                    let _ = send.send_data(framed.into(), false);
                    let _ = send.send_trailers(status);
                }
            });
        }
    });
    addr
}

/// The gateway's answer to `{}` as JSON at `path` (HTTP/2), under a deadline.
async fn ask(gw: std::net::SocketAddr, path: &str, accept: &str) -> protogate_tests::Answer {
    within(
        "the gateway's answer",
        Duration::from_secs(30),
        Http::h2().post(gw, path, "application/json", &[("accept", accept)], "{}"),
    )
    .await
}

fn status_of(a: &protogate_tests::Answer) -> (u16, serde_json::Value, Option<&str>) {
    (
        a.status.as_u16(),
        a.json(),
        a.header("grpc-metadata-x-zone"),
    )
}

#[tokio::test]
async fn an_upstream_unavailable_status_is_passed_on_as_sent() {
    let upstream = refusing_upstream("14", "backend says UNAVAILABLE").await;
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    for (path, accept) in [
        (ECHO, "application/json"),
        // A server stream: the tonic channel's path, the status before the first message.
        (WATCH, "application/x-ndjson"),
    ] {
        let a = ask(gw.addr, path, accept).await;
        assert_eq!(
            status_of(&a),
            (
                503,
                serde_json::json!({"code": 14, "message": "backend says UNAVAILABLE"}),
                Some("b")
            ),
            "{path}"
        );
        assert_eq!(a.header("grpc-status"), Some("14"), "{path}");
        assert_eq!(
            a.header("grpc-message"),
            Some("backend says UNAVAILABLE"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn every_upstream_code_is_passed_on_with_its_message() {
    // Codes the gateway also produces itself (deadline, resource limits, internal errors) are
    // still the upstream's when the upstream sends them (the deadline is far away here).
    for (code, http_status) in [("4", 504), ("8", 429), ("13", 500), ("2", 500), ("14", 503)] {
        let upstream = refusing_upstream(code, "said the backend").await;
        let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
        for (path, accept) in [(ECHO, "application/json"), (WATCH, "application/x-ndjson")] {
            let a = ask(gw.addr, path, accept).await;
            let code_number: i64 = code.parse().unwrap();
            assert_eq!(
                status_of(&a),
                (
                    http_status,
                    serde_json::json!({"code": code_number, "message": "said the backend"}),
                    Some("b")
                ),
                "code {code}, {path}"
            );
        }
    }
}

#[tokio::test]
async fn an_upstream_status_keeps_its_details() {
    // google.rpc.Status{code: 14, message: "m", details: [Any{type_url:
    // "type.googleapis.com/google.rpc.RetryInfo", value: RetryInfo{retry_delay: 3s}}]}.
    const DETAILS: &str =
        "CA4SAW0aMAoodHlwZS5nb29nbGVhcGlzLmNvbS9nb29nbGUucnBjLlJldHJ5SW5mbxIECgIIAw";
    let upstream = raw_upstream(Reply {
        code: "14",
        text: "m",
        details: Some(DETAILS),
        ..Reply::default()
    })
    .await;
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    for (path, accept) in [(ECHO, "application/json"), (WATCH, "application/x-ndjson")] {
        let a = ask(gw.addr, path, accept).await;
        assert_eq!(
            status_of(&a),
            (
                503,
                serde_json::json!({"code": 14, "message": "m", "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
                ]}),
                Some("b")
            ),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_gateway_that_cannot_reach_its_upstream_says_so() {
    // A port with a bound socket that never listens: connections to it are refused.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let nowhere = socket.local_addr().expect("addr");
    let (gw, _) = start_gateway(&format!("http://{nowhere}"), Default::default()).await;
    for (path, accept) in [(ECHO, "application/json"), (WATCH, "application/x-ndjson")] {
        let a = ask(gw.addr, path, accept).await;
        assert_eq!(a.status, 503, "{path}");
        assert_eq!(a.json()["code"], 14, "{path}");
        let message = a.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.starts_with("upstream ") && message.contains(&nowhere.to_string()),
            "{path}: {message}"
        );
        assert!(
            a.headers
                .keys()
                .all(|k| !k.as_str().starts_with("grpc-metadata-")),
            "{path}: {:?}",
            a.headers
        );
    }
    drop(socket);
}

#[tokio::test]
async fn an_upstream_answer_that_does_not_render_is_the_upstreams_problem() {
    // Thing.id (int64) as a varint longer than 64 bits: protobuf passes it through, JSON
    // cannot render it.
    let upstream = raw_upstream(Reply {
        message: Some(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ]),
        code: "0",
        ..Reply::default()
    })
    .await;
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    let a = ask(gw.addr, ECHO, "application/json").await;
    assert_eq!(a.status, 502, "{:?}", a.json());
    assert_eq!(a.json()["code"], 13);
    let message = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("the upstream's answer does not render as json"),
        "{message}"
    );
    // As protobuf it passes through as it came: the client may read it as it can.
    let a = ask(gw.addr, ECHO, "application/x-protobuf").await;
    assert_eq!(a.status, 200);
}

/// A raw HTTP/2 upstream on 127.0.0.1:0 that takes each connection's first call, sends the
/// answer's head and `messages` Thing messages, and then dies: GOAWAY with INTERNAL_ERROR and
/// the connection closed (the soak's upstream killed under a call).
async fn dying_upstream(messages: usize) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                let Some(Ok((_, mut respond))) = conn.accept().await else {
                    return;
                };
                if messages > 0 {
                    let mut head = Response::new(());
                    head.headers_mut()
                        .insert("content-type", HeaderValue::from_static("application/grpc"));
                    if let Ok(mut send) = respond.send_response(head, false) {
                        for _ in 0..messages {
                            // Thing { name: "a" }
                            let framed = vec![0, 0, 0, 0, 3, 0x12, 0x01, b'a'];
                            let _ = send.send_data(framed.into(), false);
                        }
                    }
                }
                // The messages out first: a PING answered after them (the connection is
                // driven meanwhile) means they were written.
                if let Some(mut ping_pong) = conn.ping_pong() {
                    tokio::select! {
                        _ = ping_pong.ping(h2::Ping::opaque()) => {}
                        _ = async { while let Some(Ok(_)) = conn.accept().await {} } => {}
                    }
                }
                conn.abrupt_shutdown(h2::Reason::INTERNAL_ERROR);
                let _ = std::future::poll_fn(|cx| conn.poll_closed(cx)).await;
            });
        }
    });
    addr
}

/// An upstream that dies under a stream is the gateway's failure to get an answer: 503 / 14
/// before the first message, a status record with 14 after it — never tonic's UNKNOWN
/// "transport error" (500) or INTERNAL "h2 protocol error" (found by the soak).
#[tokio::test]
async fn an_upstream_that_dies_under_a_stream_is_unavailable() {
    let upstream = dying_upstream(0).await;
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    let a = ask(gw.addr, WATCH, "application/x-ndjson").await;
    assert_eq!(a.status, 503, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["code"], 14, "{:?}", a.json());

    let upstream = dying_upstream(1).await;
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    let a = ask(gw.addr, WATCH, "application/x-ndjson").await;
    assert_eq!(a.status, 200);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&a.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(
        last["@error"]["code"],
        14,
        "the status record: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    assert_eq!(
        a.trailers.as_ref().and_then(|t| t.get("grpc-status")),
        Some(&HeaderValue::from_static("14"))
    );
}

/// A stream the upstream never answers, past the client's deadline: 504 / 4 — tonic's own
/// timer ("Timeout expired", CANCELLED) is the deadline, not a lost connection (the soak
/// found it answered 503).
#[tokio::test]
async fn a_stream_the_upstream_never_answers_times_out_as_504() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                // Calls taken and held: never answered.
                let mut held = Vec::new();
                while let Some(Ok(call)) = conn.accept().await {
                    held.push(call);
                }
            });
        }
    });
    let (gw, _) = start_gateway(&format!("http://{upstream}"), Default::default()).await;
    for accept in ["application/x-ndjson", "application/json"] {
        let a = within(
            "the gateway's answer",
            Duration::from_secs(30),
            Http::h2().post(
                gw.addr,
                WATCH,
                "application/json",
                &[("accept", accept), ("grpc-timeout", "300m")],
                "{}",
            ),
        )
        .await;
        assert_eq!(
            a.status,
            504,
            "{accept}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(a.json()["code"], 4, "{accept}");
    }
}

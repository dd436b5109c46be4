//! Load shedding: over `max_concurrent_requests`, `max_concurrent_requests_per_upstream` or
//! `max_inflight_bytes` a request is answered 503 at once, with `Retry-After`, a Status body
//! naming the limit, and `protogate_shed_total{reason}` counting it; never queued. What was
//! taken is given back when a request ends, however it ends. Each limit is set by its key in
//! a configuration file, read by the binary's loader.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use protogate_tests::{Http, eventually, metric, start_backend, start_gateway_toml};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const SLOW: &str = "/protogate.test.svc.TestService/Slow";
const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const PATIENCE: Duration = Duration::from_secs(30);

/// A Slow call that holds its place for a minute, sent on a raw connection: dropping the
/// connection ends it.
async fn slow_call(addr: std::net::SocketAddr) -> TcpStream {
    let body = r#"{"delay":"60s"}"#;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {SLOW} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

fn assert_shed(a: &protogate_tests::Answer, limit: &str) {
    assert_eq!(a.status, 503, "{:?}", a.body);
    assert_eq!(a.header("retry-after"), Some("1"));
    let status: Value = a.json();
    assert_eq!(status["code"], 14, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.contains(limit), "{message}");
}

async fn echo(http: &Http, addr: std::net::SocketAddr, body: &str) -> protogate_tests::Answer {
    http.post(addr, ECHO, "application/json", &[], body.to_owned())
        .await
}

#[tokio::test]
async fn requests_past_max_concurrent_requests_are_shed_until_one_ends() {
    let backend = start_backend().await;
    let config = "max_concurrent_requests = 2\n";
    let (gw, edge) = start_gateway_toml(config, &format!("http://{}", backend.addr)).await;
    let in_flight = || metric(&edge.metrics().render(), "protogate_requests_in_flight");
    let one = slow_call(gw.addr).await;
    let _two = slow_call(gw.addr).await;
    eventually("two calls in flight", PATIENCE, || {
        (in_flight() == 2.0).then_some(())
    })
    .await;
    let http = Http::h1();
    for _ in 0..3 {
        assert_shed(&echo(&http, gw.addr, "{}").await, "max_concurrent_requests");
    }
    let text = http.metrics(gw.addr).await;
    assert_eq!(
        metric(&text, r#"protogate_shed_total{reason="concurrency"}"#),
        3.0,
        "{text}"
    );
    // Health and metrics are answered whatever the load.
    assert_eq!(http.get(gw.addr, "/healthz").await.status, 200);
    // A call that ends gives its place back.
    drop(one);
    eventually("the dropped call to end", PATIENCE, || {
        (in_flight() == 1.0).then_some(())
    })
    .await;
    assert_eq!(echo(&http, gw.addr, "{}").await.status, 200);
}

#[tokio::test]
async fn calls_past_the_upstream_limit_are_shed() {
    let backend = start_backend().await;
    let config = "max_concurrent_requests_per_upstream = 1\n";
    let (gw, edge) = start_gateway_toml(config, &format!("http://{}", backend.addr)).await;
    let one = slow_call(gw.addr).await;
    eventually("the call in flight", PATIENCE, || {
        (metric(&edge.metrics().render(), "protogate_requests_in_flight") == 1.0).then_some(())
    })
    .await;
    let http = Http::h2();
    assert_shed(
        &echo(&http, gw.addr, "{}").await,
        "max_concurrent_requests_per_upstream",
    );
    let text = http.metrics(gw.addr).await;
    assert_eq!(
        metric(
            &text,
            r#"protogate_shed_total{reason="upstream_concurrency"}"#
        ),
        1.0
    );
    drop(one);
    eventually("the place to be given back", PATIENCE, || {
        (metric(&edge.metrics().render(), "protogate_requests_in_flight") == 0.0).then_some(())
    })
    .await;
    assert_eq!(echo(&http, gw.addr, "{}").await.status, 200);
}

/// A body whose announced length does not fit in what is left of `max_inflight_bytes` is
/// refused before it is read; the bytes of a request still uploading are held until it ends.
#[tokio::test]
async fn bodies_past_max_inflight_bytes_are_shed_before_they_are_read() {
    let backend = start_backend().await;
    let config = "max_body_bytes = 1000\nmax_inflight_bytes = 1000\n";
    let (gw, edge) = start_gateway_toml(config, &format!("http://{}", backend.addr)).await;
    let held = || metric(&edge.metrics().render(), "protogate_request_bytes_held");
    // An upload of 600 bytes that sent only its head.
    let mut uploading = TcpStream::connect(gw.addr).await.unwrap();
    uploading
        .write_all(
            format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 600\r\n\r\n{{")
                .as_bytes(),
        )
        .await
        .unwrap();
    eventually("600 bytes held", PATIENCE, || {
        (held() == 600.0).then_some(())
    })
    .await;
    let http = Http::h1();
    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(450));
    assert_shed(&echo(&http, gw.addr, &big).await, "max_inflight_bytes");
    // What fits is served.
    assert_eq!(echo(&http, gw.addr, "{}").await.status, 200);
    let text = http.metrics(gw.addr).await;
    assert_eq!(
        metric(&text, r#"protogate_shed_total{reason="memory"}"#),
        1.0
    );
    drop(uploading);
    eventually("the held bytes given back", PATIENCE, || {
        (held() == 0.0).then_some(())
    })
    .await;
    let answer = echo(&http, gw.addr, &big).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
}

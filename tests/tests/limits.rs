//! The gateway's limits, end to end on loopback: the time a client has for its request head
//! (`header_read_timeout`) and for each pause in its body (`body_read_timeout`, a unary body
//! and a client stream), and the largest request head (`max_header_bytes`) at a non-default
//! value, over HTTP/1.1 and HTTP/2. Every wait has a deadline; none assumes a fast or quiet
//! machine: the short limits configured here are lower bounds the tests check, and the upper
//! bounds are many times longer. The limits under test are set by their keys in a
//! configuration file, read by the binary's loader.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::Frame;
use http_body_util::{Full, StreamBody};
use protogate_tests::{
    Http, eventually, metric, read_to_close, start_backend, start_gateway, start_gateway_toml,
    start_library_toml, within,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";

/// The longest any one wait may take before the test fails: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// The upper bound for a cut-off configured at well under a second: below EdgeConfig's
/// defaults (10 s for the head, 30 s for the body) and hyper's (30 s), so a configured value
/// that is not applied fails the test, yet many times the value itself.
const CUT_OFF_WITHIN: Duration = Duration::from_secs(9);

// === header_read_timeout ===

#[tokio::test]
async fn a_client_that_stalls_in_its_request_head_is_cut_off() {
    let backend = start_backend().await;
    let limit = Duration::from_millis(500);
    let cfg = format!("header_read_timeout = \"{}ms\"\n", limit.as_millis());
    let (gw, _) = start_gateway_toml(&cfg, &format!("http://{}", backend.addr)).await;
    // A client that sends nothing at all, and one that sends part of HTTP/2's preface (before
    // either, hyper's own head timer has not started), are cut off alike.
    let connected = Instant::now();
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let mut half_preface = TcpStream::connect(gw.addr).await.unwrap();
    half_preface.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();

    let mut stalled = TcpStream::connect(gw.addr).await.unwrap();
    let started = Instant::now();
    stalled
        .write_all(format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-").as_bytes())
        .await
        .unwrap();
    // hyper has no answer for a head that times out (no 408): it closes the connection.
    let got = read_to_close(&mut stalled, CUT_OFF_WITHIN).await;
    let after = started.elapsed();
    assert!(
        got.is_empty(),
        "an answer to a stalled head: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        after >= limit,
        "cut off after {after:?}, before its {limit:?}"
    );

    // The silent ones were accepted first: they are closed by now or soon, with no answer.
    for (what, conn) in [
        ("silent", &mut silent),
        ("half a preface", &mut half_preface),
    ] {
        let got = read_to_close(conn, CUT_OFF_WITHIN).await;
        assert!(
            got.is_empty(),
            "{what}: {:?}",
            String::from_utf8_lossy(&got)
        );
        let after = connected.elapsed();
        assert!(
            after >= limit,
            "{what}: cut off after {after:?}, before its {limit:?}"
        );
    }

    // The gateway still serves others.
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/json", &[], "{}")
        .await;
    assert_eq!(a.status, 200);
}

// === body_read_timeout ===

#[tokio::test]
async fn a_unary_body_that_stalls_is_answered_408() {
    let backend = start_backend().await;
    let limit = Duration::from_millis(500);
    let cfg = format!("body_read_timeout = \"{}ms\"\n", limit.as_millis());
    let (gw, _) = start_gateway_toml(&cfg, &format!("http://{}", backend.addr)).await;
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(
            format!(
                "POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                 content-length: 100\r\n\r\n{{\"id\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let a = read_answer(&mut stream, CUT_OFF_WITHIN).await;
    let after = started.elapsed();
    assert_eq!(a.status, 408, "{}", a.head);
    assert!(after >= limit, "408 after {after:?}, before its {limit:?}");
    let status: Value = serde_json::from_slice(&a.body).expect("a JSON google.rpc.Status");
    assert_eq!(status["code"], 4, "{status}");
    assert!(a.head.contains("grpc-status: 4"), "{}", a.head);

    let text = Http::h1().metrics(gw.addr).await;
    let key = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="json",response_format="json",code="408",grpc_code="DeadlineExceeded",protocol="http"}"#;
    assert_eq!(metric(&text, key), 1.0, "{text}");
}

#[tokio::test]
async fn a_client_stream_may_pause_but_one_that_stalls_is_answered_408_and_cancelled() {
    let limit = Duration::from_secs(3);
    let s = start_library_toml(&format!("body_read_timeout = \"{}s\"\n", limit.as_secs())).await;
    let uri = format!("http://{}/v1/books:import", s.gw.addr);
    let book = |t: &str| Frame::data(Bytes::from(format!("{{\"title\":\"{t}\"}}\n")));

    // Pauses shorter than the limit, longer together: the limit is per pause, not the body's.
    // The pauses are the client's behaviour under test, not a wait for a state: each is a
    // fifth of the limit (a loaded machine has 2.4 s to spare for each), six of them 1.2
    // limits together.
    let (tx, answer) = import(&uri);
    let pause = limit / 5;
    let titles = ["a", "b", "c", "d", "e", "f"];
    for t in titles {
        tx.send(Ok(book(t))).await.unwrap();
        tokio::time::sleep(pause).await;
    }
    drop(tx);
    let (status, body) = within("the paused import's answer", PATIENCE, answer)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "books": titles.map(|t| json!({"title": t})),
            "nextPageToken": titles.len().to_string()
        })
    );
    assert_eq!(s.stats.imports_completed.load(Ordering::SeqCst), 1);

    // One message, then nothing: 408 once the limit has passed, and the upstream call is
    // cancelled, never completed as if the stream had ended.
    let (tx, answer) = import(&uri);
    let started = Instant::now();
    tx.send(Ok(book("d"))).await.unwrap();
    let (status, body) = within("the stalled import's 408", CUT_OFF_WITHIN, answer)
        .await
        .unwrap();
    let after = started.elapsed();
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["code"], 4, "{body}");
    assert!(after >= limit, "408 after {after:?}, before its {limit:?}");
    eventually("the stalled import's handler to end", PATIENCE, || {
        (s.stats.imports_ended.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;
    assert_eq!(
        s.stats.imports_completed.load(Ordering::SeqCst),
        1,
        "the stalled import reached the upstream as a complete stream"
    );
    drop(tx);
}

type Sender = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

/// Starts an NDJSON import over HTTP/1.1 whose body is whatever is sent on the channel (it
/// ends when the sender is dropped); the task gives the answer's status and JSON body.
fn import(uri: &str) -> (Sender, tokio::task::JoinHandle<(StatusCode, Value)>) {
    let (tx, rx) = mpsc::channel(4);
    let body = StreamBody::new(ReceiverStream::new(rx));
    let req = Request::post(uri)
        .header("content-type", "application/x-ndjson")
        .header("accept", "application/json")
        .body(body)
        .unwrap();
    let http = Http::h1();
    let answer = tokio::spawn(async move {
        let answer = http.send(req).await;
        (answer.status, answer.json())
    });
    (tx, answer)
}

// === max_header_bytes ===

/// A head of exactly `max_header_bytes` passes, one byte more does not: at 32 KiB, twice the
/// default, so a gateway that kept the default would fail the first request.
#[tokio::test]
async fn max_header_bytes_bounds_the_http1_head() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let max = 32 * 1024;
    let (gw, _) = start_gateway_toml(&max_header_bytes(max), &upstream).await;
    assert_eq!(
        http1_status(gw.addr, max).await,
        Some(200),
        "a head of {max} bytes"
    );
    assert_eq!(
        http1_status(gw.addr, max + 1).await,
        Some(431),
        "a head of {} bytes",
        max + 1
    );

    // A limit that is not a power of two holds too (hyper's own bound, its read buffer, grows
    // by doubling: it let a 32 KiB head through a 24 KiB limit).
    for max in [24 * 1024, 20_000] {
        let (gw, _) = start_gateway_toml(&max_header_bytes(max), &upstream).await;
        assert_eq!(http1_status(gw.addr, max).await, Some(200), "{max}");
        assert_eq!(http1_status(gw.addr, max + 1).await, Some(431), "{max} + 1");
        assert_eq!(
            http1_status(gw.addr, 32 * 1024).await,
            Some(431),
            "{max}: 32 KiB"
        );
    }
}

fn max_header_bytes(max: usize) -> String {
    format!("max_header_bytes = {max}\n")
}

/// The status of the answer to an Echo whose head is exactly `size` bytes (a filler header
/// makes up the length), or `None` if the gateway closes the connection without one. The
/// request asks the gateway to close the connection after its answer.
async fn http1_status(addr: std::net::SocketAddr, size: usize) -> Option<u16> {
    let start = format!(
        "POST {ECHO} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: 2\r\nx-filler: "
    );
    let end = "\r\n\r\n";
    let head = format!("{start}{}{end}", "y".repeat(size - start.len() - end.len()));
    assert_eq!(head.len(), size);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{head}{{}}").as_bytes())
        .await
        .unwrap();
    let got = read_to_close(&mut stream, PATIENCE).await;
    if got.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(&got);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok());
    assert!(status.is_some(), "not an HTTP answer: {text:?}");
    status
}

/// HTTP/1.1 takes at most 100 header fields (hyper's limit): 100 are served, 101 are 431.
#[tokio::test]
async fn an_http1_head_takes_at_most_100_fields() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), Default::default()).await;
    for (fields, want) in [(100, 200), (101, 431)] {
        // host, connection, content-type and content-length, then fillers.
        let fillers: String = (0..fields - 4).map(|i| format!("x-f{i}: v\r\n")).collect();
        let head = format!(
            "POST {ECHO} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: 2\r\n{fillers}\r\n{{}}"
        );
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = read_answer(&mut stream, PATIENCE).await;
        assert_eq!(answer.status, want, "{fields} fields: {}", answer.head);
    }
}

/// HTTP/1.1 framing the RFC says to refuse gets an answer with a Status body naming the
/// problem and `Connection: close`, not a silent close; a request with Content-Length beside
/// Transfer-Encoding is read by its chunked framing and its connection closed (RFC 9112 §6.3).
#[tokio::test]
async fn malformed_http1_framing_is_answered_and_the_connection_closed() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), Default::default()).await;
    let post = format!("POST {ECHO} HTTP/1.1\r\ncontent-type: application/json\r\n");
    let chunked_body = "2\r\n{}\r\n0\r\n\r\n";
    let cases: [(&str, String, u16, &str); 6] = [
        (
            "a bad chunk size",
            format!("{post}host: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"),
            400,
            "malformed request body framing",
        ),
        (
            "gzip before chunked",
            format!("{post}host: x\r\ntransfer-encoding: gzip, chunked\r\n\r\n{chunked_body}"),
            501,
            "Transfer-Encoding \\\"gzip\\\" is not supported",
        ),
        (
            "chunked twice",
            format!(
                "{post}host: x\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n{chunked_body}"
            ),
            400,
            "chunked more than once",
        ),
        (
            "no Host",
            format!("{post}content-length: 2\r\n\r\n{{}}"),
            400,
            "needs a Host header",
        ),
        (
            "two Hosts",
            format!("{post}host: x\r\nhost: y\r\ncontent-length: 2\r\n\r\n{{}}"),
            400,
            "more than one Host header",
        ),
        (
            "Content-Length beside Transfer-Encoding",
            format!(
                "{post}host: x\r\ncontent-length: 99\r\ntransfer-encoding: chunked\r\n\r\n{chunked_body}"
            ),
            200,
            "",
        ),
    ];
    for (what, request, status, message) in cases {
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = read_answer(&mut stream, PATIENCE).await;
        assert_eq!(answer.status, status, "{what}: {}", answer.head);
        let body = String::from_utf8_lossy(&answer.body);
        assert!(body.contains(message), "{what}: {body}");
        if status != 200 {
            let status_body: Value = serde_json::from_slice(&answer.body).unwrap();
            assert!(status_body["code"].as_u64().is_some(), "{what}: {body}");
        }
        assert!(
            answer
                .head
                .to_ascii_lowercase()
                .contains("connection: close"),
            "{what}: {}",
            answer.head
        );
        // And the gateway closes it: nothing more is read from the connection.
        assert!(
            read_to_close(&mut stream, PATIENCE).await.is_empty(),
            "{what}"
        );
        // The rejection is logged at debug with the client's address.
        if status != 200 {
            let peer = stream.local_addr().unwrap().to_string();
            let logged = protogate_tests::log_lines(&format!("peer={peer}"));
            let words = message.split('\\').next().unwrap();
            assert!(
                logged
                    .iter()
                    .any(|l| l.contains("request rejected") && l.contains(words)),
                "{what}: {logged:?}"
            );
        }
    }
}

/// Over HTTP/2 the limit is SETTINGS_MAX_HEADER_LIST_SIZE, sizes counted as RFC 9113 does
/// (each field's name and value plus 32 bytes): a list one byte under the limit passes, one
/// byte over is 431. (The h2 crate refuses a list of exactly the limit: it takes the setting
/// as a bound to stay below.)
#[tokio::test]
async fn max_header_bytes_bounds_the_http2_header_list() {
    let backend = start_backend().await;
    let max = 24 * 1024;
    let (gw, _) =
        start_gateway_toml(&max_header_bytes(max), &format!("http://{}", backend.addr)).await;
    let http = Http::h2();
    let authority = gw.addr.to_string();
    // What the client sends besides the filler: the four pseudo-header fields, the content
    // type, and the length hyper adds for a body of known size.
    let fixed = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", authority.as_str()),
        (":path", ECHO),
        ("content-type", "application/json"),
        ("content-length", "2"),
    ]
    .iter()
    .map(|(k, v)| k.len() + v.len() + 32)
    .sum::<usize>();
    let send = |size: usize| {
        let filler = "y".repeat(size - fixed - "x-filler".len() - 32);
        let req = Request::post(format!("http://{authority}{ECHO}"))
            .header("content-type", "application/json")
            .header("x-filler", filler)
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap();
        http.send(req)
    };
    let a = send(max - 1).await;
    assert_eq!(a.status, 200, "a header list of {} bytes: {a:?}", max - 1);
    let a = send(max + 1).await;
    assert_eq!(a.status, 431, "a header list of {} bytes: {a:?}", max + 1);
    // And under the default (16 KiB), the first would have been refused.
    assert!(max - 1 > edge::EdgeConfig::default().max_header_bytes);
}

// === raw HTTP/1.1 ===

/// One HTTP/1.1 answer read off a raw connection.
struct RawAnswer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

/// Reads one answer with a Content-Length body; panics with what arrived if the connection
/// ends first or `limit` passes.
async fn read_answer(stream: &mut TcpStream, limit: Duration) -> RawAnswer {
    within("an answer", limit, async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).into_owned();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    let status = head
                        .split(' ')
                        .nth(1)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| panic!("no status line: {head}"));
                    let body = got[end + 4..end + 4 + length].to_vec();
                    return RawAnswer { status, head, body };
                }
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => panic!(
                    "the connection ended before a whole answer: {:?}",
                    String::from_utf8_lossy(&got)
                ),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
}

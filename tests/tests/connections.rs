//! Connections: an idle keep-alive connection is kept for `idle_timeout` (not cut at the
//! head timeout) and then closed (HTTP/2 with a GOAWAY); an HTTP/1.1 head that stalls is cut
//! off at the head timeout from its first byte, also on a kept-alive connection; at
//! `max_connections` the longest-idle connection makes room, and with none idle a new one is
//! refused and counted.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use protogate_tests::{
    Http, eventually, metric, read_to_close, start_backend, start_gateway, within,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const SLOW: &str = "/protogate.test.svc.TestService/Slow";
const PATIENCE: Duration = Duration::from_secs(30);

fn echo_request() -> String {
    format!(
        "POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
    )
}

/// Sends a request on a kept-alive connection and reads its answer (a Content-Length body).
async fn exchange(stream: &mut TcpStream, request: &str) -> String {
    stream.write_all(request.as_bytes()).await.unwrap();
    within("an answer", PATIENCE, async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "closed before an answer: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: ")?.parse().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    return text.into_owned();
                }
            }
        }
    })
    .await
}

/// Whether the gateway closed `stream` within `wait` (a bounded look, for what must not
/// happen yet: a slow machine can only make the gateway later, never earlier).
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) => panic!("unexpected bytes from the gateway"),
    }
}

#[tokio::test]
async fn an_idle_http1_connection_is_kept_past_the_head_timeout_and_closed_after_the_idle_timeout()
{
    let backend = start_backend().await;
    let (head, idle) = (Duration::from_millis(200), Duration::from_millis(1500));
    let config = edge::EdgeConfig {
        header_read_timeout: head,
        idle_timeout: idle,
        ..Default::default()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    let answer = exchange(&mut stream, &echo_request()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answered = Instant::now();
    // Three head timeouts idle (hyper's own head timer closed it after one)…
    assert!(
        !closed_within(&mut stream, head * 3).await,
        "closed at the head timeout"
    );
    // …and it still serves.
    let answer = exchange(&mut stream, &echo_request()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answered_again = Instant::now();
    assert!(read_to_close(&mut stream, PATIENCE).await.is_empty());
    let after = answered_again.elapsed();
    assert!(after >= idle, "closed {after:?} after its last answer");
    assert!(answered.elapsed() >= idle);
}

#[tokio::test]
async fn a_stalled_head_on_a_kept_alive_connection_is_cut_off_at_the_head_timeout() {
    let backend = start_backend().await;
    let head = Duration::from_millis(300);
    let config = edge::EdgeConfig {
        header_read_timeout: head,
        idle_timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    exchange(&mut stream, &echo_request()).await;
    let started = Instant::now();
    stream
        .write_all(format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-").as_bytes())
        .await
        .unwrap();
    // Cut within a few head timeouts (checked every one), long before the idle timeout.
    let got = read_to_close(&mut stream, Duration::from_secs(20)).await;
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    let after = started.elapsed();
    assert!(after >= head, "cut off after {after:?}");
}

/// HTTP/2: an idle connection gets a GOAWAY after the idle timeout and is closed; one with a
/// call in flight longer than the idle timeout is not idle.
#[tokio::test]
async fn an_idle_http2_connection_gets_a_goaway_after_the_idle_timeout() {
    let backend = start_backend().await;
    let idle = Duration::from_millis(1000);
    let config = edge::EdgeConfig {
        idle_timeout: idle,
        ..Default::default()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    // A call that lasts twice the idle timeout is answered on it.
    let slow = http::Request::post(format!("http://{}{SLOW}", gw.addr))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut send) = client.send_request(slow, false).unwrap();
    send.send_data(Bytes::from_static(br#"{"delay":"2s"}"#), true)
        .unwrap();
    let answer = within("the slow answer", PATIENCE, answer).await.unwrap();
    assert_eq!(answer.status(), 200);
    let mut body = answer.into_body();
    while let Some(chunk) = within("the body", PATIENCE, body.data()).await {
        chunk.unwrap();
    }
    let answered = Instant::now();
    // Then idle: the server's GOAWAY ends the connection cleanly.
    let ended = within("the connection to end", PATIENCE, connection)
        .await
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    let after = answered.elapsed();
    // The gateway's idle clock starts when the answer's last frame leaves it, a moment before
    // this client has read it (under load, milliseconds): a close within that moment of the
    // timeout is the timeout's; one a good deal earlier is not.
    let slack = Duration::from_millis(100);
    assert!(
        after + slack >= idle,
        "closed {after:?} after its last answer"
    );
}

#[tokio::test]
async fn at_max_connections_the_longest_idle_connection_makes_room() {
    let backend = start_backend().await;
    let config = edge::EdgeConfig {
        max_connections: 2,
        ..Default::default()
    };
    let (gw, edge) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let open = || metric(&edge.metrics().render(), "protogate_connections");
    let mut first = TcpStream::connect(gw.addr).await.unwrap();
    exchange(&mut first, &echo_request()).await;
    let mut second = TcpStream::connect(gw.addr).await.unwrap();
    exchange(&mut second, &echo_request()).await;
    eventually("two connections open", PATIENCE, || {
        (open() == 2.0).then_some(())
    })
    .await;
    // A third: the first (idle longest) is closed for it, and it is served.
    let mut third = TcpStream::connect(gw.addr).await.unwrap();
    let answer = exchange(&mut third, &echo_request()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(read_to_close(&mut first, PATIENCE).await.is_empty());
    // Both busy: a new connection is refused and counted.
    let slow = format!(
        "POST {SLOW} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{{\"delay\":\"60s\"}}"
    );
    second.write_all(slow.as_bytes()).await.unwrap();
    third.write_all(slow.as_bytes()).await.unwrap();
    eventually("two calls in flight", PATIENCE, || {
        (metric(&edge.metrics().render(), "protogate_requests_in_flight") == 2.0).then_some(())
    })
    .await;
    let mut refused = TcpStream::connect(gw.addr).await.unwrap();
    let _ = refused.write_all(echo_request().as_bytes()).await;
    assert!(read_to_close(&mut refused, PATIENCE).await.is_empty());
    let text = edge.metrics().render();
    assert_eq!(
        metric(&text, r#"protogate_shed_total{reason="connections"}"#),
        1.0,
        "{text}"
    );
    // A busy connection ended: room again.
    drop(second);
    eventually("a connection to close", PATIENCE, || {
        (open() == 1.0).then_some(())
    })
    .await;
    let answer = Http::h1()
        .post(gw.addr, ECHO, "application/json", &[], "{}")
        .await;
    assert_eq!(answer.status, 200);
}

/// An answer given before the body was read (413 here; 503 when shedding) reaches a client
/// that is still uploading: the gateway reads and throws away what follows for a while after
/// its answer instead of closing with unread bytes (which resets the connection, and the
/// client's write fails before it reads the answer).
#[tokio::test]
async fn a_client_still_uploading_reads_the_early_answer() {
    let backend = start_backend().await;
    let config = edge::EdgeConfig {
        max_body_bytes: 1000,
        max_inflight_bytes: 1000,
        ..Default::default()
    };
    // Small socket buffers on both ends (the gateway's accepted sockets inherit its
    // listener's), so the body does not fit in what the kernels hold and most of it is sent
    // after the gateway answered.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let upstream = format!("http://{}", backend.addr);
    let upstreams = edge::Upstreams::new(Some(&upstream), &[], config.max_response_bytes).unwrap();
    let (gw, _) = protogate_tests::start_gateway_on(
        socket.listen(64).unwrap(),
        protogate_tests::v1_schema(),
        upstreams,
        config,
    );
    let body = vec![b' '; 4 << 20];
    for _ in 0..3 {
        let client = tokio::net::TcpSocket::new_v4().unwrap();
        client.set_send_buffer_size(16 * 1024).unwrap();
        let mut stream = client.connect(gw.addr).await.unwrap();
        let head = format!(
            "POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        within("the upload", PATIENCE, stream.write_all(&body))
            .await
            .expect("the whole body written: the gateway did not reset the connection");
        let got = read_to_close(&mut stream, PATIENCE).await;
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("exceeds the limit of 1000 bytes"), "{text}");
    }
}

/// Draining (the shutdown signal, then `drain_delay`): `/readyz` answers 503, requests are
/// still served, HTTP/1.1 answers say `Connection: close`, and an HTTP/2 connection gets a
/// GOAWAY — it ends long before the drain does.
#[tokio::test]
async fn draining_turns_readyz_to_503_and_tells_connections_to_close() {
    let backend = start_backend().await;
    let config = edge::EdgeConfig {
        drain_delay: Duration::from_secs(120),
        ..Default::default()
    };
    let (gw, edge) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let addr = gw.addr;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    // The h2 connection is up (a request answered) before the drain begins.
    let request = http::Request::post(format!("http://{addr}{ECHO}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut send) = client.send_request(request, false).unwrap();
    send.send_data(Bytes::from_static(b"{}"), true).unwrap();
    assert_eq!(
        within("an answer", PATIENCE, answer)
            .await
            .unwrap()
            .status(),
        200
    );
    drop(gw); // the shutdown signal
    eventually("the drain to begin", PATIENCE, || {
        edge.is_draining().then_some(())
    })
    .await;
    let http = Http::h1();
    let ready = http.get(addr, "/readyz").await;
    assert_eq!(ready.status, 503);
    let answer = http.post(addr, ECHO, "application/json", &[], "{}").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("connection"), Some("close"));
    // The GOAWAY ends the HTTP/2 connection (cleanly) within the patience, not the drain.
    let ended = within("the HTTP/2 connection to end", PATIENCE, connection)
        .await
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
}

//! Promises of docs/ that no other test held the gateway to: the HTTP/2 stream limit per
//! connection (docs/operations.md, "Limits and protections"; docs/configuration.md,
//! `max_concurrent_streams`), the bare 400 for HTTP/1.1 heads hyper cannot parse (same
//! section), and the order in which a client certificate names its client (docs/tls.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use protogate_tests::{eventually, read_to_close, start_backend, start_gateway, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Generous: only a failing test waits this long.
const PATIENCE: Duration = Duration::from_secs(20);

const SLOW: &str = "/protogate.test.svc.TestService/Slow";
const ECHO: &str = "/protogate.test.svc.TestService/Echo";

/// The documented default of `max_concurrent_streams`.
const STREAMS: usize = 250;

// === an upstream that holds its calls ===

/// An h2 upstream that counts the calls it has received (their whole request) and answers
/// each (an empty message, status OK) only when given a permit by [`Holding::release`].
struct Holding {
    addr: std::net::SocketAddr,
    received: Arc<AtomicUsize>,
    permits: Arc<Semaphore>,
}

impl Holding {
    async fn start() -> Holding {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicUsize::new(0));
        let permits = Arc::new(Semaphore::new(0));
        let (count, gate) = (received.clone(), permits.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (count, gate) = (count.clone(), gate.clone());
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((request, respond))) = conn.accept().await {
                        tokio::spawn(hold(request, respond, count.clone(), gate.clone()));
                    }
                });
            }
        });
        Holding {
            addr,
            received,
            permits,
        }
    }

    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    /// Lets `n` held calls (or calls still to come) be answered.
    fn release(&self, n: usize) {
        self.permits.add_permits(n);
    }
}

async fn hold(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    received: Arc<AtomicUsize>,
    permits: Arc<Semaphore>,
) {
    let mut body = request.into_body();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    received.fetch_add(1, Ordering::SeqCst);
    let Ok(permit) = permits.acquire().await else {
        return;
    };
    permit.forget();
    let head = http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    let _ = stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

// === max_concurrent_streams ===

/// One request on `client`'s connection, answered in a task of its own (the answer's body
/// read to its end, so the stream closes): its status.
async fn h2_call(
    client: h2::client::SendRequest<Bytes>,
    addr: std::net::SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<http::StatusCode>,
) {
    let mut client = within("the connection to take a request", PATIENCE, client.ready())
        .await
        .unwrap();
    let request = http::Request::post(format!("http://{addr}{SLOW}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut body) = client.send_request(request, false).unwrap();
    body.send_data(Bytes::from_static(b"{}"), true).unwrap();
    let task = tokio::spawn(async move {
        let answer = within("an answer", PATIENCE, answer).await.unwrap();
        let status = answer.status();
        let mut body = answer.into_body();
        while let Some(Ok(chunk)) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        status
    });
    (client, task)
}

/// docs/operations.md: `max_concurrent_streams`, 250 per HTTP/2 connection by default; "the
/// client waits for a free stream (HTTP/2 flow control)". The gateway says 250 in its
/// SETTINGS; an h2 client with 250 calls held upstream keeps the 251st to itself (it reaches
/// neither the gateway nor the upstream) until one of them ends, and then it goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_251st_stream_of_a_connection_waits_for_a_free_one() {
    let config = edge::EdgeConfig::default();
    assert_eq!(config.max_concurrent_streams as usize, STREAMS);
    let upstream = Holding::start().await;
    let (gw, edge) = start_gateway(&format!("http://{}", upstream.addr), config).await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (client, connection) = within("the HTTP/2 handshake", PATIENCE, h2::client::handshake(tcp))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // The gateway's SETTINGS_MAX_CONCURRENT_STREAMS, as the client took it.
    eventually("the gateway's SETTINGS", PATIENCE, || {
        (client.current_max_send_streams() == STREAMS).then_some(())
    })
    .await;

    let mut client = client;
    let mut answers = Vec::new();
    for _ in 0..STREAMS {
        let (next, answer) = h2_call(client, gw.addr).await;
        client = next;
        answers.push(answer);
    }
    let metrics = edge.metrics();
    eventually("250 calls held upstream", PATIENCE, || {
        (upstream.received() == STREAMS && metrics.in_flight.get() == STREAMS as i64).then_some(())
    })
    .await;

    // The 251st: the client has it, but may not open it: the next request cannot start…
    let (mut client, last) = h2_call(client, gw.addr).await;
    let ready = std::future::poll_fn(|cx| Poll::Ready(client.poll_ready(cx).is_ready())).await;
    assert!(!ready, "the client could open the 251st stream at once");
    // …and neither the gateway nor the upstream saw it.
    assert_eq!(metrics.in_flight.get(), STREAMS as i64);
    assert_eq!(upstream.received(), STREAMS);

    // One call ends: its stream is free, and the one waiting takes it.
    upstream.release(1);
    eventually("the 251st call to reach the upstream", PATIENCE, || {
        (upstream.received() == STREAMS + 1).then_some(())
    })
    .await;
    upstream.release(STREAMS);
    answers.push(last);
    for (i, answer) in answers.into_iter().enumerate() {
        let status = within("every answer", PATIENCE, answer).await.unwrap();
        assert_eq!(status, 200, "call {i}");
    }
    drop(client);
}

/// An HTTP/2 frame: its type, flags, stream and payload.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

async fn read_frame(tcp: &mut TcpStream) -> Frame {
    let mut head = [0u8; 9];
    tcp.read_exact(&mut head).await.unwrap();
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; len];
    tcp.read_exact(&mut payload).await.unwrap();
    Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    }
}

/// A request's header block, HPACK without Huffman coding or the dynamic table: POST
/// `path` with an empty protobuf body.
fn request_block(path: &str) -> Vec<u8> {
    let literal = |out: &mut Vec<u8>, value: &str| {
        out.push(u8::try_from(value.len()).unwrap());
        out.extend_from_slice(value.as_bytes());
    };
    // :method POST (static 3), :scheme http (static 6).
    let mut block = vec![0x83, 0x86];
    // :path (name: static 4), literal without indexing.
    block.push(0x04);
    literal(&mut block, path);
    // :authority (static 1).
    block.push(0x01);
    literal(&mut block, "gateway");
    // content-type (static 31: 15 + 16 on a 4-bit prefix).
    block.extend_from_slice(&[0x0f, 0x10]);
    literal(&mut block, "application/x-protobuf");
    block
}

/// docs/operations.md: at `max_concurrent_streams` a client "gets REFUSED_STREAM" — one that
/// opens a stream past the limit without waiting. 251 requests sent at once on one
/// connection: the first 250 reach the upstream, the 251st is reset with REFUSED_STREAM (so
/// the client may send it again), and the connection goes on serving the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_opened_past_the_limit_is_refused() {
    const HEADERS: u8 = 0x1;
    const RST_STREAM: u8 = 0x3;
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;
    const REFUSED_STREAM: u32 = 0x7;

    let upstream = Holding::start().await;
    let (gw, _) = start_gateway(
        &format!("http://{}", upstream.addr),
        edge::EdgeConfig::default(),
    )
    .await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    let block = request_block(SLOW);
    let ids: Vec<u32> = (0..=STREAMS as u32).map(|i| 2 * i + 1).collect();
    for &id in &ids {
        out.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
    }
    tcp.write_all(&out).await.unwrap();
    let last = *ids.last().unwrap();

    // Read until the refusal; no other stream may be reset.
    let reset = within("a RST_STREAM", PATIENCE, async {
        loop {
            let f = read_frame(&mut tcp).await;
            match f.kind {
                SETTINGS if f.flags & 1 == 0 => {
                    tcp.write_all(&frame(SETTINGS, 1, 0, &[])).await.unwrap();
                }
                GOAWAY => panic!("GOAWAY: {:?}", f.payload),
                RST_STREAM => return f,
                _ => {}
            }
        }
    })
    .await;
    let code = u32::from_be_bytes(reset.payload[..4].try_into().unwrap());
    assert_eq!(
        (reset.stream, code),
        (last, REFUSED_STREAM),
        "the reset: stream {} code {code}",
        reset.stream
    );
    eventually("250 calls held upstream", PATIENCE, || {
        (upstream.received() == STREAMS).then_some(())
    })
    .await;

    // The connection is still good: the 250 are answered once the upstream lets them go.
    upstream.release(STREAMS);
    let mut answered = std::collections::BTreeSet::new();
    within("250 answers", PATIENCE, async {
        while answered.len() < STREAMS {
            let f = read_frame(&mut tcp).await;
            match f.kind {
                HEADERS if !answered.contains(&f.stream) => {
                    assert!(f.stream < last, "an answer on the refused stream");
                    answered.insert(f.stream);
                }
                RST_STREAM => panic!("stream {} reset too", f.stream),
                GOAWAY => panic!("GOAWAY: {:?}", f.payload),
                _ => {}
            }
        }
    })
    .await;
    assert_eq!(upstream.received(), STREAMS);
}

// === heads hyper cannot parse ===

/// docs/operations.md: heads hyper cannot parse (obs-fold, NUL or CR in a value, two
/// different `Content-Length`s) get hyper's bare 400 and a debug log line with the peer. Each
/// is sent on a raw connection; the same request without the fault (and with two equal
/// `Content-Length`s, which are one) is answered 200.
#[tokio::test]
async fn heads_hyper_cannot_parse_are_answered_a_bare_400() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig::default(),
    )
    .await;
    let request = |path: &[u8], extra: &[u8]| {
        let mut r = b"POST ".to_vec();
        r.extend_from_slice(path);
        r.extend_from_slice(b" HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n");
        r.extend_from_slice(extra);
        r.extend_from_slice(b"content-length: 2\r\nconnection: close\r\n\r\n{}");
        r
    };
    let send = |raw: Vec<u8>| async move {
        let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
        let peer = tcp.local_addr().unwrap();
        tcp.write_all(&raw).await.unwrap();
        let answer = read_to_close(&mut tcp, PATIENCE).await;
        (String::from_utf8_lossy(&answer).into_owned(), peer)
    };
    let status = |answer: &str| answer.split(' ').nth(1).unwrap_or("").to_owned();

    let path = ECHO.as_bytes();
    for (what, raw) in [
        ("the request as it is", request(path, b"")),
        (
            "two equal content-lengths",
            request(path, b"content-length: 2\r\n"),
        ),
    ] {
        let (answer, _) = send(raw).await;
        assert_eq!(status(&answer), "200", "{what}: {answer}");
    }

    for (what, raw) in [
        ("obs-fold", request(path, b"x-folded: a\r\n  b\r\n")),
        ("a NUL in a value", request(path, b"x-nul: a\0b\r\n")),
        ("a CR in a value", request(path, b"x-cr: a\rb\r\n")),
        (
            "two different content-lengths",
            request(path, b"content-length: 3\r\n"),
        ),
    ] {
        let (answer, peer) = send(raw).await;
        assert_eq!(status(&answer), "400", "{what}: {answer:?}");
        // Bare: hyper's own answer, no body (no google.rpc.Status).
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        assert!(body.is_empty(), "{what}: {answer:?}");
        assert!(
            !head.to_ascii_lowercase().contains("grpc-status"),
            "{what}: {answer:?}"
        );
        // The debug line names the peer.
        let needle = format!("peer={peer} error=");
        let line = eventually("the debug line", PATIENCE, || {
            protogate_tests::log_lines(&needle).into_iter().next()
        })
        .await;
        assert!(
            line.contains("DEBUG") && line.contains("connection ended with an error"),
            "{what}: {line}"
        );
    }

    // Raw non-ASCII in the path is no such head: hyper takes the bytes (percent-encoding
    // them), and the path is routed like any other, here to the Status 404 of a path that
    // names no method (docs/operations.md says so).
    let (answer, _) = send(request(
        "/protogate.test.svc.TestService/Éc".as_bytes(),
        b"",
    ))
    .await;
    assert_eq!(status(&answer), "404", "{answer:?}");
    assert!(answer.contains("grpc-status: 5"), "{answer:?}");
}

// === the client certificate's identity ===

mod identity {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
    use rustls::pki_types::CertificateDer;

    fn uri(s: &str) -> SanType {
        SanType::URI(s.try_into().unwrap())
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(s.try_into().unwrap())
    }

    fn mail(s: &str) -> SanType {
        SanType::Rfc822Name(s.try_into().unwrap())
    }

    /// A self-signed certificate with these alternative names, in this order, and this
    /// subject.
    fn cert(names: Vec<SanType>, subject: &[(DnType, &str)]) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = names;
        params.distinguished_name = DistinguishedName::new();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .der()
            .clone()
    }

    fn identity(names: Vec<SanType>, subject: &[(DnType, &str)]) -> Option<String> {
        edge::server::identity(&cert(names, subject))
    }

    const SPIFFE: &str = "spiffe://mesh.local/ns/shop/sa/web";
    const CN: (DnType, &str) = (DnType::CommonName, "web-client");

    /// docs/tls.md: the client is named by "its first URI name (a SPIFFE id), else DNS name,
    /// else e-mail, else its subject's common name" — by kind first, whatever order the
    /// certificate lists them in.
    #[test]
    fn uri_then_dns_then_email_then_common_name() {
        let all = || {
            vec![
                mail("web@shop.example"),
                dns("web.shop.example"),
                uri(SPIFFE),
            ]
        };
        assert_eq!(identity(all(), &[CN]).as_deref(), Some(SPIFFE));
        // The first URI of two.
        let two = vec![uri(SPIFFE), uri("spiffe://mesh.local/other")];
        assert_eq!(identity(two, &[CN]).as_deref(), Some(SPIFFE));
        // No URI: the first DNS name, though an e-mail comes before it.
        let names = vec![
            mail("web@shop.example"),
            dns("web.shop.example"),
            dns("other.shop.example"),
        ];
        assert_eq!(identity(names, &[CN]).as_deref(), Some("web.shop.example"));
        // No URI or DNS name: the e-mail (an IP address is none of the names used).
        let names = vec![
            SanType::IpAddress([10, 0, 0, 7].into()),
            mail("web@shop.example"),
        ];
        assert_eq!(identity(names, &[CN]).as_deref(), Some("web@shop.example"));
        // No name of those kinds: the subject's common name.
        let names = vec![SanType::IpAddress([10, 0, 0, 7].into())];
        assert_eq!(identity(names, &[CN]).as_deref(), Some("web-client"));
        assert_eq!(identity(Vec::new(), &[CN]).as_deref(), Some("web-client"));
        // The common name among other attributes of the subject.
        let subject = [(DnType::OrganizationName, "Shop"), CN];
        assert_eq!(
            identity(Vec::new(), &subject).as_deref(),
            Some("web-client")
        );
    }

    /// Past the documented order (the function's own contract): no common name, the whole
    /// subject; nothing at all, no identity.
    #[test]
    fn no_common_name_is_the_whole_subject_and_nothing_is_none() {
        let subject = [(DnType::OrganizationName, "Shop")];
        let whole = identity(Vec::new(), &subject).unwrap();
        assert!(whole.contains("Shop"), "{whole}");
        assert_eq!(identity(Vec::new(), &[]), None);
        // Not a certificate: none.
        assert_eq!(
            edge::server::identity(&CertificateDer::from(vec![1, 2, 3])),
            None
        );
    }
}

//! The gateway's unary upstream client against raw HTTP/2 upstreams (the `h2` crate's server)
//! that answer the way real ones sometimes do: refused streams, trailers-only answers, HTTP
//! errors without a gRPC status, messages split over frames, protocol violations, silence.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use h2::RecvStream;
use h2::server::SendResponse;
use http::{HeaderMap, HeaderValue, Request, Response};
use protogate_tests::pb::Thing;
use protogate_tests::{Http, encode, eventually, log_lines, start_gateway, start_gateway_toml};

const ECHO: &str = "/protogate.test.svc.TestService/Echo";

fn config() -> edge::EdgeConfig {
    edge::EdgeConfig {
        upstream_timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

type Handler = Arc<
    dyn Fn(
            usize,
            Request<RecvStream>,
            SendResponse<Bytes>,
        ) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// A raw HTTP/2 upstream on 127.0.0.1:0: every stream, numbered from 0 across connections,
/// goes to `handle`.
struct Raw {
    addr: SocketAddr,
    /// Streams seen so far.
    streams: Arc<AtomicUsize>,
    /// Connections accepted so far.
    connections: Arc<AtomicUsize>,
}

async fn raw_upstream(handle: Handler) -> Raw {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streams = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    let (seen, accepted) = (streams.clone(), connections.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            let (handle, seen) = (handle.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = conn.accept().await {
                    let n = seen.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(handle(n, request, respond));
                }
            });
        }
    });
    Raw {
        addr,
        streams,
        connections,
    }
}

/// A gRPC message with its 5-byte prefix.
fn framed(message: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(message.len() as u32);
    b.put_slice(message);
    b.freeze()
}

/// The request's message, its prefix removed.
async fn message_of(request: Request<RecvStream>) -> Bytes {
    let mut body = request.into_body();
    let mut all = BytesMut::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        all.extend_from_slice(&chunk);
    }
    all.freeze().slice(5..)
}

fn grpc_head(status: u16) -> Response<()> {
    Response::builder()
        .status(status)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}

fn trailers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                http::HeaderName::from_static(k),
                HeaderValue::from_static(v),
            )
        })
        .collect()
}

/// Answers `message` in the given DATA chunks, then `grpc-status: 0`.
async fn answer(mut respond: SendResponse<Bytes>, chunks: Vec<Bytes>) {
    let Ok(mut send) = respond.send_response(grpc_head(200), false) else {
        return;
    };
    for chunk in chunks {
        let _ = send.send_data(chunk, false);
    }
    let _ = send.send_trailers(trailers(&[("grpc-status", "0")]));
}

/// The gateway in front of `upstream` with the given connection options.
async fn gateway_with(
    upstream: SocketAddr,
    options: edge::UpstreamOptions,
) -> protogate_tests::Running {
    let config = config();
    let upstreams = edge::Upstreams::with_options(
        Some(&format!("http://{upstream}")),
        &[],
        config.max_response_bytes,
        options,
    )
    .unwrap();
    protogate_tests::start_gateway_upstreams(protogate_tests::v1_schema(), upstreams, config)
        .await
        .0
}

fn thing() -> Vec<u8> {
    encode(&Thing {
        id: 42,
        name: "refused once".into(),
        ..Default::default()
    })
}

fn echo_after(refuse: usize, reason: h2::Reason) -> Handler {
    Arc::new(move |n, request, mut respond| {
        Box::pin(async move {
            if n < refuse {
                respond.send_reset(reason);
                return;
            }
            let message = message_of(request).await;
            answer(respond, vec![framed(&message)]).await;
        })
    })
}

#[tokio::test]
async fn a_refused_call_is_sent_again_once() {
    // The first stream is refused (the upstream did not process it): the call goes again.
    let raw = raw_upstream(echo_after(1, h2::Reason::REFUSED_STREAM)).await;
    let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/x-protobuf", &[], thing())
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.body.as_ref(), thing().as_slice());
    assert_eq!(raw.streams.load(Ordering::SeqCst), 2);

    // An upstream that refuses everything gets the call twice, not more, and the client a 503.
    let raw = raw_upstream(echo_after(usize::MAX, h2::Reason::REFUSED_STREAM)).await;
    let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    assert_eq!(a.json()["code"], 14);
    assert!(
        a.json()["message"].as_str().unwrap().contains("refused"),
        "{:?}",
        a.json()
    );
    assert_eq!(raw.streams.load(Ordering::SeqCst), 2);

    // Other resets may come after the upstream acted on the call: never sent again.
    for (reason, status, code) in [
        (h2::Reason::INTERNAL_ERROR, 500, 13),
        (h2::Reason::CANCEL, 499, 1),
        (h2::Reason::ENHANCE_YOUR_CALM, 429, 8),
    ] {
        let raw = raw_upstream(echo_after(1, reason)).await;
        let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
        let a = Http::h1()
            .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
            .await;
        assert_eq!(a.status, status, "{reason:?}: {:?}", a.json());
        assert_eq!(a.json()["code"], code, "{reason:?}");
        assert_eq!(raw.streams.load(Ordering::SeqCst), 1, "{reason:?}");
    }
}

#[tokio::test]
async fn a_call_above_a_goaways_last_stream_is_sent_again() {
    // The first connection speaks just enough HTTP/2 by hand to answer the first request's
    // HEADERS with GOAWAY(last stream 0, NO_ERROR): the upstream says it took no stream.
    // Later connections are a real server.
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            if accepted.fetch_add(1, Ordering::SeqCst) > 0 {
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((request, respond))) = conn.accept().await {
                        tokio::spawn(async move {
                            let message = message_of(request).await;
                            answer(respond, vec![framed(&message)]).await;
                        });
                    }
                });
                continue;
            }
            tokio::spawn(async move {
                // Our SETTINGS (empty), then frames until a HEADERS arrives.
                if !hand_handshake(&mut tcp).await {
                    return;
                }
                loop {
                    match read_frame(&mut tcp).await {
                        Some(frame) if frame.kind == HEADERS => break,
                        Some(_) => {}
                        None => return,
                    }
                }
                let _ = tcp.write_all(&frame(GOAWAY, 0, 0, &[0; 8])).await;
                // Open until the gateway closes it.
                let _ = tokio::io::copy(&mut tcp, &mut tokio::io::sink()).await;
            });
        }
    });
    let (gw, _) = start_gateway(&format!("http://{addr}"), config()).await;
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/x-protobuf", &[], thing())
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.body.as_ref(), thing().as_slice());
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

/// The gateway lets its upstreams send DATA frames of up to 256 KiB (its SETTINGS say so, and
/// it applies them once acknowledged): an answer of 200 KB in one frame — a frame error under
/// HTTP/2's default of 16 KiB — is relayed whole. (Fewer, larger frames: a large answer is
/// read in a few reads instead of one per 8 KiB.)
#[tokio::test]
async fn an_answer_in_one_frame_of_200_kb_is_relayed() {
    use tokio::io::AsyncWriteExt;
    let answer = encode(&Thing {
        id: 7,
        name: "x".repeat(200_000),
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let advertised = Arc::new(AtomicUsize::new(0));
    let seen = advertised.clone();
    let message = answer.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let (seen, message) = (seen.clone(), message.clone());
            tokio::spawn(async move {
                // Our SETTINGS (empty); theirs acknowledged as they come; the request's
                // frames read up to its END_STREAM.
                if !hand_handshake(&mut tcp).await {
                    return;
                }
                let stream = loop {
                    let Some(f) = read_frame(&mut tcp).await else {
                        return;
                    };
                    if f.kind == SETTINGS && f.flags & ACK == 0 {
                        for setting in f.payload.chunks_exact(6) {
                            if setting[..2] == SETTINGS_MAX_FRAME_SIZE {
                                let v = u32::from_be_bytes([
                                    setting[2], setting[3], setting[4], setting[5],
                                ]);
                                seen.store(v as usize, Ordering::SeqCst);
                            }
                        }
                        let _ = tcp.write_all(&frame(SETTINGS, ACK, 0, &[])).await;
                    }
                    if (f.kind == DATA || f.kind == HEADERS) && f.flags & END_STREAM != 0 {
                        break f.stream;
                    }
                };
                // HPACK: `:status: 200` (static entry 8), `content-type: application/grpc`
                // (literal, name from static entry 31); the trailers' `grpc-status: 0` literal.
                let mut head = vec![0x88, 0x0f, 0x10, 16];
                head.extend(b"application/grpc");
                let mut trailers = vec![0x00, 11];
                trailers.extend(b"grpc-status");
                trailers.extend([1, b'0']);
                let mut out = frame(HEADERS, END_HEADERS, stream, &head);
                out.extend(frame(DATA, 0, stream, &framed(&message)));
                out.extend(frame(HEADERS, END_HEADERS | END_STREAM, stream, &trailers));
                let _ = tcp.write_all(&out).await;
                let _ = tokio::io::copy(&mut tcp, &mut tokio::io::sink()).await;
            });
        }
    });
    let (gw, _) = start_gateway(&format!("http://{addr}"), config()).await;
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/x-protobuf", &[], thing())
        .await;
    assert_eq!(
        a.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&a.body[..a.body.len().min(500)])
    );
    assert_eq!(a.body.as_ref(), answer.as_slice());
    assert_eq!(advertised.load(Ordering::SeqCst), 256 << 10);
}

// HTTP/2's frame types, flags and the one setting the hand-written upstreams use (RFC 9113).
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 1;
const ACK: u8 = 1;
const END_HEADERS: u8 = 4;
const SETTINGS_MAX_FRAME_SIZE: [u8; 2] = [0, 5];

/// An HTTP/2 frame read by a hand-written upstream.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// A hand-written upstream's start: its SETTINGS (empty) sent, the client's preface read;
/// false if the connection went.
async fn hand_handshake(tcp: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut preface = [0u8; 24];
    tcp.write_all(&frame(SETTINGS, 0, 0, &[])).await.is_ok()
        && tcp.read_exact(&mut preface).await.is_ok()
}

/// The next frame from the client, or None when the connection went.
async fn read_frame(tcp: &mut tokio::net::TcpStream) -> Option<Frame> {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 9];
    tcp.read_exact(&mut head).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; len];
    tcp.read_exact(&mut payload).await.ok()?;
    Some(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    })
}

/// A frame as bytes on the wire.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// How the raw upstream answers, chosen by the request's `grpc-metadata-case` header.
async fn by_case(request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let case = request
        .headers()
        .get("case")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let accepts_gzip = request
        .headers()
        .get("grpc-accept-encoding")
        .is_some_and(|v| v.to_str().unwrap().split(',').any(|c| c.trim() == "gzip"));
    let message = message_of(request).await;
    let whole = framed(&message);
    match case.as_str() {
        // The prefix and the message cut across three DATA frames, metadata in both the
        // headers and the trailers.
        "split" => {
            let mut head = grpc_head(200);
            head.headers_mut()
                .insert("x-head", HeaderValue::from_static("h"));
            let Ok(mut send) = respond.send_response(head, false) else {
                return;
            };
            let _ = send.send_data(whole.slice(..3), false);
            let _ = send.send_data(whole.slice(3..7), false);
            let _ = send.send_data(whole.slice(7..), false);
            let _ = send.send_trailers(trailers(&[("grpc-status", "0"), ("x-tail", "t")]));
        }
        "trailers-only" => {
            let mut head = grpc_head(200);
            head.headers_mut()
                .insert("grpc-status", HeaderValue::from_static("5"));
            head.headers_mut().insert(
                "grpc-message",
                HeaderValue::from_static("no%20such%20thing"),
            );
            let _ = respond.send_response(head, true);
        }
        "http-404" | "http-502" => {
            let status: u16 = case[5..].parse().unwrap();
            let head = Response::builder().status(status).body(()).unwrap();
            let _ = respond.send_response(head, true);
        }
        "no-status" => {
            if let Ok(mut send) = respond.send_response(grpc_head(200), false) {
                let _ = send.send_data(whole, true);
            }
        }
        "two-messages" => answer(respond, vec![whole.clone(), whole]).await,
        "two-in-one-frame" => answer(respond, vec![[whole.clone(), whole].concat().into()]).await,
        "compressed" => {
            let mut flagged = BytesMut::from(&whole[..]);
            flagged[0] = 1;
            answer(respond, vec![flagged.freeze()]).await;
        }
        // Compressed as gRPC allows an upstream to (the gateway said it accepts gzip), or in
        // a coding the gateway never offered, or decoding past the limit.
        "gzip" | "gzip-bomb" | "snappy" => {
            if !accepts_gzip {
                let mut head = grpc_head(200);
                head.headers_mut()
                    .insert("grpc-status", HeaderValue::from_static("12"));
                head.headers_mut().insert(
                    "grpc-message",
                    HeaderValue::from_static("the%20gateway%20does%20not%20accept%20gzip"),
                );
                let _ = respond.send_response(head, true);
                return;
            }
            let plain = if case == "gzip-bomb" {
                vec![0u8; 1 << 20]
            } else {
                message.to_vec()
            };
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            std::io::Write::write_all(&mut gz, &plain).unwrap();
            let mut flagged = BytesMut::from(&framed(&gz.finish().unwrap())[..]);
            flagged[0] = 1;
            let mut head = grpc_head(200);
            head.headers_mut().insert(
                "grpc-encoding",
                HeaderValue::from_static(if case == "snappy" { "snappy" } else { "gzip" }),
            );
            let Ok(mut send) = respond.send_response(head, false) else {
                return;
            };
            let _ = send.send_data(flagged.freeze(), false);
            let _ = send.send_trailers(trailers(&[("grpc-status", "0")]));
        }
        "truncated" => answer(respond, vec![whole.slice(..whole.len() - 1)]).await,
        "no-message" => answer(respond, vec![]).await,
        "big" => answer(respond, vec![framed(&vec![b'x'; 4096])]).await,
        "error-in-trailers" | "bad-details" => {
            let Ok(mut send) = respond.send_response(grpc_head(200), false) else {
                return;
            };
            let _ = send.send_trailers(if case == "bad-details" {
                trailers(&[
                    ("grpc-status", "3"),
                    ("grpc-message", "bad"),
                    ("grpc-status-details-bin", "%%% not base64"),
                ])
            } else {
                trailers(&[
                    ("grpc-status", "9"),
                    ("grpc-message", "not%20now%20%E2%9C%93"),
                    ("x-tail", "t"),
                ])
            });
        }
        "bad-status" => {
            let mut head = grpc_head(200);
            head.headers_mut()
                .insert("grpc-status", HeaderValue::from_static("nine"));
            let _ = respond.send_response(head, true);
        }
        "html" => {
            let head = Response::builder()
                .status(200)
                .header("content-type", "text/html")
                .body(())
                .unwrap();
            if let Ok(mut send) = respond.send_response(head, false) {
                let _ = send.send_data(Bytes::from_static(b"<html></html>"), true);
            }
        }
        // gRPC with a codec suffix is gRPC; grpc-web is not.
        "grpc+proto" | "grpc-web" => {
            let head = Response::builder()
                .status(200)
                .header("content-type", format!("application/{case}"))
                .body(())
                .unwrap();
            let Ok(mut send) = respond.send_response(head, false) else {
                return;
            };
            let _ = send.send_data(whole, false);
            let _ = send.send_trailers(trailers(&[("grpc-status", "0")]));
        }
        _ => answer(respond, vec![whole]).await,
    }
}

#[tokio::test]
async fn answers_are_read_as_grpc_specifies() {
    let raw = raw_upstream(Arc::new(|_, request, respond| {
        Box::pin(by_case(request, respond))
    }))
    .await;
    let addr = raw.addr;
    // config()'s, and the answer's limit, from a configuration file's keys.
    let cfg = "upstream_timeout = \"20s\"\nmax_response_bytes = 1024\n";
    let (gw, _) = start_gateway_toml(cfg, &format!("http://{addr}")).await;
    let http = Http::h1();
    let call = |case: &'static str| {
        let http = http.clone();
        async move {
            http.post(
                gw.addr,
                ECHO,
                "application/json",
                &[("grpc-metadata-case", case)],
                r#"{"id":"7","name":"split me"}"#,
            )
            .await
        }
    };

    let a = call("split").await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json(), serde_json::json!({"id": "7", "name": "split me"}));
    assert_eq!(a.header("grpc-metadata-x-head"), Some("h"));
    assert_eq!(a.header("grpc-metadata-x-tail"), Some("t"));
    let a = call("gzip").await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json(), serde_json::json!({"id": "7", "name": "split me"}));

    // (case, HTTP status, gRPC code, words the message must hold)
    let cases = [
        ("trailers-only", 404, 5, "no such thing"),
        ("http-404", 501, 12, "HTTP 404"),
        ("http-502", 503, 14, "HTTP 502"),
        ("no-status", 500, 13, "without a grpc-status"),
        ("two-messages", 500, 13, "more than one message"),
        ("two-in-one-frame", 500, 13, "more than one message"),
        ("compressed", 500, 13, "without naming its grpc-encoding"),
        ("snappy", 500, 13, "grpc-encoding \"snappy\""),
        ("gzip-bomb", 500, 13, "limit of 1024 bytes"),
        ("truncated", 500, 13, "ended inside a message"),
        ("no-message", 500, 13, "without a message"),
        ("big", 500, 13, "limit of 1024 bytes"),
        ("error-in-trailers", 400, 9, "not now ✓"),
        ("bad-details", 400, 3, "bad"),
        ("bad-status", 500, 2, "invalid grpc-status"),
        ("html", 500, 2, "content-type text/html"),
        ("grpc-web", 500, 2, "content-type application/grpc-web"),
    ];
    for (case, status, code, words) in cases {
        let a = call(case).await;
        assert_eq!(a.status, status, "{case}: {:?}", a.json());
        assert_eq!(a.json()["code"], code, "{case}: {:?}", a.json());
        let message = a.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(words), "{case}: {message}");
    }
    assert_eq!(call("grpc+proto").await.status, 200);
    // Metadata of a failed call: from the trailers too.
    let a = call("error-in-trailers").await;
    assert_eq!(a.header("grpc-metadata-x-tail"), Some("t"));
    // The connection survived every one of them.
    assert_eq!(call("echo").await.status, 200);
    assert_eq!(raw.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_upstream_that_stops_answering_pings_is_given_up() {
    // The first connection takes one call and then goes silent (never read again, so its
    // PINGs go unanswered); later connections answer.
    let connections = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let silent = counted.fetch_add(1, Ordering::SeqCst) == 0;
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = conn.accept().await {
                    if silent {
                        // Hold the call and the connection without polling either, for good.
                        let _held = (request, respond, conn);
                        std::future::pending::<()>().await;
                        return;
                    }
                    tokio::spawn(async move {
                        let message = message_of(request).await;
                        answer(respond, vec![framed(&message)]).await;
                    });
                }
            });
        }
    });
    let gw = gateway_with(
        addr,
        edge::UpstreamOptions {
            keepalive_interval: Duration::from_millis(100),
            keepalive_timeout: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await;
    let http = Http::h1();
    // Given up by keep-alive (503), well before the 20 s deadline (which would be 504).
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("connection lost"),
        "{:?}",
        a.json()
    );
    // The next call dials a new connection.
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"2"}"#)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json());
    assert_eq!(a.json(), serde_json::json!({"id": "2"}));
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_restarted_upstream_is_dialed_again_without_a_failed_call() {
    // The port stays open through the restart (a second handle on the listening socket), so
    // nothing else can take it in between.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .into_std()
        .unwrap();
    let kept = listener.try_clone().unwrap();
    let backend =
        protogate_tests::start_backend_on(tokio::net::TcpListener::from_std(listener).unwrap());
    let addr = backend.addr;
    let (gw, _) = start_gateway(&format!("http://{addr}"), config()).await;
    let http = Http::h1();
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
        .await;
    assert_eq!(a.status, 200);
    let ended = || {
        log_lines(&format!("upstream={addr}"))
            .iter()
            .filter(|l| {
                l.contains("upstream connection closed") || l.contains("upstream connection lost")
            })
            .count()
    };
    let ended_before = ended();
    backend.stop().await;
    // Wait for the gateway to see the old connection end: a call racing that moment would
    // test a connection the upstream is closing (the GOAWAY test's matter), not the redial.
    eventually(
        "the gateway to see its connection to the stopped upstream end",
        Duration::from_secs(30),
        || (ended() > ended_before).then_some(()),
    )
    .await;
    let _backend =
        protogate_tests::start_backend_on(tokio::net::TcpListener::from_std(kept).unwrap());
    for id in 2..5 {
        let body = format!(r#"{{"id":"{id}"}}"#);
        let a = http
            .post(gw.addr, ECHO, "application/json", &[], body)
            .await;
        assert_eq!(a.status, 200, "call {id}: {:?}", a.json());
    }
}

#[tokio::test]
async fn connection_specific_metadata_is_not_forwarded() {
    // HTTP/2 forbids these in a request head (h2 refuses to send it): sent as
    // `grpc-metadata-*`, they are dropped rather than failing the call or the connection;
    // the rest of the metadata still goes.
    const METADATA: &str = "/protogate.test.svc.TestService/Metadata";
    let backend = protogate_tests::start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let http = Http::h1();
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
    ] {
        let header = format!("grpc-metadata-{name}");
        let a = http
            .post(
                gw.addr,
                METADATA,
                "application/json",
                &[(header.as_str(), "x"), ("grpc-metadata-keep", "y")],
                "{}",
            )
            .await;
        assert_eq!(
            a.status,
            200,
            "{name}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        let counts = a.json()["counts"].clone();
        assert!(counts.get("keep=y").is_some(), "{name}: {counts}");
        assert!(
            counts.get(format!("{name}=x")).is_none(),
            "{name}: {counts}"
        );
    }
}

#[tokio::test]
async fn a_call_past_its_deadline_is_cancelled_upstream() {
    // The upstream holds the call and reports how its stream ended.
    let (tx, mut ended) = tokio::sync::mpsc::unbounded_channel();
    let raw = raw_upstream(Arc::new(move |_, _, mut respond| {
        let tx = tx.clone();
        Box::pin(async move {
            let reason = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
            let _ = tx.send(reason.ok());
        })
    }))
    .await;
    let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
    let a = Http::h1()
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[("x-timeout", "0.2")],
            r#"{"id":"1"}"#,
        )
        .await;
    assert_eq!(a.status, 504, "{:?}", a.json());
    let reason = tokio::time::timeout(Duration::from_secs(10), ended.recv())
        .await
        .expect("the upstream learns the call's end");
    assert_eq!(reason, Some(Some(h2::Reason::CANCEL)));
}

#[tokio::test]
async fn a_connection_is_replaced_before_its_stream_ids_run_out() {
    let raw = raw_upstream(echo_after(0, h2::Reason::NO_ERROR)).await;
    let gw = gateway_with(
        raw.addr,
        edge::UpstreamOptions {
            max_streams_per_connection: 2,
            ..Default::default()
        },
    )
    .await;
    let http = Http::h1();
    for id in 1..=5 {
        let body = format!(r#"{{"id":"{id}"}}"#);
        let a = http
            .post(gw.addr, ECHO, "application/json", &[], body)
            .await;
        assert_eq!(a.status, 200, "call {id}: {:?}", a.json());
    }
    // Calls 1-2, 3-4 and 5 on three connections.
    assert_eq!(raw.streams.load(Ordering::SeqCst), 5);
    assert_eq!(raw.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_stream_whose_status_details_are_not_base64_ends_with_its_status() {
    // Server streams go through tonic, whose client panics on details it cannot decode (not
    // base64, or padded too much); the gateway drops them first. Answered in the trailers
    // after one message, and trailers-only. The request's `details` metadata picks the value.
    const WATCH: &str = "/protogate.test.svc.TestService/Watch";
    let raw = raw_upstream(Arc::new(|_, request, mut respond| {
        Box::pin(async move {
            let trailers_only = request.headers().contains_key("only");
            let mut status = trailers(&[("grpc-status", "9"), ("grpc-message", "bad")]);
            if let Some(details) = request.headers().get("details") {
                status.insert("grpc-status-details-bin", details.clone());
            }
            if trailers_only {
                let mut head = grpc_head(200);
                head.headers_mut().extend(status);
                let _ = respond.send_response(head, true);
                return;
            }
            let Ok(mut send) = respond.send_response(grpc_head(200), false) else {
                return;
            };
            let one = encode(&Thing {
                name: "w".into(),
                ..Default::default()
            });
            let _ = send.send_data(framed(&one), false);
            let _ = send.send_trailers(status);
        })
    }))
    .await;
    let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
    let http = Http::h1();
    for details in ["%%% not base64", "AAAA=", "AAA=="] {
        let a = http
            .post(
                gw.addr,
                WATCH,
                "application/json",
                &[("grpc-metadata-details", details)],
                r#"{"name":"w"}"#,
            )
            .await;
        assert_eq!(a.status, 200, "{details}");
        assert_eq!(
            a.json(),
            serde_json::json!([{"name": "w"}, {"@error": {"code": 9, "message": "bad"}}]),
            "{details}"
        );
        let a = http
            .post(
                gw.addr,
                WATCH,
                "application/json",
                &[
                    ("grpc-metadata-only", "1"),
                    ("grpc-metadata-details", details),
                ],
                r#"{"name":"w"}"#,
            )
            .await;
        assert_eq!(
            a.status,
            400,
            "{details}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(
            a.json(),
            serde_json::json!({"code": 9, "message": "bad"}),
            "{details}"
        );
    }
}

#[tokio::test]
async fn a_stream_of_gzip_compressed_messages_is_decoded() {
    // Streams go through tonic's client, which must say it accepts gzip and then decode it.
    // This upstream compresses every message when told it may, and refuses the call if not.
    const WATCH: &str = "/protogate.test.svc.TestService/Watch";
    let raw = raw_upstream(Arc::new(|_, request, mut respond| {
        Box::pin(async move {
            let accepts = request
                .headers()
                .get("grpc-accept-encoding")
                .is_some_and(|v| v.to_str().unwrap().contains("gzip"));
            let mut head = grpc_head(200);
            if !accepts {
                head.headers_mut()
                    .insert("grpc-status", HeaderValue::from_static("12"));
                let _ = respond.send_response(head, true);
                return;
            }
            head.headers_mut()
                .insert("grpc-encoding", HeaderValue::from_static("gzip"));
            let Ok(mut send) = respond.send_response(head, false) else {
                return;
            };
            for name in ["first", "second"] {
                let one = encode(&Thing {
                    name: name.repeat(100),
                    ..Default::default()
                });
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                std::io::Write::write_all(&mut gz, &one).unwrap();
                let mut flagged = BytesMut::from(&framed(&gz.finish().unwrap())[..]);
                flagged[0] = 1;
                let _ = send.send_data(flagged.freeze(), false);
            }
            let _ = send.send_trailers(trailers(&[("grpc-status", "0")]));
        })
    }))
    .await;
    let (gw, _) = start_gateway(&format!("http://{}", raw.addr), config()).await;
    let a = Http::h1()
        .post(
            gw.addr,
            WATCH,
            "application/json",
            &[("accept", "application/x-ndjson")],
            r#"{"name":"w"}"#,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let lines: Vec<serde_json::Value> = a
        .body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            serde_json::json!({"name": "first".repeat(100)}),
            serde_json::json!({"name": "second".repeat(100)})
        ]
    );
}

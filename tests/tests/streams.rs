//! Streaming methods end to end: the real gateway in front of the real tonic library backend.
//! Every response framing, errors before and after the first message, a slow reader, a client
//! that goes away, client streams in every framing, bidirectional streams.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prost::Message as _;
use protogate_tests::library::{self, pb::library::v1 as pb};
use protogate_tests::{Answer, Http, eventually, metric, start_library_toml, within};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use transcode::Format;
use transcode::stream::{InFraming, Splitter};

/// A client of its own, over HTTP/2 with the protocol's 64 KiB windows.
fn client(h2: bool) -> Http {
    if h2 {
        Http::h2_small_windows()
    } else {
        Http::h1()
    }
}

/// `method` `path` at `addr`, read whole, asking for the trailers that carry a stream's status
/// (over HTTP/1.1 a server sends them only to a client that says it takes them).
async fn request(
    http: &Http,
    method: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answer {
    let headers: Vec<(&str, &str)> = [("te", "trailers")]
        .into_iter()
        .chain(headers.iter().copied())
        .collect();
    http.request(method, addr, path, &headers, body).await
}

fn content_type(w: &Answer) -> &str {
    w.header("content-type").expect("a Content-Type")
}

/// Splits a body in `framing` and renders each message (a Book, or a final status record)
/// as JSON.
fn messages(framing: InFraming, body: &[u8]) -> Vec<Value> {
    let mut s = Splitter::new(framing, 1 << 20);
    s.push(body);
    s.end();
    let mut out = Vec::new();
    while let Some(m) = s.next_message().unwrap() {
        let json = match framing.format() {
            Format::Json => m,
            Format::Msgpack => {
                if m.starts_with(b"\x81\xa6@error") {
                    let status = protogate_tests::convert_with(
                        &library::schema(),
                        "google.rpc.Status",
                        Format::Msgpack,
                        Format::Json,
                        &m[8..],
                    );
                    let mut v = b"{\"@error\":".to_vec();
                    v.extend_from_slice(&status);
                    v.push(b'}');
                    v
                } else {
                    protogate_tests::convert_with(
                        &library::schema(),
                        "library.v1.Book",
                        Format::Msgpack,
                        Format::Json,
                        &m,
                    )
                }
            }
            Format::Protobuf => protogate_tests::convert_with(
                &library::schema(),
                "library.v1.Book",
                Format::Protobuf,
                Format::Json,
                &m,
            ),
        };
        out.push(serde_json::from_slice(&json).unwrap());
    }
    s.finish().unwrap();
    out
}

fn books(n: i64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut b = json!({"name": format!("shelves/1/books/{i}")});
            if i > 0 {
                b["pages"] = json!(i.to_string());
            }
            b
        })
        .collect()
}

fn sse_events(body: &[u8]) -> Vec<(String, Value)> {
    String::from_utf8(body.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut event = "message".to_owned();
            let mut data = String::new();
            for line in e.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            (event, serde_json::from_str(&data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn server_streams_in_every_framing() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let (addr, path) = (s.gw.addr, "/v1/shelves/1/books:watch?count=3");
    for h2 in [false, true] {
        let c = client(h2);
        let get = |accept: &'static str| {
            let headers: Vec<(&str, &str)> = if accept.is_empty() {
                vec![]
            } else {
                vec![("accept", accept)]
            };
            let c = c.clone();
            async move { request(&c, "GET", addr, path, &headers, "").await }
        };
        // No Accept: one JSON array.
        let w = get("").await;
        assert_eq!(w.status, 200);
        assert_eq!(content_type(&w), "application/json");
        assert_eq!(
            serde_json::from_slice::<Value>(&w.body).unwrap(),
            json!(books(3))
        );
        if h2 {
            assert_eq!(w.trailers.as_ref().unwrap()["grpc-status"], "0");
        }
        let w = get("application/x-ndjson").await;
        assert_eq!(content_type(&w), "application/x-ndjson");
        assert_eq!(messages(InFraming::Ndjson, &w.body), books(3));
        let w = get("text/event-stream").await;
        assert_eq!(content_type(&w), "text/event-stream");
        let events = sse_events(&w.body);
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|(e, _)| e == "message"));
        assert_eq!(
            events.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
            books(3)
        );
        let w = get("application/msgpack").await;
        assert_eq!(content_type(&w), "application/msgpack");
        assert_eq!(messages(InFraming::Msgpack, &w.body), books(3));
        let w = get("application/x-protobuf").await;
        assert_eq!(content_type(&w), "application/x-protobuf");
        assert_eq!(messages(InFraming::Delimited, &w.body), books(3));
    }
}

#[tokio::test]
async fn errors_before_and_after_the_first_message() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let c = client(true);
    // Before the first message: an ordinary error answer.
    let w = request(
        &c,
        "GET",
        s.gw.addr,
        "/v1/shelves/1/books:watch?count=3&failAfter=-1",
        &[],
        "",
    )
    .await;
    assert_eq!(w.status, 400);
    let v: Value = serde_json::from_slice(&w.body).unwrap();
    assert_eq!(v["code"], 9);
    assert_eq!(w.headers["grpc-status"], "9");

    // After two: the framing's final status record, and the trailers.
    let (addr, path) = (s.gw.addr, "/v1/shelves/1/books:watch?count=5&failAfter=2");
    let error = json!({"@error": {"code": 9, "message": "watch failed after 2 books"}});
    let w = request(&c, "GET", addr, path, &[], "").await;
    assert_eq!(w.status, 200);
    let mut want = books(2);
    want.push(error.clone());
    assert_eq!(
        serde_json::from_slice::<Value>(&w.body).unwrap(),
        json!(want)
    );
    let trailers = w.trailers.unwrap();
    assert_eq!(trailers["grpc-status"], "9");
    assert_eq!(trailers["grpc-message"], "watch failed after 2 books");
    // Counted under the code the stream ended with, not as the success its 200 announced.
    let watch = r#"protogate_requests_total{method="library.v1.Library/WatchBooks",request_format="json",response_format="json","#;
    let failed = format!(r#"{watch}code="200",grpc_code="FailedPrecondition",protocol="http"}}"#);
    eventually("the failed stream to be recorded", PATIENCE, || {
        (metric(&s.edge.metrics().render(), &failed) == 1.0).then_some(())
    })
    .await;
    let text = s.edge.metrics().render();
    assert_eq!(
        metric(
            &text,
            &format!(r#"{watch}code="200",grpc_code="OK",protocol="http"}}"#)
        ),
        0.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            &format!(r#"{watch}code="400",grpc_code="FailedPrecondition",protocol="http"}}"#)
        ),
        1.0,
        "{text}"
    );
    for (accept, framing) in [
        ("application/x-ndjson", InFraming::Ndjson),
        ("application/msgpack", InFraming::Msgpack),
    ] {
        let w = request(&c, "GET", addr, path, &[("accept", accept)], "").await;
        assert_eq!(messages(framing, &w.body), want, "{accept}");
    }
    let w = request(
        &c,
        "GET",
        addr,
        path,
        &[("accept", "text/event-stream")],
        "",
    )
    .await;
    let events = sse_events(&w.body);
    assert_eq!(events.len(), 3);
    assert_eq!(events[2], ("error".to_owned(), error["@error"].clone()));
    // Protobuf: the status is the last delimited record; the trailer tells it apart.
    let w = request(
        &c,
        "GET",
        addr,
        path,
        &[("accept", "application/x-protobuf")],
        "",
    )
    .await;
    let mut split = Splitter::new(InFraming::Delimited, 1 << 20);
    split.push(&w.body);
    let mut records = Vec::new();
    while let Some(m) = split.next_message().unwrap() {
        records.push(m);
    }
    assert_eq!(records.len(), 3);
    let status = protogate_tests::convert_with(
        &library::schema(),
        "google.rpc.Status",
        Format::Protobuf,
        Format::Json,
        &records[2],
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&status).unwrap(),
        error["@error"]
    );
    assert_eq!(w.trailers.unwrap()["grpc-status"], "9");
}

/// How long a test waits for something that takes milliseconds on a quiet machine: only a
/// failing test ever waits this long.
const PATIENCE: Duration = Duration::from_secs(30);

/// A connection of its own to the gateway, over HTTP/1.1 or HTTP/2 (prior knowledge, 64 KiB
/// windows), from a socket whose receive buffer is fixed (set before connecting, so the kernel
/// does not autotune it).
enum Conn {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    /// Opens it with a receive buffer of `recv_buffer` bytes; returns it and the size the
    /// kernel gave the buffer.
    async fn open(addr: std::net::SocketAddr, h2: bool, recv_buffer: u32) -> (Conn, usize) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(recv_buffer).unwrap();
        let recv_buffer = socket.recv_buffer_size().unwrap() as usize;
        let tcp = within("connecting", PATIENCE, socket.connect(addr))
            .await
            .unwrap();
        let io = hyper_util::rt::TokioIo::new(tcp);
        if h2 {
            let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(65_535)
                .initial_connection_window_size(65_535)
                .handshake(io)
                .await
                .unwrap();
            tokio::spawn(conn);
            (Conn::H2(send), recv_buffer)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            (Conn::H1(send), recv_buffer)
        }
    }

    async fn send(
        &mut self,
        mut req: Request<Full<Bytes>>,
    ) -> http::Response<hyper::body::Incoming> {
        let response = async {
            match self {
                Conn::H1(send) => {
                    // hyper's connection-level client leaves Host to its caller (HTTP/1.1
                    // requires it: 400 without).
                    if let Some(authority) = req.uri().authority() {
                        let host = http::HeaderValue::from_str(authority.as_str()).unwrap();
                        req.headers_mut().insert(http::header::HOST, host);
                    }
                    send.send_request(req).await
                }
                Conn::H2(send) => send.send_request(req).await,
            }
        };
        within("the answer's head", PATIENCE, response)
            .await
            .unwrap()
    }
}

/// A reader takes one frame of a long stream and stops. Returns how many messages the
/// upstream had produced when it stopped producing, and the most it can produce if the
/// gateway itself holds only a few (the windows and buffers on the way hold the rest, see
/// below). Reads the rest before returning, and checks that every message arrives.
async fn slow_reader(h2: bool) -> (usize, usize) {
    const COUNT: usize = 100_000;
    // Every message is longer than this in every encoding: its title alone has 100 bytes,
    // its name at least 17.
    const MESSAGE_BYTES: usize = 117;
    // Fixed socket buffers on both ends of the client's connection (the gateway's accepted
    // sockets inherit its listener's): what the kernel holds is then known, whatever
    // net.ipv4.tcp_rmem and tcp_wmem let it autotune to (up to 32 MiB on some machines).
    let gw_socket = tokio::net::TcpSocket::new_v4().unwrap();
    gw_socket.set_send_buffer_size(16 * 1024).unwrap();
    gw_socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let send_buffer = gw_socket.send_buffer_size().unwrap() as usize;
    let s =
        library::start_with_gateway_on(gw_socket.listen(64).unwrap(), edge::EdgeConfig::default())
            .await;
    let (mut conn, recv_buffer) = Conn::open(s.gw.addr, h2, 16 * 1024).await;
    let req = Request::get(format!(
        "http://{}/v1/shelves/1/books:watch?count={COUNT}&titleBytes=100",
        s.gw.addr
    ))
    .header("accept", "application/x-ndjson")
    .body(Full::default())
    .unwrap();
    let response = conn.send(req).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let lines_of = |frame: Frame<Bytes>| {
        frame
            .into_data()
            .map_or(0, |d| d.iter().filter(|&&b| b == b'\n').count())
    };
    let first = lines_of(
        within("the first frame", PATIENCE, body.frame())
            .await
            .unwrap()
            .unwrap(),
    );
    // The reader stops. Where messages it has not taken can wait, and how much each place
    // holds (bytes):
    // - between the reader and the gateway: over HTTP/2 the reader's stream window, 64 KiB,
    //   which caps whatever sits in either socket buffer too; over HTTP/1.1 the two socket
    //   buffers (fixed above, their sizes read back as the kernel set them), hyper's write
    //   buffer in the gateway (max_buf_size, 16 KiB) and hyper's read buffer and one chunk in
    //   the reader (64 KiB);
    // - in the gateway: the frame being written, coalesced up to 16 KiB plus one message, and
    //   a chunk in each HTTP/2 layer: 32 KiB;
    // - between the gateway and the backend: the gateway's HTTP/2 stream window on its
    //   upstream connection, 2 MiB (hyper's client default, which edge's tonic endpoint
    //   keeps), plus in the backend tonic's 32 KiB encoding batch, one DATA chunk and the
    //   producer's channel of one: 64 KiB.
    // A gateway that buffered without bound would let the producer run to COUNT.
    let reader_side = if h2 {
        64 * 1024
    } else {
        recv_buffer + send_buffer + 16 * 1024 + 64 * 1024
    } + 32 * 1024;
    let upstream_side = (2 << 20) + 64 * 1024;
    let bound = first + (reader_side + upstream_side) / MESSAGE_BYTES;
    assert!(
        bound < COUNT / 2,
        "{bound}: the bound must leave room to tell unbounded buffering apart"
    );
    // The producer fills all of that, then stops: wait until it has not moved for a second.
    let mut seen = (usize::MAX, tokio::time::Instant::now());
    let held = eventually("the producer to stop", Duration::from_secs(120), || {
        let n = s.stats.watch_sent.load(Ordering::SeqCst);
        let now = tokio::time::Instant::now();
        if n != seen.0 {
            seen = (n, now);
            None
        } else {
            (now - seen.1 >= Duration::from_secs(1)).then_some(n)
        }
    })
    .await;
    eprintln!("h2 {h2}: producer stopped after {held} of {COUNT} messages (bound {bound})");
    // Reading on gets every message.
    let mut lines = first;
    within("the rest of the stream", Duration::from_secs(120), async {
        while let Some(frame) = body.frame().await {
            lines += lines_of(frame.unwrap());
        }
    })
    .await;
    assert_eq!(lines, COUNT);
    assert_eq!(s.stats.watch_sent.load(Ordering::SeqCst), COUNT);
    (held, bound)
}

#[tokio::test]
async fn a_slow_reader_holds_the_upstream_back() {
    for h2 in [true, false] {
        let (held, bound) = slow_reader(h2).await;
        assert!(
            held <= bound,
            "{held} messages produced for a reader that stopped (h2: {h2}); windows and buffers hold {bound}"
        );
    }
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream_call() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    for h2 in [false, true] {
        let before = s.stats.watch_cancelled.load(Ordering::SeqCst);
        let c = client(h2);
        let req = Request::get(format!(
            "http://{}/v1/shelves/1/books:watch?count=1000000&interval=0.001s",
            s.gw.addr
        ))
        .body(Full::<Bytes>::default())
        .unwrap();
        let response = c.open(req).await;
        let mut body = response.into_body();
        within("the first frame", PATIENCE, body.frame())
            .await
            .unwrap()
            .unwrap();
        drop(body);
        drop(c);
        eventually(
            &format!("the upstream call to be cancelled after the client left (h2: {h2})"),
            PATIENCE,
            || (s.stats.watch_cancelled.load(Ordering::SeqCst) > before).then_some(()),
        )
        .await;
    }
}

fn delimited(messages: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        prost::encoding::encode_varint(m.len() as u64, &mut out);
        out.extend_from_slice(m);
    }
    out
}

#[tokio::test]
async fn client_streams_in_every_framing() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let c = client(false);
    let book = |t: &str| pb::Book {
        title: t.into(),
        ..pb::Book::default()
    };
    let (a, b, cc) = (
        book("a").encode_to_vec(),
        book("b").encode_to_vec(),
        book("c").encode_to_vec(),
    );
    let msgpack = |t: &str| {
        protogate_tests::convert_with(
            &library::schema(),
            "library.v1.Book",
            Format::Json,
            Format::Msgpack,
            format!(r#"{{"title":"{t}"}}"#).as_bytes(),
        )
    };
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        (
            "application/x-ndjson",
            b"{\"title\":\"a\"}\n{\"title\":\"b\"}\n\n{\"title\":\"c\"}".to_vec(),
        ),
        (
            "application/json",
            br#"[{"title":"a"}, {"title":"b"}, {"title":"c"}]"#.to_vec(),
        ),
        (
            "application/msgpack",
            [msgpack("a"), msgpack("b"), msgpack("c")].concat(),
        ),
        ("application/x-protobuf", delimited(&[&a, &b, &cc])),
    ];
    for path in ["/v1/books:import", "/library.v1.Library/ImportBooks"] {
        for (ct, body) in &bodies {
            let w = request(
                &c,
                "POST",
                s.gw.addr,
                path,
                &[("content-type", ct), ("accept", "application/json")],
                body.clone(),
            )
            .await;
            assert_eq!(w.status, 200, "{ct}: {:?}", w.body);
            assert_eq!(
                serde_json::from_slice::<Value>(&w.body).unwrap(),
                json!({"books": [{"title": "a"}, {"title": "b"}, {"title": "c"}], "nextPageToken": "3"}),
                "{path} {ct}"
            );
        }
    }
    assert_eq!(s.stats.imports_completed.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn a_broken_client_stream_is_never_taken_for_a_complete_one() {
    // A message's limit and the whole stream's, from a configuration file's keys.
    let s = start_library_toml("max_body_bytes = 1024\nmax_stream_bytes = 8192\n").await;
    let c = client(false);
    let post = |ct: &'static str, body: Vec<u8>| {
        let c = c.clone();
        let addr = s.gw.addr;
        async move {
            request(
                &c,
                "POST",
                addr,
                "/v1/books:import",
                &[("content-type", ct)],
                body,
            )
            .await
        }
    };
    let message = |w: &Answer| {
        serde_json::from_slice::<Value>(&w.body).unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // A malformed second message.
    let w = post(
        "application/x-ndjson",
        b"{\"title\":\"a\"}\n{\"title\":7}\n{\"title\":\"c\"}\n".to_vec(),
    )
    .await;
    assert_eq!(w.status, 400);
    assert!(
        message(&w).contains("message 1") && message(&w).contains("title"),
        "{}",
        message(&w)
    );
    // An unclosed array.
    let w = post("application/json", br#"[{"title":"a"}"#.to_vec()).await;
    assert_eq!(w.status, 400);
    assert!(message(&w).contains("not closed"), "{}", message(&w));
    // One message over the per-message limit.
    let big = format!("{{\"title\":\"{}\"}}\n", "x".repeat(2000));
    let w = post("application/x-ndjson", big.into_bytes()).await;
    assert_eq!(w.status, 400);
    assert!(message(&w).contains("1024 byte limit"), "{}", message(&w));
    // The whole stream over its limit.
    let many = "{\"title\":\"a\"}\n".repeat(1000);
    let w = post("application/x-ndjson", many.into_bytes()).await;
    assert_eq!(w.status, 413);
    // A type that is no stream framing.
    let w = post("text/plain", b"x".to_vec()).await;
    assert_eq!(w.status, 415);
    // The upstream's own error.
    let w = post(
        "application/x-ndjson",
        b"{\"title\":\"a\"}\n{\"title\":\"fail\"}\n".to_vec(),
    )
    .await;
    assert_eq!(w.status, 400);
    assert!(message(&w).contains("book 1 cannot be imported"));
    // The upstream failed that last call itself: it did reach it.
    assert!(s.stats.imports_started.load(Ordering::SeqCst) >= 1);
    assert_no_import_completed(&s.stats).await;

    // Whether a call above reached the upstream before its body failed depends on which the
    // gateway polled first. Here the upstream has taken the first message before the stream
    // breaks, so a broken stream ended cleanly would be counted as a completed import. A
    // client of its own: a reset request has no answer, which `Http` takes for a failure.
    let c = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<StreamBody<RecvStream<std::io::Error>>>();
    let first = Bytes::from_static(b"{\"title\":\"a\"}\n");
    /// What follows the first message.
    enum Then {
        Send(Bytes),
        End,
        Reset,
    }
    let breaks = [
        // A malformed message.
        (
            "malformed",
            "application/x-ndjson",
            Then::Send(Bytes::from_static(b"{\"title\":7}\n")),
            Some(400),
        ),
        // The body ends inside the array (an element ends at its ',').
        ("unclosed", "application/json", Then::End, Some(400)),
        // The stream goes over its limit.
        (
            "too long",
            "application/x-ndjson",
            Then::Send(Bytes::from("{\"title\":\"a\"}\n".repeat(1000))),
            Some(413),
        ),
        // The client's request stream breaks off (it is reset): no answer to read.
        ("reset", "application/x-ndjson", Then::Reset, None),
    ];
    for (case, ct, then, status) in breaks {
        let first = if ct == "application/json" {
            Bytes::from_static(b"[{\"title\":\"a\"},")
        } else {
            first.clone()
        };
        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
        let req = Request::post(format!("http://{}/v1/books:import", s.gw.addr))
            .header("content-type", ct)
            .body(StreamBody::new(
                Box::pin(ReceiverStream::new(rx)) as RecvStream<_>
            ))
            .unwrap();
        let received = s.stats.import_messages.load(Ordering::SeqCst);
        tx.send(Ok(Frame::data(first))).await.unwrap();
        let answer = tokio::spawn(c.request(req));
        eventually(
            &format!("{case}: the upstream to take the first message"),
            PATIENCE,
            || (s.stats.import_messages.load(Ordering::SeqCst) > received).then_some(()),
        )
        .await;
        match then {
            Then::Send(data) => tx.send(Ok(Frame::data(data))).await.unwrap(),
            Then::Reset => tx
                .send(Err(std::io::Error::other("client gone")))
                .await
                .unwrap(),
            Then::End => drop(tx),
        }
        let answer = within(&format!("{case}: the answer"), PATIENCE, answer)
            .await
            .unwrap();
        if let Some(status) = status {
            assert_eq!(answer.unwrap().status(), status, "{case}");
        }
        assert_no_import_completed(&s.stats).await;
    }
}

/// Waits until every ImportBooks call the upstream began has ended, then checks that none of
/// them saw a complete request stream.
async fn assert_no_import_completed(stats: &library::Stats) {
    eventually("every import the upstream began to end", PATIENCE, || {
        (stats.imports_ended.load(Ordering::SeqCst) == stats.imports_started.load(Ordering::SeqCst))
            .then_some(())
    })
    .await;
    assert_eq!(stats.imports_completed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn bidirectional_streams_flow_both_ways_over_http2() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    // HTTP/1.1 cannot carry them.
    let w = request(
        &client(false),
        "POST",
        s.gw.addr,
        "/v1/books:chat",
        &[("content-type", "application/x-ndjson")],
        "{}\n",
    )
    .await;
    assert_eq!(w.status, 501);

    // Over HTTP/2 each answer arrives before the next request is sent.
    let c = client(true);
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
    let body = StreamBody::new(ReceiverStream::new(rx));
    let req = Request::post(format!("http://{}/v1/books:chat", s.gw.addr))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .unwrap();
    let send = |t: &str| {
        within(
            "the request stream to take a message",
            PATIENCE,
            tx.send(Ok(Frame::data(Bytes::from(format!(
                "{{\"title\":\"{t}\"}}\n"
            ))))),
        )
    };
    send("hello").await.unwrap();
    let response = c.open(req).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let mut body = response.into_body();
    let mut next_line = async || -> Value {
        let frame = within(
            "an answer while the request is still open",
            PATIENCE,
            body.frame(),
        )
        .await
        .unwrap()
        .unwrap();
        serde_json::from_slice(frame.data_ref().unwrap()).unwrap()
    };
    assert_eq!(next_line().await, json!({"title": "HELLO"}));
    send("again").await.unwrap();
    assert_eq!(next_line().await, json!({"title": "AGAIN"}));
    send("fail").await.unwrap();
    let last = next_line().await;
    assert_eq!(last["@error"]["code"], 10, "{last}");
    drop(tx);
}

#[tokio::test]
async fn stream_downgrades_count_per_message() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let c = client(false);
    request(
        &c,
        "GET",
        s.gw.addr,
        "/v1/shelves/1/books:watch?count=4",
        &[("accept", "application/x-ndjson")],
        "",
    )
    .await;
    let text = c.metrics(s.gw.addr).await;
    assert_eq!(
        metric(
            &text,
            r#"protogate_downgrades_total{method="library.v1.Library/WatchBooks",reason="json_requested"}"#
        ),
        4.0,
        "{text}"
    );
}

#[tokio::test]
async fn strict_accept_negotiates_the_stream_framing() {
    let s = start_library_toml("strict_accept = true\n").await;
    let c = client(false);
    let (addr, path) = (s.gw.addr, "/v1/shelves/1/books:watch?count=2");
    for (accept, want) in [
        ("text/event-stream", "text/event-stream"),
        ("application/x-ndjson", "application/x-ndjson"),
    ] {
        let w = request(&c, "GET", addr, path, &[("accept", accept)], "").await;
        assert_eq!(w.status, 200, "{accept}");
        assert_eq!(content_type(&w), want);
    }
    let w = request(&c, "GET", addr, path, &[("accept", "text/html")], "").await;
    assert_eq!(w.status, 406);
}

#[tokio::test]
async fn a_client_that_leaves_a_bidirectional_stream_resets_the_upstream_call() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let c = Http::h2();
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
    let req = Request::post(format!("http://{}/v1/books:chat", s.gw.addr))
        .header("content-type", "application/x-ndjson")
        .body(StreamBody::new(
            Box::pin(ReceiverStream::new(rx)) as RecvStream<_>
        ))
        .unwrap();
    tx.send(Ok(Frame::data(Bytes::from_static(b"{\"title\":\"hi\"}\n"))))
        .await
        .unwrap();
    let response = c.open(req).await;
    let mut body = response.into_body();
    within("the first answer", PATIENCE, body.frame())
        .await
        .unwrap()
        .unwrap();
    // The client's request side breaks off mid-conversation (its stream is reset).
    tx.send(Err(std::io::Error::other("client gone")))
        .await
        .unwrap();
    eventually(
        "the upstream to stop waiting for the rest of the request stream",
        PATIENCE,
        || (s.stats.chats_ended.load(Ordering::SeqCst) > 0).then_some(()),
    )
    .await;
    // Reset, not ended cleanly: the upstream must not take half a stream for all of it.
    assert_eq!(s.stats.chats_completed.load(Ordering::SeqCst), 0);
}

type RecvStream<E> =
    std::pin::Pin<Box<dyn futures_core::Stream<Item = Result<Frame<Bytes>, E>> + Send>>;

#[tokio::test]
async fn a_stream_is_in_flight_until_its_last_message_and_recorded_then() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let metrics = || s.edge.metrics().render();
    const IN_FLIGHT: &str = "protogate_requests_in_flight";
    const DONE: &str = r#"protogate_requests_total{method="library.v1.Library/WatchBooks",request_format="json",response_format="json",code="200",grpc_code="OK",protocol="http"}"#;
    for h2 in [false, true] {
        let done_before = metric(&metrics(), DONE);
        let c = client(h2);
        // Held: the upstream sends its second (last) book only when the test lets it.
        let req = Request::get(format!(
            "http://{}/v1/shelves/1/books:watch?count=2",
            s.gw.addr
        ))
        .header("accept", "application/x-ndjson")
        .header("grpc-metadata-x-test-stream", "hold")
        .body(Full::<Bytes>::default())
        .unwrap();
        let response = c.open(req).await;
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        // The first message is out (headers went with it); the second waits.
        within("the first message", PATIENCE, body.frame())
            .await
            .unwrap()
            .unwrap();
        let during = metrics();
        assert_eq!(metric(&during, IN_FLIGHT), 1.0, "h2 {h2}: {during}");
        assert_eq!(metric(&during, DONE), done_before, "h2 {h2}: {during}");
        s.stats.release.notify_one();
        within("the rest of the stream", PATIENCE, async {
            while let Some(frame) = body.frame().await {
                frame.unwrap();
            }
        })
        .await;
        // The gateway records the stream when it drops the body, right after its last frame.
        let after = eventually("the stream to be recorded", PATIENCE, || {
            let text = metrics();
            (metric(&text, IN_FLIGHT) == 0.0).then_some(text)
        })
        .await;
        assert_eq!(metric(&after, DONE), done_before + 1.0, "h2 {h2}: {after}");

        // A client that leaves mid-stream: counted as 499 when the gateway notices.
        const LEFT: &str = r#"protogate_requests_total{method="library.v1.Library/WatchBooks",request_format="json",response_format="json",code="499",grpc_code="Canceled",protocol="http"}"#;
        let left_before = metric(&after, LEFT);
        let c = client(h2);
        let req = Request::get(format!(
            "http://{}/v1/shelves/1/books:watch?count=1000&interval=0.05s",
            s.gw.addr
        ))
        .header("accept", "application/x-ndjson")
        .body(Full::<Bytes>::default())
        .unwrap();
        let mut body = c.open(req).await.into_body();
        within("the first message", PATIENCE, body.frame())
            .await
            .unwrap()
            .unwrap();
        drop(body);
        drop(c);
        let after = eventually(
            "the stream the client left to be recorded",
            PATIENCE,
            || {
                let text = metrics();
                (metric(&text, LEFT) > left_before && metric(&text, IN_FLIGHT) == 0.0)
                    .then_some(text)
            },
        )
        .await;
        assert_eq!(metric(&after, LEFT), left_before + 1.0, "h2 {h2}: {after}");
        assert_eq!(metric(&after, DONE), done_before + 1.0, "h2 {h2}: {after}");
    }
}

#[tokio::test]
async fn a_message_that_does_not_render_ends_the_stream_cleanly_in_every_framing() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    // HTTP/2: the trailers reach the client.
    let c = client(true);
    let (addr, path) = (s.gw.addr, "/v1/shelves/1/books:watch?count=3");
    let broken = ("grpc-metadata-x-test-stream", "broken-utf8");
    for (accept, framing) in [
        ("application/x-ndjson", InFraming::Ndjson),
        ("application/json", InFraming::JsonArray),
        ("application/msgpack", InFraming::Msgpack),
    ] {
        let w = request(&c, "GET", addr, path, &[("accept", accept), broken], "").await;
        assert_eq!(w.status, StatusCode::OK);
        // The whole body is well-formed: the good message, then the error record (nothing of
        // the failed message, not even its separator), and nothing after.
        let records = messages(framing, &w.body);
        assert_eq!(
            records.len(),
            2,
            "{accept}: {:?}",
            String::from_utf8_lossy(&w.body)
        );
        assert_eq!(records[0]["title"], "good");
        assert_eq!(records[1]["@error"]["code"], 13, "{accept}: {records:?}");
        let trailers = w.trailers.expect("trailers");
        assert_eq!(trailers["grpc-status"], "13");
    }
    let w = request(
        &c,
        "GET",
        addr,
        path,
        &[("accept", "text/event-stream"), broken],
        "",
    )
    .await;
    let events = sse_events(&w.body);
    assert_eq!(events.len(), 2, "{:?}", String::from_utf8_lossy(&w.body));
    assert_eq!(events[0].1["title"], "good");
    assert_eq!(events[1].0, "error");
    assert_eq!(events[1].1["code"], 13, "{events:?}");
}

/// A stream's end sends no empty DATA frame (the soak found one after every stream whose end
/// came after its last message was sent; h2 clients tear down a connection after 100 of
/// them): 120 such streams in a row on one HTTP/2 connection all end well.
#[tokio::test]
async fn many_streams_on_one_connection_send_no_empty_frames() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let http = Http::h2();
    for i in 0..120 {
        // One book, then the upstream holds the stream open until released: its end comes
        // after the book has been sent on.
        let req = Request::get(format!(
            "http://{}/v1/shelves/1/books:watch?count=1",
            s.gw.addr
        ))
        .header("accept", "application/x-ndjson")
        .header("grpc-metadata-x-test-stream", "hold")
        .body(Full::<Bytes>::default())
        .unwrap();
        let response = http.open(req).await;
        assert_eq!(response.status(), 200, "stream {i}");
        let mut body = response.into_body();
        let first = within("the book", PATIENCE, body.frame())
            .await
            .expect("a frame")
            .expect("no error");
        assert!(first.is_data(), "stream {i}");
        s.stats.release.notify_one();
        let rest = within("the end", PATIENCE, body.collect())
            .await
            .unwrap_or_else(|e| panic!("stream {i}: {e}"));
        let trailers = rest.trailers().cloned().expect("trailers");
        assert_eq!(trailers.get("grpc-status").unwrap(), "0", "stream {i}");
    }
}

/// Over HTTP/1.1 a stream's status goes in trailers when the client takes them (`TE:
/// trailers`; the answer declares them in `Trailer`, without which hyper drops them).
#[tokio::test]
async fn http1_streams_send_their_status_in_trailers_to_a_client_that_takes_them() {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let a = Http::h1()
        .request(
            "GET",
            s.gw.addr,
            "/v1/shelves/1/books:watch?count=2",
            &[("accept", "application/x-ndjson"), ("te", "trailers")],
            "",
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("trailer"), Some("grpc-status, grpc-message"));
    let trailers = a.trailers.expect("trailers over HTTP/1.1");
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    // Without TE: trailers, no Trailer header (and no trailers).
    let a = Http::h1()
        .request(
            "GET",
            s.gw.addr,
            "/v1/shelves/1/books:watch?count=2",
            &[("accept", "application/x-ndjson")],
            "",
        )
        .await;
    assert_eq!(a.header("trailer"), None);
}

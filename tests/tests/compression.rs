//! Content codings through the real gateway: answers compressed by Accept-Encoding (gzip, br,
//! zstd, deflate; q-values; a minimum size; protobuf left alone unless configured; `Vary`),
//! a stream compressed and still readable message by message, compressed request bodies
//! decoded with the limit on the decoded size (a bomb is 413), an unknown coding 415, and
//! gzip-compressed gRPC messages to and from upstreams. Each is configured by its keys in a
//! configuration file (`[compression]`, `upstream_compression`), read by the binary's loader.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use protogate_tests::{
    Answer, Http, LIBRARY_PROTO, encode, library, start_backend, start_gateway_toml,
    start_gateway_toml_with, start_gzip_backend, start_library_toml, within,
};
use serde_json::{Value, json};

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const PATIENCE: Duration = Duration::from_secs(30);

/// `[compression]` with `keys` (none: the table alone, which turns compression on).
fn compression(keys: &str) -> String {
    format!("[compression]\n{keys}")
}

fn decompress(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(data).read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(data).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(data, 4096).read_to_end(&mut out),
        "zstd" => zstd::stream::read::Decoder::new(data)
            .unwrap()
            .read_to_end(&mut out),
        other => panic!("unexpected coding {other}"),
    }
    .unwrap_or_else(|e| panic!("{coding}: {e}"));
    out
}

/// Whether the answer says it varies by Accept-Encoding (in any of its Vary fields).
fn varies_on_encoding(w: &Answer) -> bool {
    w.headers
        .get_all("vary")
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .any(|v| v.trim().eq_ignore_ascii_case("accept-encoding"))
}

/// A Thing whose JSON is about `size` bytes.
fn big_thing(size: usize) -> Value {
    json!({"id": "7", "name": "n".repeat(size), "price": 2.5})
}

async fn echo(
    http: &Http,
    addr: std::net::SocketAddr,
    accept_encoding: &str,
    size: usize,
) -> Answer {
    http.post(
        addr,
        ECHO,
        "application/json",
        &[("accept-encoding", accept_encoding)],
        big_thing(size).to_string(),
    )
    .await
}

#[tokio::test]
async fn answers_in_every_coding_decode_to_the_uncompressed_answer() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway_toml(&compression(""), &format!("http://{}", backend.addr)).await;
    for http in [Http::h1(), Http::h2()] {
        let plain = echo(&http, gw.addr, "identity", 5000).await;
        assert_eq!(plain.status, StatusCode::OK);
        assert_eq!(plain.header("content-encoding"), None);
        assert!(varies_on_encoding(&plain));
        assert_eq!(plain.json(), big_thing(5000));
        for coding in ["gzip", "br", "zstd", "deflate"] {
            let w = echo(&http, gw.addr, coding, 5000).await;
            assert_eq!(w.status, StatusCode::OK, "{coding}");
            assert_eq!(w.header("content-encoding"), Some(coding));
            assert!(varies_on_encoding(&w));
            assert!(
                w.body.len() < plain.body.len() / 10,
                "{coding}: {}",
                w.body.len()
            );
            // HTTP/1.1: the compressed length, not the original's.
            if let Some(len) = w.header("content-length") {
                assert_eq!(len, w.body.len().to_string(), "{coding}");
            }
            assert_eq!(decompress(coding, &w.body), plain.body, "{coding}");
        }
        // q-values: the highest weight wins; q=0 refuses; then the gateway's order.
        let w = echo(&http, gw.addr, "gzip;q=0.5, br;q=0.9", 5000).await;
        assert_eq!(w.header("content-encoding"), Some("br"));
        let w = echo(&http, gw.addr, "*, zstd;q=0", 5000).await;
        assert_eq!(w.header("content-encoding"), Some("br"));
        let w = echo(&http, gw.addr, "gzip;q=0", 5000).await;
        assert_eq!(w.header("content-encoding"), None);
        assert_eq!(w.body, plain.body);
        // Below min_bytes: as it is, still saying it varies.
        let small = echo(&http, gw.addr, "gzip", 100).await;
        assert_eq!(small.header("content-encoding"), None);
        assert!(varies_on_encoding(&small));
        assert_eq!(small.json(), big_thing(100));
        // Errors are answers too: a large one is compressed like any other.
        let w = http
            .post(
                gw.addr,
                ECHO,
                "application/json",
                &[("accept-encoding", "gzip")],
                format!("{{\"nope{}\": 1}}", "x".repeat(3000)),
            )
            .await;
        assert_eq!(w.status, StatusCode::BAD_REQUEST);
        assert_eq!(w.header("content-encoding"), Some("gzip"));
        let status: Value = serde_json::from_slice(&decompress("gzip", &w.body)).unwrap();
        assert_eq!(status["code"], 3, "{status}");
    }
}

#[tokio::test]
async fn only_the_configured_codings_and_formats_are_compressed() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let thing = protogate_tests::pb::Thing {
        name: "n".repeat(5000),
        ..Default::default()
    };
    let protobuf = |gw: std::net::SocketAddr| {
        let body = encode(&thing);
        async move {
            Http::h1()
                .post(
                    gw,
                    ECHO,
                    "application/x-protobuf",
                    &[
                        ("accept", "application/x-protobuf"),
                        ("accept-encoding", "gzip"),
                    ],
                    body,
                )
                .await
        }
    };
    // Protobuf is left alone by default (and says nothing of Vary)...
    let (gw, _) = start_gateway_toml(&compression(""), &upstream).await;
    let w = protobuf(gw.addr).await;
    assert_eq!(w.status, StatusCode::OK);
    assert_eq!(w.header("content-encoding"), None);
    assert!(!varies_on_encoding(&w));
    assert_eq!(w.body, encode(&thing));
    // ...compressed when configured.
    let (gw, _) = start_gateway_toml(&compression("protobuf = true\n"), &upstream).await;
    let w = protobuf(gw.addr).await;
    assert_eq!(w.header("content-encoding"), Some("gzip"));
    assert_eq!(decompress("gzip", &w.body), encode(&thing));
    // Only the offered codings; MessagePack is compressed like JSON.
    let (gw, _) = start_gateway_toml(&compression("algorithms = [\"gzip\"]\n"), &upstream).await;
    let w = echo(&Http::h1(), gw.addr, "zstd, br", 5000).await;
    assert_eq!(w.header("content-encoding"), None);
    let w = Http::h1()
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[
                ("accept", "application/msgpack"),
                ("accept-encoding", "br, gzip;q=0.1"),
            ],
            big_thing(5000).to_string(),
        )
        .await;
    assert_eq!(w.header("content-type"), Some("application/msgpack"));
    assert_eq!(w.header("content-encoding"), Some("gzip"));
    // Off (the default): nothing changes.
    let (gw, _) = start_gateway_toml("", &upstream).await;
    let w = echo(&Http::h1(), gw.addr, "gzip", 5000).await;
    assert_eq!(w.header("content-encoding"), None);
    assert!(!varies_on_encoding(&w));
}

/// A held stream: the first book is sent, the second waits for the test. The first book must
/// decode from what arrived before the stream ends: compression flushes every frame.
#[tokio::test]
async fn a_compressed_stream_is_delivered_message_by_message() {
    let s = start_library_toml(&compression("")).await;
    for (h2, coding) in [
        (false, "gzip"),
        (true, "zstd"),
        (false, "br"),
        (true, "deflate"),
    ] {
        let http = if h2 { Http::h2() } else { Http::h1() };
        let req = Request::get(format!(
            "http://{}/v1/shelves/1/books:watch?count=2&title_bytes=3000",
            s.gw.addr
        ))
        .header("accept", "application/x-ndjson")
        .header("accept-encoding", coding)
        .header("grpc-metadata-x-test-stream", "hold")
        .body(Full::<Bytes>::default())
        .unwrap();
        let response = http.open(req).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers().get("content-encoding").unwrap(),
            coding,
            "h2 {h2}"
        );
        let mut body = response.into_body();
        let mut wire = Vec::new();
        // Frames until the first line decodes (all of it was flushed before the hold).
        let first = within("the first book, decoded", PATIENCE, async {
            loop {
                let frame = body.frame().await.expect("a frame").expect("data");
                if let Some(data) = frame.data_ref() {
                    wire.extend_from_slice(data);
                }
                let text = partial(coding, &wire);
                if let Some(end) = text.iter().position(|&b| b == b'\n') {
                    return serde_json::from_slice::<Value>(&text[..end]).unwrap();
                }
            }
        })
        .await;
        assert_eq!(first["name"], "shelves/1/books/0", "{coding}");
        s.stats.release.notify_one();
        let rest = within("the rest", PATIENCE, body.collect()).await.unwrap();
        wire.extend_from_slice(&rest.to_bytes());
        let all = decompress(coding, &wire);
        let lines: Vec<Value> = all
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{coding}");
        assert_eq!(lines[1]["name"], "shelves/1/books/1");
    }
}

/// What a decoder makes of a compressed stream that has not ended.
fn partial(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut reader: Box<dyn Read + '_> = match coding {
        "gzip" => Box::new(flate2::read::GzDecoder::new(data)),
        "deflate" => Box::new(flate2::read::ZlibDecoder::new(data)),
        "br" => Box::new(brotli::Decompressor::new(data, 4096)),
        "zstd" => Box::new(zstd::stream::read::Decoder::new(data).unwrap()),
        other => panic!("{other}"),
    };
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn compress(coding: &str, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match coding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 9, 22);
                e.write_all(data).unwrap();
            }
            out
        }
        "zstd" => zstd::bulk::compress(data, 19).unwrap(),
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn compressed_request_bodies_are_decoded_and_held_to_the_limit() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway_toml(
        "max_body_bytes = 1048576\n",
        &format!("http://{}", backend.addr),
    )
    .await;
    let thing = big_thing(20_000);
    for http in [Http::h1(), Http::h2()] {
        for coding in ["gzip", "br", "zstd", "deflate", "GZIP"] {
            let body = compress(&coding.to_lowercase(), thing.to_string().as_bytes());
            let w = post_json(&http, gw.addr, coding, body).await;
            assert_eq!(w.status, StatusCode::OK, "{coding}: {:?}", w.body);
            assert_eq!(w.json(), thing, "{coding}");
        }
        // A protobuf body passes through decoded, byte for byte.
        let thing = protogate_tests::pb::Thing {
            name: "p".repeat(10_000),
            ..Default::default()
        };
        let w = http
            .post(
                gw.addr,
                ECHO,
                "application/x-protobuf",
                &[
                    ("content-encoding", "zstd"),
                    ("accept", "application/x-protobuf"),
                ],
                compress("zstd", &encode(&thing)),
            )
            .await;
        assert_eq!(w.status, StatusCode::OK);
        assert_eq!(w.body, encode(&thing));
        // A bomb: 10 MB of JSON whitespace, a few KB compressed, is refused at the limit.
        let mut bomb = vec![b' '; 10_000_000];
        bomb.extend_from_slice(b"{}");
        for coding in ["gzip", "zstd", "br"] {
            let body = compress(coding, &bomb);
            assert!(body.len() < 20_000, "{coding}: {}", body.len());
            let w = post_json(&http, gw.addr, coding, body).await;
            assert_eq!(w.status, StatusCode::PAYLOAD_TOO_LARGE, "{coding}");
            let status = w.json();
            assert!(
                status["message"].as_str().unwrap().contains("1048576"),
                "{status}"
            );
        }
        // Not what it says it is: 400 naming the coding.
        let w = post_json(&http, gw.addr, "gzip", "{\"name\": \"plain\"}").await;
        assert_eq!(w.status, StatusCode::BAD_REQUEST);
        assert!(
            w.json()["message"].as_str().unwrap().contains("gzip"),
            "{:?}",
            w.json()
        );
        // Cut short: refused, never taken for a complete body.
        let mut cut = compress("gzip", thing_json().as_bytes());
        cut.truncate(cut.len() - 4);
        let w = post_json(&http, gw.addr, "gzip", cut).await;
        assert_eq!(w.status, StatusCode::BAD_REQUEST);
        // A coding the gateway cannot decode: 415 naming it.
        let w = post_json(&http, gw.addr, "compress", "{}").await;
        assert_eq!(w.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(
            w.json()["message"]
                .as_str()
                .unwrap()
                .contains("\"compress\""),
            "{:?}",
            w.json()
        );
    }
}

/// A JSON body to Echo, sent with `Content-Encoding: coding`.
async fn post_json(
    http: &Http,
    addr: std::net::SocketAddr,
    coding: &str,
    body: impl Into<Bytes>,
) -> Answer {
    http.post(
        addr,
        ECHO,
        "application/json",
        &[("content-encoding", coding)],
        body,
    )
    .await
}

fn thing_json() -> String {
    big_thing(2000).to_string()
}

/// A client stream's body is decoded as a whole before it is split into messages.
#[tokio::test]
async fn a_compressed_request_stream_is_decoded() {
    let s = start_library_toml("").await;
    let lines: String = (0..50)
        .map(|i| {
            format!(
                "{{\"name\":\"shelves/1/books/{i}\",\"title\":\"{}\"}}\n",
                "t".repeat(200)
            )
        })
        .collect();
    let w = Http::h1()
        .post(
            s.gw.addr,
            "/v1/books:import",
            "application/x-ndjson",
            &[("content-encoding", "gzip")],
            compress("gzip", lines.as_bytes()),
        )
        .await;
    assert_eq!(w.status, StatusCode::OK, "{:?}", w.body);
    assert_eq!(w.json()["nextPageToken"], "50", "{:?}", w.json());
}

#[tokio::test]
async fn gzip_messages_from_and_to_upstreams() {
    // An upstream that compresses its answers (unary through the gateway's own client).
    let backend = start_gzip_backend(false).await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml("", &upstream).await;
    let w = echo(&Http::h1(), gw.addr, "identity", 5000).await;
    assert_eq!(w.status, StatusCode::OK, "{:?}", w.body);
    assert_eq!(w.json(), big_thing(5000));

    // Sending compressed: only to an upstream that takes it.
    let gzip = "upstream_compression = \"gzip\"\n";
    let (gw, _) = start_gateway_toml(gzip, &upstream).await;
    let w = echo(&Http::h1(), gw.addr, "identity", 5000).await;
    assert_eq!(w.status, StatusCode::NOT_IMPLEMENTED, "{:?}", w.body);
    let taking = start_gzip_backend(true).await;
    let (gw, _) = start_gateway_toml(gzip, &format!("http://{}", taking.addr)).await;
    let w = echo(&Http::h1(), gw.addr, "identity", 5000).await;
    assert_eq!(w.status, StatusCode::OK, "{:?}", w.body);
    assert_eq!(w.json(), big_thing(5000));
}

/// Streams run on the streaming client: compressed answers and requests both ways.
#[tokio::test]
async fn gzip_streams_from_and_to_upstreams() {
    let (backend, _stats) = library::start_serving(true).await;
    for (compress_requests, upstream_compression) in [(false, "none"), (true, "gzip")] {
        let (gw, _) = start_gateway_toml_with(
            library::schema(),
            LIBRARY_PROTO,
            &format!("upstream_compression = \"{upstream_compression}\"\n"),
            &format!("http://{}", backend.addr),
        )
        .await;
        let w = Http::h1()
            .request(
                "GET",
                gw.addr,
                "/v1/shelves/1/books:watch?count=3&title_bytes=2000",
                &[("accept", "application/x-ndjson")],
                Bytes::new(),
            )
            .await;
        assert_eq!(w.status, StatusCode::OK, "{:?}", w.body);
        let books: Vec<Value> = w
            .body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(books.len(), 3, "{books:?}");
        assert_eq!(books[2]["title"].as_str().unwrap().len(), 2000);
        let lines: String = (0..5)
            .map(|i| format!("{{\"name\":\"shelves/1/books/{i}\"}}\n"))
            .collect();
        let w = Http::h1()
            .post(
                gw.addr,
                "/v1/books:import",
                "application/x-ndjson",
                &[],
                lines,
            )
            .await;
        assert_eq!(
            w.status,
            StatusCode::OK,
            "compress {compress_requests}: {:?}",
            w.body
        );
        assert_eq!(w.json()["nextPageToken"], "5");
    }
}

//! The gateway end to end: a real tonic backend (v2 schema) and the real gateway (v1 schema)
//! on loopback, spoken to over HTTP/1.1 and HTTP/2.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;

use protogate_tests::pb::{Kind, Part, Thing};
use protogate_tests::{
    Http, convert, decode_thing, encode, eventually, log_lines, metric, start_backend,
    start_gateway, start_gateway_toml, within,
};
use transcode::Format;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const RAW_ECHO: &str = "/protogate.test.svc.TestService/RawEcho";
const FAIL: &str = "/protogate.test.svc.TestService/Fail";
const SLOW: &str = "/protogate.test.svc.TestService/Slow";
const METADATA: &str = "/protogate.test.svc.TestService/Metadata";
const WATCH: &str = "/protogate.test.svc.TestService/Watch";
const THING: &str = "protogate.test.svc.Thing";

fn content_type(f: Format) -> &'static str {
    edge::negotiate::content_type(f)
}

/// A Thing with every v1 field set, as the v1 JSON mapping writes it.
const THING_JSON: &str = r#"{"id":"9007199254740993","name":"widget ✓","price":-0.0,"kind":"LARGE","parts":[{"id":"1","label":"a","blob":"AAEC/w=="}],"counts":{"x":"5"},"at":"2026-11-29T10:20:30.123Z","maybe":0,"big":"18446744073709551615"}"#;

fn config() -> edge::EdgeConfig {
    edge::EdgeConfig {
        downgrade_log_interval: Duration::ZERO,
        ..Default::default()
    }
}

/// [`config`] with `keys` (the settings under test) as a configuration file's text, for the
/// binary's loader.
fn config_toml(keys: &str) -> String {
    format!("downgrade_log_interval = \"0\"\n{keys}")
}

#[tokio::test]
async fn every_format_in_and_out() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let json = convert(THING, Format::Json, Format::Json, THING_JSON.as_bytes());
    let canonical = String::from_utf8(json.clone()).unwrap();
    for client in [Http::h1(), Http::h2()] {
        for from in [Format::Json, Format::Msgpack, Format::Protobuf] {
            for to in [Format::Json, Format::Msgpack, Format::Protobuf] {
                let body = convert(THING, Format::Json, from, &json);
                // RawEcho: the answer is exactly what the gateway sent upstream (a prost
                // backend would drop the -0.0, as prost does for implicit-presence doubles).
                let a = client
                    .post(
                        gw.addr,
                        RAW_ECHO,
                        content_type(from),
                        &[("accept", content_type(to))],
                        body,
                    )
                    .await;
                assert_eq!(
                    a.status,
                    200,
                    "{from:?} -> {to:?}: {:?}",
                    String::from_utf8_lossy(&a.body)
                );
                assert_eq!(a.header("content-type"), Some(content_type(to)));
                assert_eq!(a.header("vary"), Some("Accept"));
                let back = convert(THING, to, Format::Json, &a.body);
                assert_eq!(
                    String::from_utf8(back).unwrap(),
                    canonical,
                    "{from:?} -> {to:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn accept_decides_the_response_format() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let http = Http::h1();
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("application/json", None, "application/json"),
        ("application/x-msgpack", None, "application/msgpack"),
        (
            "application/vnd.msgpack",
            Some("*/*"),
            "application/msgpack",
        ),
        (
            "application/json; charset=utf-8",
            Some("application/*;q=0.5, application/x-protobuf;q=0.9"),
            "application/x-protobuf",
        ),
        (
            "application/json",
            Some("application/json;q=0, */*"),
            "application/x-protobuf",
        ),
        (
            "application/json",
            Some("application/msgpack, application/json"),
            "application/json",
        ),
        (
            "application/x-protobuf",
            Some("text/html"),
            "application/json",
        ),
        (
            "Application/X-Google-Protobuf",
            Some("application/protobuf"),
            "application/x-protobuf",
        ),
    ];
    for (ct, accept, want) in cases {
        let body = convert(
            THING,
            Format::Json,
            edge::negotiate::request_format(Some(&ct.parse().unwrap())).unwrap(),
            br#"{"id":"1"}"#,
        );
        let headers: Vec<(&str, &str)> = accept.iter().map(|a| ("accept", *a)).collect();
        let a = http.post(gw.addr, ECHO, ct, &headers, body).await;
        assert_eq!(a.status, 200, "{ct} / {accept:?}");
        assert_eq!(a.header("content-type"), Some(*want), "{ct} / {accept:?}");
    }
    let (strict, _) = start_gateway_toml(
        &config_toml("strict_accept = true\n"),
        &format!("http://{}", backend.addr),
    )
    .await;
    let a = http
        .post(
            strict.addr,
            ECHO,
            "application/json",
            &[("accept", "text/html")],
            r#"{"id":"1"}"#,
        )
        .await;
    assert_eq!(a.status, 406);
    assert!(
        a.json()["message"].as_str().unwrap().contains("text/html"),
        "{:?}",
        a.json()
    );
}

#[tokio::test]
async fn protobuf_passes_through_byte_for_byte_both_ways() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let v2 = Thing {
        id: 7,
        name: "v2 client".into(),
        parts: vec![Part {
            id: 1,
            label: "p".into(),
            blob: vec![0, 255],
            note: "v2 note".into(),
        }],
        secret_v2: "only v2 knows".into(),
        more_parts_v2: vec![Part {
            id: 2,
            note: "deep".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut bytes = encode(&v2);
    // Fields unknown even to v2, out of order, and a repeated field split around them: only a
    // byte-for-byte path returns these exact bytes.
    bytes.extend_from_slice(&[0xf8, 0x3e, 0x2a]); // field 1007, varint 42
    bytes.extend_from_slice(&[0x08, 0x07]); // id again
    bytes.extend_from_slice(&[0x2a, 0x02, 0x08, 0x03]); // parts: {id: 3}
    for client in [Http::h1(), Http::h2()] {
        let a = client
            .post(
                gw.addr,
                RAW_ECHO,
                "application/x-protobuf",
                &[],
                bytes.clone(),
            )
            .await;
        assert_eq!(a.status, 200);
        assert_eq!(
            a.body.as_ref(),
            bytes.as_slice(),
            "raw echo must return the exact bytes"
        );
        // Through a prost backend that knows v2: v2 fields reach it and come back.
        let a = client
            .post(gw.addr, ECHO, "application/x-protobuf", &[], encode(&v2))
            .await;
        assert_eq!(a.status, 200);
        assert_eq!(decode_thing(&a.body), v2);
    }
}

#[tokio::test]
async fn downgrades_are_logged_and_counted() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let http = Http::h1();
    let v2 = Thing {
        id: 1,
        parts: vec![Part {
            id: 1,
            note: "v2 only".into(),
            ..Default::default()
        }],
        secret_v2: "hidden".into(),
        ..Default::default()
    };
    let client = [
        ("x-client-id", "downgrade-test"),
        ("user-agent", "legacy-app/1.0"),
    ];
    // JSON asked for: json_requested, and the rendering drops the v2 fields: unknown_fields.
    let a = http
        .post(
            gw.addr,
            RAW_ECHO,
            "application/x-protobuf",
            &[client[0], client[1], ("accept", "application/json")],
            encode(&v2),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        serde_json::json!({"id": "1", "parts": [{"id": "1"}]})
    );
    let lines = log_lines("downgrade-test");
    assert!(
        lines.iter().any(|l| l.contains("WARN")
            && l.contains("downgrade")
            && l.contains("json_requested")
            && l.contains("protogate.test.svc.TestService/RawEcho")
            && l.contains("legacy-app/1.0")),
        "{lines:#?}"
    );
    let unknown = lines
        .iter()
        .find(|l| l.contains("unknown_fields"))
        .expect("an unknown_fields line");
    assert!(
        unknown.contains("#20 at (root)") && unknown.contains("#4 at parts[0]"),
        "{unknown}"
    );
    // MessagePack: no JSON, but the rendering still drops fields.
    let mp_client = [
        ("x-client-id", "downgrade-mp"),
        ("accept", "application/msgpack"),
    ];
    let a = http
        .post(
            gw.addr,
            RAW_ECHO,
            "application/x-protobuf",
            &mp_client,
            encode(&v2),
        )
        .await;
    assert_eq!(a.status, 200);
    let lines = log_lines("downgrade-mp");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("unknown_fields") && l.contains("msgpack")),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("json_requested")),
        "{lines:#?}"
    );
    // Accept names nothing we serve: JSON anyway, as accept_fallback.
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[("x-client-id", "downgrade-fb"), ("accept", "image/png")],
            r#"{"id":"2"}"#,
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert!(
        log_lines("downgrade-fb")
            .iter()
            .any(|l| l.contains("accept_fallback"))
    );
    // Protobuf out: no downgrade at all.
    let a = http
        .post(
            gw.addr,
            RAW_ECHO,
            "application/x-protobuf",
            &[("x-client-id", "downgrade-none")],
            encode(&v2),
        )
        .await;
    assert_eq!(a.status, 200);
    assert!(
        log_lines("downgrade-none")
            .iter()
            .all(|l| !l.contains("downgrade:"))
    );
    let text = http.metrics(gw.addr).await;
    let m = r#"method="protogate.test.svc.TestService/RawEcho""#;
    assert_eq!(
        metric(
            &text,
            &format!("protogate_downgrades_total{{{m},reason=\"json_requested\"}}")
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            &format!("protogate_downgrades_total{{{m},reason=\"unknown_fields\"}}")
        ),
        2.0,
        "{text}"
    );
}

#[tokio::test]
async fn downgrade_log_is_rate_limited_but_the_counter_is_exact() {
    let backend = start_backend().await;
    let cfg = "downgrade_log_interval = \"1h\"\n";
    let (gw, _) = start_gateway_toml(cfg, &format!("http://{}", backend.addr)).await;
    let http = Http::h1();
    for i in 0..25 {
        let client_id = if i % 5 == 0 { "limiter-b" } else { "limiter-a" };
        let a = http
            .post(
                gw.addr,
                ECHO,
                "application/json",
                &[("x-client-id", client_id)],
                r#"{"id":"3"}"#,
            )
            .await;
        assert_eq!(a.status, 200);
    }
    // The first occurrence per (method, reason, client) is logged at once; the rest wait.
    assert_eq!(
        log_lines("limiter-a")
            .iter()
            .filter(|l| l.contains("downgrade:"))
            .count(),
        1
    );
    assert_eq!(
        log_lines("limiter-b")
            .iter()
            .filter(|l| l.contains("downgrade:"))
            .count(),
        1
    );
    let text = http.metrics(gw.addr).await;
    let key = r#"protogate_downgrades_total{method="protogate.test.svc.TestService/Echo",reason="json_requested"}"#;
    assert_eq!(metric(&text, key), 25.0, "{text}");
}

#[tokio::test]
async fn errors_answer_with_google_rpc_status() {
    let backend = start_backend().await;
    let cfg = config_toml("max_body_bytes = 1024\n");
    let (gw, _) = start_gateway_toml(&cfg, &format!("http://{}", backend.addr)).await;
    let http = Http::h1();

    // 400 names the field path.
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[],
            r#"{"parts":[{"id":"1"},{"id":"x"}]}"#,
        )
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["code"], 3);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("parts[1].id"),
        "{:?}",
        a.json()
    );
    assert_eq!(a.header("grpc-status"), Some("3"));
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"nope":1}"#)
        .await;
    assert_eq!(a.status, 400);
    assert!(a.json()["message"].as_str().unwrap().contains("nope"));
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], "{\"id\": ")
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("malformed JSON at byte"),
        "{:?}",
        a.json()
    );
    let a = http
        .post(gw.addr, ECHO, "application/msgpack", &[], vec![0xc1])
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.header("content-type"), Some("application/msgpack"));
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[("grpc-timeout", "soon")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("grpc-timeout")
    );
    // A malformed deadline is answered in the negotiated format (the plan is made first).
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/msgpack",
            &[("grpc-timeout", "soon")],
            Bytes::from_static(b"\x80"),
        )
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.header("content-type"), Some("application/msgpack"));

    // 404, 405 (with Allow), 415, 413, 501.
    let a = http
        .post(
            gw.addr,
            "/protogate.test.svc.TestService/Nope",
            "application/json",
            &[],
            "{}",
        )
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["code"], 5);
    let a = http.get(gw.addr, ECHO).await;
    assert_eq!(a.status, 405);
    assert_eq!(a.header("allow"), Some("POST"));
    let a = http.post(gw.addr, ECHO, "text/plain", &[], "{}").await;
    assert_eq!(a.status, 415);
    assert!(a.json()["message"].as_str().unwrap().contains("text/plain"));
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], vec![b' '; 2048])
        .await;
    assert_eq!(a.status, 413);
    // A server-streaming method answers a stream (a JSON array without Accept).
    let a = http
        .post(gw.addr, WATCH, "application/json", &[], r#"{"name":"w"}"#)
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json(), serde_json::json!([{"name":"w"},{"name":"w"}]));

    // Upstream errors: HTTP status from the code, details rendered, metadata forwarded.
    let a = http
        .post(
            gw.addr,
            FAIL,
            "application/json",
            &[],
            r#"{"code": 5, "message": "no such thing", "badField": "id"}"#,
        )
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.header("grpc-status"), Some("5"));
    assert_eq!(a.header("grpc-message"), Some("no such thing"));
    assert_eq!(a.header("grpc-metadata-x-failure-id"), Some("f-17"));
    assert_eq!(
        a.json(),
        serde_json::json!({"code": 5, "message": "no such thing", "details": [
            {"@type": "type.googleapis.com/google.rpc.BadRequest",
             "fieldViolations": [{"field": "id", "description": "is not acceptable"}]}]})
    );
    for (code, status) in [
        (3, 400),
        (6, 409),
        (7, 403),
        (16, 401),
        (8, 429),
        (9, 400),
        (10, 409),
        (11, 400),
        (12, 501),
        (13, 500),
        (4, 504),
        (1, 499),
        (2, 500),
        (15, 500),
    ] {
        let a = http
            .post(
                gw.addr,
                FAIL,
                "application/json",
                &[],
                format!(r#"{{"code": {code}, "message": "m"}}"#),
            )
            .await;
        assert_eq!(a.status.as_u16(), status, "code {code}");
        assert_eq!(a.json()["code"], code);
    }
    // Details in protobuf: the upstream's google.rpc.Status bytes as they came.
    let a = http
        .post(
            gw.addr,
            FAIL,
            "application/json",
            &[("accept", "application/x-protobuf")],
            r#"{"code": 9, "message": "m", "badField": "f"}"#,
        )
        .await;
    assert_eq!(a.status, 400);
    let rendered = convert("google.rpc.Status", Format::Protobuf, Format::Json, &a.body);
    assert!(String::from_utf8_lossy(&rendered).contains("google.rpc.BadRequest"));
    // A detail of a type the schema lacks renders as base64 instead of failing, and is reported.
    let a = http
        .post(
            gw.addr,
            FAIL,
            "application/json",
            &[("x-client-id", "unknown-detail")],
            r#"{"code": 10, "message": "m", "unknownDetail": true}"#,
        )
        .await;
    assert_eq!(a.status, 409);
    assert_eq!(
        a.json()["details"][0],
        serde_json::json!({"@type": "type.googleapis.com/acme.internal.v9.Secret", "value": "CgZzZWNyZXQ="})
    );
    assert!(
        log_lines("unknown-detail")
            .iter()
            .any(|l| l.contains("unknown_fields") && l.contains("acme.internal.v9.Secret"))
    );
}

#[tokio::test]
async fn metadata_travels_both_ways() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let headers = [
        ("authorization", "Bearer t0k3n"),
        ("x-request-id", "req-42"),
        ("grpc-metadata-tenant", "acme"),
        ("cookie", "not-forwarded"),
    ];
    let a = Http::h1()
        .post(gw.addr, METADATA, "application/json", &headers, "{}")
        .await;
    assert_eq!(a.status, 200);
    let counts = a.json()["counts"].clone();
    assert!(
        counts.get("authorization=Bearer t0k3n").is_some(),
        "{counts}"
    );
    assert!(counts.get("x-request-id=req-42").is_some(), "{counts}");
    assert!(counts.get("tenant=acme").is_some(), "{counts}");
    assert!(
        counts
            .as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("cookie")),
        "{counts}"
    );
    assert_eq!(a.header("grpc-metadata-x-served-by"), Some("backend-v2"));
    // The client's request id is answered with.
    assert_eq!(a.header("x-request-id"), Some("req-42"));

    // Trace context reaches the upstream; a request without an id gets one, which the
    // upstream and the client both see.
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let a = Http::h2()
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("traceparent", traceparent), ("tracestate", "acme=1")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 200);
    let counts = a.json()["counts"].clone();
    assert!(
        counts.get(format!("traceparent={traceparent}")).is_some(),
        "{counts}"
    );
    assert!(counts.get("tracestate=acme=1").is_some(), "{counts}");
    let id = a.header("x-request-id").expect("a generated request id");
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert!(
        counts.get(format!("x-request-id={id}")).is_some(),
        "{counts}"
    );
    let other = Http::h1()
        .post(gw.addr, METADATA, "application/json", &[], "{}")
        .await;
    assert_ne!(other.header("x-request-id"), Some(id), "ids repeat");
    // Errors carry it too.
    let missing = Http::h1().get(gw.addr, "/nowhere").await;
    assert_eq!(missing.status, 404);
    assert!(missing.header("x-request-id").is_some());
    let a = Http::h1()
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("grpc-trace-bin", "%%%")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("grpc-trace-bin"),
        "{:?}",
        a.json()
    );

    // A binary value must be base64 (as gRPC sends it): the client's 400, naming the header,
    // not the upstream's INTERNAL.
    let a = Http::h1()
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("grpc-metadata-trace-bin", "%%%")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 400, "{:?}", a.json());
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("grpc-metadata-trace-bin"),
        "{:?}",
        a.json()
    );
    let a = Http::h1()
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("grpc-metadata-trace-bin", "AAEC")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json());
}

/// A `grpc-timeout` value: at most 8 digits and a unit (gRPC over HTTP/2, "Timeout").
pub(crate) fn grpc_timeout(value: &str) -> Duration {
    let (digits, unit) = value.split_at(value.len().saturating_sub(1));
    assert!(
        (1..=8).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()),
        "grpc-timeout {value:?}"
    );
    let n: u64 = digits.parse().unwrap();
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => panic!("grpc-timeout {value:?}: unknown unit"),
    }
}

#[tokio::test]
async fn deadlines_are_sent_upstream_and_enforced() {
    let backend = start_backend().await;
    let cap = Duration::from_secs(30);
    let cfg = edge::EdgeConfig {
        upstream_timeout: cap,
        ..config()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), cfg).await;
    let http = Http::h1();
    // The backend's Slow answers with the grpc-timeout it received. What the gateway sends is
    // what is left of the deadline when it calls: a little under what it was given.
    let sent = async |timeout: &str| {
        let a = http
            .post(
                gw.addr,
                SLOW,
                "application/json",
                &[("grpc-timeout", timeout)],
                r#"{"delay": "0s"}"#,
            )
            .await;
        assert_eq!(a.status, 200, "{timeout}: {:?}", a.json());
        grpc_timeout(a.json()["name"].as_str().unwrap())
    };
    // The client's deadline goes upstream.
    let three = sent("3S").await;
    assert!(
        three <= Duration::from_secs(3) && three > Duration::from_secs(1),
        "3S sent upstream as {three:?}"
    );
    // Capped by the gateway's upstream timeout.
    let hour = sent("1H").await;
    assert!(
        hour <= cap && hour > cap - Duration::from_secs(2),
        "1H sent upstream as {hour:?} (cap {cap:?})"
    );
    // Expiry answers 504 long before the backend would answer, or the cap would expire.
    let started = std::time::Instant::now();
    let a = http
        .post(
            gw.addr,
            SLOW,
            "application/json",
            &[("x-timeout", "0.2")],
            r#"{"delay": "20s"}"#,
        )
        .await;
    assert_eq!(a.status, 504);
    assert_eq!(a.json()["code"], 4);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn upstream_down_then_back() {
    // The upstream's port is held, with nothing listening, until the backend starts on it.
    let port = protogate_tests::ReservedPort::new();
    let (gw, _) = start_gateway(&format!("http://{}", port.addr), config()).await;
    let http = Http::h1();
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    assert_eq!(a.json()["code"], 14);
    // Ready all the same (readyz_requires = "none"): one upstream down fails its own calls,
    // it does not take the replica out of its Service; the body says what is down.
    let ready = http.get(gw.addr, "/readyz").await;
    assert_eq!(ready.status, 200);
    let body = String::from_utf8_lossy(&ready.body).into_owned();
    assert!(
        body.starts_with("ready\n") && body.contains(": unreachable: "),
        "{body}"
    );
    assert_eq!(http.get(gw.addr, "/healthz").await.status, 200);
    let _backend = protogate_tests::start_backend_on(port.listen());
    // The next call dials again (a failed dial is not remembered) and reaches it.
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"1"}"#)
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json(), serde_json::json!({"id": "1"}));
    let ready = http.get(gw.addr, "/readyz").await;
    assert_eq!(ready.status, 200);
    assert!(String::from_utf8_lossy(&ready.body).contains(": reachable\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_mixed_requests() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let clients = [Http::h1(), Http::h2()];
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000u64 {
        let http = clients[(i % 2) as usize].clone();
        let addr = gw.addr;
        tasks.spawn(async move {
            let formats = [Format::Json, Format::Msgpack, Format::Protobuf];
            let (from, to) = (formats[(i % 3) as usize], formats[(i / 3 % 3) as usize]);
            let json = format!(r#"{{"id":"{i}","name":"n{i}","price":{i}.5,"kind":"SMALL","counts":{{"k{i}":"{i}"}}}}"#);
            let body = convert(THING, Format::Json, from, json.as_bytes());
            if i % 10 == 7 {
                // Some bad requests in the mix: they must not affect the others.
                let a = http.post(addr, ECHO, content_type(from), &[], b"\xff\xff".to_vec()).await;
                assert_eq!(a.status, 400, "request {i}");
                return;
            }
            let a = http.post(addr, ECHO, content_type(from), &[("accept", content_type(to))], body).await;
            assert_eq!(a.status, 200, "request {i}");
            let back = convert(THING, to, Format::Json, &a.body);
            let want = convert(THING, Format::Json, Format::Json, json.as_bytes());
            assert_eq!(back, want, "request {i}");
        });
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        r.expect("request task");
        done += 1;
    }
    assert_eq!(done, 1000);
}

#[tokio::test]
async fn pipelined_http1_requests_are_answered_in_order() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let mut batch = Vec::new();
    for id in 1..=3 {
        let body = format!(r#"{{"id":"{id}"}}"#);
        batch.extend_from_slice(
            format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
                .as_bytes(),
        );
    }
    stream.write_all(&batch).await.unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while String::from_utf8_lossy(&got)
        .matches("HTTP/1.1 200")
        .count()
        < 3
        || !String::from_utf8_lossy(&got).contains(r#"{"id":"3"}"#)
    {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("answers in time")
            .unwrap();
        assert!(
            n > 0,
            "connection closed early: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    let (p1, p2, p3) = (
        text.find(r#"{"id":"1"}"#).unwrap(),
        text.find(r#"{"id":"2"}"#).unwrap(),
        text.find(r#"{"id":"3"}"#).unwrap(),
    );
    assert!(p1 < p2 && p2 < p3, "{text}");
}

#[tokio::test]
async fn oversized_body_is_refused_before_it_is_read() {
    use tokio::io::AsyncWriteExt;
    let backend = start_backend().await;
    let cfg = config_toml("max_body_bytes = 1000\n");
    let (gw, _) = start_gateway_toml(&cfg, &format!("http://{}", backend.addr)).await;
    // Announce 10 MB, send nothing: the answer comes from the header alone.
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    stream
        .write_all(format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let text = read_head(&mut stream).await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text:?}");
    // Chunked with no length: 413 as soon as the limit is crossed.
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    stream
        .write_all(format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 600, " ".repeat(600));
    stream.write_all(chunk.as_bytes()).await.unwrap();
    stream.write_all(chunk.as_bytes()).await.unwrap();
    let text = read_head(&mut stream).await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text:?}");
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests() {
    let backend = start_backend().await;
    let (gw, edge) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let addr = gw.addr;
    let http = Http::h1();
    let slow = tokio::spawn(async move {
        let a = http
            .post(addr, SLOW, "application/json", &[], r#"{"delay": "2s"}"#)
            .await;
        (a, std::time::Instant::now())
    });
    eventually(
        "the slow request to be in flight",
        Duration::from_secs(30),
        || (edge.metrics().in_flight.get() == 1).then_some(()),
    )
    .await;
    let stopping = std::time::Instant::now();
    gw.stop().await;
    let (a, answered) = within("the in-flight answer", Duration::from_secs(30), slow)
        .await
        .unwrap();
    assert_eq!(a.status, 200, "the in-flight request finished");
    assert!(answered > stopping, "answered before the shutdown began");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

#[tokio::test]
async fn health_metrics_and_kinds() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let http = Http::h2();
    assert_eq!(http.get(gw.addr, "/healthz").await.status, 200);
    assert_eq!(http.get(gw.addr, "/readyz").await.status, 200);
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[],
            r#"{"kind": 2, "id": 5}"#,
        )
        .await;
    assert_eq!(a.json(), serde_json::json!({"id": "5", "kind": "LARGE"}));
    assert_eq!(Kind::Large as i32, 2);
    let text = http.metrics(gw.addr).await;
    // The binary's version, and every series with known labels at 0 before any event.
    assert!(
        text.contains(&format!(
            "protogate_build_info{{version=\"{}\",revision=\"unknown\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    for reason in [
        "concurrency",
        "upstream_concurrency",
        "memory",
        "connections",
    ] {
        let series = format!("protogate_shed_total{{reason=\"{reason}\"}} 0");
        assert!(text.lines().any(|l| l == series), "{series}\n{text}");
    }
    for result in ["ok", "failed"] {
        let series = format!("protogate_schema_reloads_total{{result=\"{result}\"}} 0");
        assert!(text.lines().any(|l| l == series), "{series}\n{text}");
    }
    // Every method's downgrades by reason, before any (Slow was not called).
    for reason in [
        "json_requested",
        "accept_fallback",
        "unknown_fields",
        "json_deprecated",
    ] {
        let series = format!(
            "protogate_downgrades_total{{method=\"protogate.test.svc.TestService/Slow\",reason=\"{reason}\"}} 0"
        );
        assert!(text.lines().any(|l| l == series), "{series}\n{text}");
    }
    // No [[json_sunset]] and no [rate_limit]: no series that could never move.
    assert!(!text.contains("protogate_json_refused_total{"), "{text}");
    assert!(!text.contains("protogate_rate_limited_total{"), "{text}");
    assert!(
        metric(
            &text,
            r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="json",response_format="json",code="200",grpc_code="OK",protocol="http"}"#
        ) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains("protogate_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("protogate_upstream_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(text.contains("protogate_requests_in_flight"), "{text}");
}

#[tokio::test]
async fn per_service_upstreams_route_by_service() {
    let backend = start_backend().await;
    let nowhere = protogate_tests::ReservedPort::new();
    // The default upstream is down; the service's own upstream is up.
    let upstreams = edge::Upstreams::new(
        Some(&format!("http://{}", nowhere.addr)),
        &[(
            "protogate.test.svc.TestService".to_owned(),
            format!("http://{}", backend.addr),
        )],
        64 << 20,
    )
    .unwrap();
    let (gw, _) =
        protogate_tests::start_gateway_upstreams(protogate_tests::v1_schema(), upstreams, config())
            .await;
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/json", &[], r#"{"id":"4"}"#)
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json(), serde_json::json!({"id": "4"}));
}

#[tokio::test]
async fn oversized_headers_are_refused() {
    use tokio::io::AsyncWriteExt;
    let backend = start_backend().await;
    let limit = 16 * 1024;
    let cfg = edge::EdgeConfig {
        max_header_bytes: limit,
        ..config()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), cfg).await;
    // A head that has not ended after `limit` bytes is refused. Exactly that many bytes are
    // sent, so the gateway has read all of them when it answers and closes: bytes it left
    // unread would make its close a reset, which may destroy the answer before it is read.
    let mut head =
        format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-big: ");
    head.push_str(&"x".repeat(limit - head.len()));
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let text = read_head(&mut stream).await;
    assert!(text.starts_with("HTTP/1.1 431"), "{text:?}");
    // A head within the limit is served, and so is everyone else.
    let big = "x".repeat(limit - 1024);
    let a = Http::h1()
        .post(gw.addr, ECHO, "application/json", &[("x-big", &big)], "{}")
        .await;
    assert_eq!(a.status, 200);
}

/// Reads from `stream` until a whole response head has arrived or the peer closed; at most
/// 30 s.
async fn read_head(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    within("a response head", Duration::from_secs(30), async {
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => panic!("{e}: {:?}", String::from_utf8_lossy(&got)),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_client_gone_mid_body_is_recorded_as_499() {
    use tokio::io::AsyncWriteExt;
    let backend = start_backend().await;
    let (gw, edge) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    stream
        .write_all(format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{{\"id\"").as_bytes())
        .await
        .unwrap();
    drop(stream);
    let key = r#"protogate_requests_total{method="protogate.test.svc.TestService/Echo",request_format="json",response_format="json",code="499",grpc_code="Canceled",protocol="http"}"#;
    let text = eventually("a 499 to be recorded", Duration::from_secs(30), || {
        let text = edge.metrics().render();
        (metric(&text, key) > 0.0).then_some(text)
    })
    .await;
    assert_eq!(metric(&text, key), 1.0, "{text}");
    assert!(!text.contains(r#"code="400""#), "{text}");
}

#[tokio::test]
async fn malformed_protobuf_is_named_when_the_upstream_rejects_it() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let http = Http::h1();
    // parts[0].label (field 2 of Part) with invalid UTF-8: the upstream cannot decode it.
    let body = vec![0x2a, 0x04, 0x12, 0x02, 0xff, 0xfe];
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/x-protobuf",
            &[("accept", "application/json")],
            body.clone(),
        )
        .await;
    assert_eq!(a.status, 400, "{:?}", String::from_utf8_lossy(&a.body));
    let message = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("parts") && message.contains("UTF-8"),
        "{message}"
    );
    // Pass-through is not second-guessed: an upstream that takes the bytes gets them.
    let a = http
        .post(
            gw.addr,
            RAW_ECHO,
            "application/x-protobuf",
            &[],
            body.clone(),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body.as_ref(), body.as_slice());
}

/// An error answered before the body was read says `Connection: close` over HTTP/1.1: the
/// client then opens a new connection for its next request instead of writing it into one
/// that is going away.
#[tokio::test]
async fn an_early_error_closes_the_connection_and_says_so() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let body = "x".repeat(32 * 1024);
    for (what, head) in [
        (
            "404",
            "POST /nowhere HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n",
        ),
        (
            "415",
            &*format!("POST {ECHO} HTTP/1.1\r\nhost: x\r\ncontent-type: text/plain\r\n"),
        ),
    ] {
        let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let request = format!("{head}content-length: {}\r\n\r\n{body}", body.len());
        // The gateway may answer before it has read all of it: what was sent is enough.
        let _ = stream.write_all(request.as_bytes()).await;
        let mut got = Vec::new();
        let read = protogate_tests::within("the answer", Duration::from_secs(30), async {
            let mut buf = [0u8; 4096];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        });
        read.await;
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        assert!(
            text.starts_with(&format!("http/1.1 {what}")),
            "{what}: {text}"
        );
        assert!(text.contains("connection: close"), "{what}: {text}");
    }
    // A bodiless error keeps its connection (nothing is left unread).
    let a = Http::h1().get(gw.addr, "/nowhere").await;
    assert_eq!(a.status, 404);
    assert_eq!(a.header("connection"), None);
}

/// A unary call whose client leaves while the upstream works is recorded as 499 (its handler
/// is dropped: it used to leave no record at all), over HTTP/1.1 and HTTP/2.
#[tokio::test]
async fn a_client_gone_while_the_upstream_works_is_recorded_as_499() {
    use tokio::io::AsyncWriteExt;
    let backend = start_backend().await;
    let (gw, edge) = start_gateway(&format!("http://{}", backend.addr), config()).await;
    let key = r#"protogate_requests_total{method="protogate.test.svc.TestService/Slow",request_format="json",response_format="json",code="499",grpc_code="Canceled",protocol="http"}"#;
    let in_flight = || metric(&edge.metrics().render(), "protogate_requests_in_flight");
    // HTTP/1.1: the whole request, then the connection closed.
    let body = r#"{"delay":"20s"}"#;
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "POST {SLOW} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    eventually("the call in flight", Duration::from_secs(30), || {
        (in_flight() == 1.0).then_some(())
    })
    .await;
    drop(stream);
    eventually("a 499 to be recorded", Duration::from_secs(30), || {
        (metric(&edge.metrics().render(), key) == 1.0).then_some(())
    })
    .await;
    // HTTP/2: the stream reset by dropping the request.
    let http = Http::h2();
    let call = tokio::spawn(async move {
        http.post(gw.addr, SLOW, "application/json", &[], body)
            .await
    });
    eventually("the call in flight", Duration::from_secs(30), || {
        (in_flight() == 1.0).then_some(())
    })
    .await;
    call.abort();
    eventually(
        "a second 499 to be recorded",
        Duration::from_secs(30),
        || (metric(&edge.metrics().render(), key) == 2.0).then_some(()),
    )
    .await;
    assert_eq!(in_flight(), 0.0);
}

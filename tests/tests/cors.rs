//! CORS: a preflight for a path with a route is answered 204 before routing (no upstream
//! call) for an allowed origin, naming what the path accepts; another origin gets 403 and no
//! allow header; actual answers to an allowed origin carry the origin and the headers a
//! browser may read (the answer's own grpc-metadata-* included). Not configured: no CORS
//! headers, and a preflight is an ordinary OPTIONS request.

use std::time::Duration;

use protogate_tests::{Http, library, start_backend, start_gateway};

const METADATA: &str = "/protogate.test.svc.TestService/Metadata";

fn cors() -> edge::cors::CorsConfig {
    edge::cors::CorsConfig {
        allow_origins: vec![
            "https://app.example.com".into(),
            "https://*.example.org".into(),
        ],
        expose_headers: vec!["x-served-by".into()],
        allow_credentials: true,
        max_age: Some(Duration::from_secs(600)),
        ..Default::default()
    }
}

fn preflight<'a>(origin: &'a str, method: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("origin", origin),
        ("access-control-request-method", method),
        ("access-control-request-headers", "content-type"),
    ]
}

#[tokio::test]
async fn preflights_are_answered_for_routed_paths_and_allowed_origins() {
    let stack = library::start_with_gateway(edge::EdgeConfig {
        cors: Some(cors()),
        ..Default::default()
    })
    .await;
    let addr = stack.gw.addr;
    let http = Http::h1();
    for (path, origin) in [
        ("/v1/shelves/1/books/2", "https://app.example.com"),
        ("/library.v1.Library/GetBook", "https://a.b.example.org"),
    ] {
        let a = http
            .request("OPTIONS", addr, path, &preflight(origin, "GET"), "")
            .await;
        assert_eq!(a.status, 204, "{path}: {:?}", a.body);
        assert_eq!(a.header("access-control-allow-origin"), Some(origin));
        assert_eq!(a.header("access-control-allow-credentials"), Some("true"));
        assert_eq!(a.header("access-control-max-age"), Some("600"));
        let methods = a.header("access-control-allow-methods").unwrap();
        assert!(!methods.is_empty(), "{path}: {methods}");
        assert!(
            a.header("access-control-allow-headers")
                .unwrap()
                .contains("content-type")
        );
        assert!(a.headers.get_all("vary").iter().any(|v| v == "Origin"));
    }
    let a = http
        .request(
            "OPTIONS",
            addr,
            "/library.v1.Library/GetBook",
            &preflight("https://app.example.com", "POST"),
            "",
        )
        .await;
    assert_eq!(a.header("access-control-allow-methods"), Some("POST"));
    // A refused origin: 403, nothing allowed.
    let a = http
        .request(
            "OPTIONS",
            addr,
            "/v1/shelves/1/books/2",
            &preflight("https://evil.test", "GET"),
            "",
        )
        .await;
    assert_eq!(a.status, 403);
    assert_eq!(a.header("access-control-allow-origin"), None);
    // A path without a route is not a preflight's business: an ordinary OPTIONS request.
    let a = http
        .request(
            "OPTIONS",
            addr,
            "/nowhere",
            &preflight("https://app.example.com", "GET"),
            "",
        )
        .await;
    assert_eq!(a.status, 404);
}

#[tokio::test]
async fn answers_to_an_allowed_origin_say_what_it_may_read() {
    let backend = start_backend().await;
    let config = edge::EdgeConfig {
        cors: Some(cors()),
        ..Default::default()
    };
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), config).await;
    let http = Http::h2();
    let a = http
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("origin", "https://app.example.com")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    let exposed = a.header("access-control-expose-headers").unwrap();
    for name in [
        "grpc-status",
        "grpc-message",
        "x-request-id",
        "x-served-by",
        "grpc-metadata-x-served-by",
    ] {
        assert!(exposed.contains(name), "{name}: {exposed}");
    }
    // Another origin: the answer, without a CORS header (the browser keeps it from the page).
    let a = http
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("origin", "https://evil.test")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("access-control-allow-origin"), None);
    assert_eq!(a.header("access-control-expose-headers"), None);
}

#[tokio::test]
async fn without_cors_a_preflight_is_an_ordinary_options_request() {
    let stack = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let a = Http::h1()
        .request(
            "OPTIONS",
            stack.gw.addr,
            "/v1/shelves/1/books/2",
            &preflight("https://app.example.com", "GET"),
            "",
        )
        .await;
    assert_eq!(a.status, 405);
    assert_eq!(a.header("access-control-allow-origin"), None);
}

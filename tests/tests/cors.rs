//! CORS: a preflight for a path with a route is answered 204 before routing (no upstream
//! call) for an allowed origin, naming what the path accepts; another origin gets 403 and no
//! allow header; actual answers to an allowed origin carry the origin and the headers a
//! browser may read (the answer's own grpc-metadata-* included). Not configured: no CORS
//! headers, and a preflight is an ordinary OPTIONS request. CORS is configured by a
//! configuration file's `[cors]`, read by the binary's loader.

use protogate_tests::{Http, start_backend, start_gateway_toml, start_library_toml};

const METADATA: &str = "/protogate.test.svc.TestService/Metadata";

/// `[cors]`: two origins (one a wildcard), credentials, a max age in minutes (600 s).
const CORS: &str = r#"
[cors]
allow_origins = ["https://app.example.com", "https://*.example.org"]
expose_headers = ["x-served-by"]
allow_credentials = true
max_age = "10m"
"#;

fn preflight<'a>(origin: &'a str, method: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("origin", origin),
        ("access-control-request-method", method),
        ("access-control-request-headers", "content-type"),
    ]
}

#[tokio::test]
async fn preflights_are_answered_for_routed_paths_and_allowed_origins() {
    let stack = start_library_toml(CORS).await;
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
    let (gw, _) = start_gateway_toml(CORS, &format!("http://{}", backend.addr)).await;
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
    let stack = start_library_toml("").await;
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

/// A browser's gRPC-Web call: its preflight allows gRPC-Web's request headers, and its answer
/// exposes the answer's own metadata and gRPC's status headers.
#[tokio::test]
async fn grpc_web_calls_from_a_browser_are_allowed_and_read() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway_toml(CORS, &format!("http://{}", backend.addr)).await;
    let http = Http::h1();
    let origin = "https://app.example.com";
    let a = http
        .request(
            "OPTIONS",
            gw.addr,
            METADATA,
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                (
                    "access-control-request-headers",
                    "content-type,x-grpc-web,x-user-agent,grpc-timeout",
                ),
            ],
            "",
        )
        .await;
    assert_eq!(a.status, 204, "{a:?}");
    let allowed = a.header("access-control-allow-headers").unwrap();
    for name in ["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"] {
        assert!(allowed.contains(name), "{name}: {allowed}");
    }
    // The call: an empty Thing in gRPC-Web's envelope.
    let a = http
        .request(
            "POST",
            gw.addr,
            METADATA,
            &[
                ("origin", origin),
                ("content-type", "application/grpc-web+proto"),
                ("x-grpc-web", "1"),
                ("x-user-agent", "grpc-web-javascript/0.1"),
            ],
            vec![0u8, 0, 0, 0, 0],
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("access-control-allow-origin"), Some(origin));
    assert_eq!(a.header("x-served-by"), Some("backend-v2"));
    let exposed = a.header("access-control-expose-headers").unwrap();
    for name in ["grpc-status", "grpc-message", "x-served-by"] {
        assert!(exposed.contains(name), "{name}: {exposed}");
    }
    assert!(!exposed.contains("content-type"), "{exposed}");
    // gRPC-Web's own request header did not go upstream; its user agent did, as metadata.
    let text = String::from_utf8_lossy(&a.body);
    assert!(
        text.contains("x-user-agent=grpc-web-javascript/0.1"),
        "{text}"
    );
    assert!(!text.contains("x-grpc-web"), "{text}");
}

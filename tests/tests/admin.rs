//! The gateway's own endpoints: GET and HEAD only; on the main listener by default, on an
//! admin listener of their own when there is one (404 on the main one then); a REST rule
//! whose literal path is one of theirs is refused at start-up on the listener that serves
//! them, while a rule's template may cover them (their literals win, every other path and
//! method is the rule's); `openapi_path` moves or removes the OpenAPI document.

use std::sync::Arc;

use protogate_tests::{Http, library, start_backend, start_gateway};

fn unannotated_rule(path: &str) -> transcode::rest::HttpRule {
    transcode::rest::HttpRule {
        selector: "library.v1.Library.Unannotated".into(),
        method: "GET".into(),
        path: path.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn own_endpoints_answer_get_and_head_only() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(&format!("http://{}", backend.addr), Default::default()).await;
    let http = Http::h1();
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        assert_eq!(http.get(gw.addr, path).await.status, 200, "{path}");
        let head = http.request("HEAD", gw.addr, path, &[], "").await;
        assert_eq!(head.status, 200, "HEAD {path}");
        assert!(head.body.is_empty(), "HEAD {path}: {:?}", head.body);
        for method in ["POST", "DELETE"] {
            let a = http.request(method, gw.addr, path, &[], "x").await;
            assert_eq!(a.status, 405, "{method} {path}");
            assert_eq!(a.header("allow"), Some("GET, HEAD"), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn an_admin_listener_takes_the_admin_endpoints_off_the_main_one() {
    let config = edge::EdgeConfig {
        admin_listener: true,
        // Free on the main listener now.
        http_rules: vec![unannotated_rule("/healthz")],
        ..Default::default()
    };
    let stack = library::start_with_gateway(config).await;
    let admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = admin_listener.local_addr().unwrap();
    let edge = Arc::clone(&stack.edge);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(edge::serve_admin(admin_listener, edge, async {
        let _ = stopped.await;
    }));
    let http = Http::h1();
    for path in ["/healthz", "/readyz", "/metrics"] {
        let a = http.get(admin, path).await;
        assert_eq!(a.status, 200, "admin {path}");
        assert_eq!(
            Http::h2().get(admin, path).await.status,
            200,
            "admin {path} over h2"
        );
        let a = http.request("POST", admin, path, &[], "").await;
        assert_eq!(a.status, 405, "admin POST {path}");
    }
    let metrics = http.get(admin, "/metrics").await;
    assert!(
        String::from_utf8_lossy(&metrics.body).contains("protogate_requests_in_flight"),
        "{:?}",
        metrics.body
    );
    assert_eq!(http.get(admin, "/v1/shelves/1/books/2").await.status, 404);
    assert_eq!(http.get(admin, "/openapi.json").await.status, 404);
    // Every admin page is on the admin listener…
    for path in ["/admin/migration", "/admin/migration.json", "/admin/schema"] {
        assert_eq!(http.get(admin, path).await.status, 200, "admin {path}");
    }
    // …and nobody's on the main listener (but /healthz, which the rule takes there).
    for path in [
        "/metrics",
        "/readyz",
        "/admin/migration",
        "/admin/migration.json",
        "/admin/schema",
    ] {
        let a = http.get(stack.gw.addr, path).await;
        assert_eq!(a.status, 404, "main {path}");
        assert_eq!(a.json()["code"], 5, "main {path}");
    }
    let a = http.get(stack.gw.addr, "/healthz").await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(
        a.json()["title"].is_string(),
        "the rule's answer: {:?}",
        a.body
    );
    // The API description stays on the main listener.
    assert_eq!(http.get(stack.gw.addr, "/openapi.json").await.status, 200);
    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn a_rule_on_an_own_endpoints_path_is_refused_at_start_up() {
    for (path, admin_listener, taken) in [
        ("/metrics", false, true),
        ("/readyz", false, true),
        ("/openapi.json", false, true),
        ("/openapi.json", true, true),
        ("/metrics", true, false),
    ] {
        let upstreams = edge::Upstreams::new(Some("http://127.0.0.1:1"), &[], 1 << 20).unwrap();
        let config = edge::EdgeConfig {
            admin_listener,
            http_rules: vec![unannotated_rule(path)],
            ..Default::default()
        };
        match edge::Edge::new(library::schema(), upstreams, config) {
            Err(e) if taken => {
                let e = e.to_string();
                assert!(
                    e.contains(path) && e.contains("library.v1.Library.Unannotated"),
                    "{e}"
                );
            }
            Ok(_) if !taken => {}
            Err(e) => panic!("{path} (admin listener: {admin_listener}): {e}"),
            Ok(_) => panic!("{path} (admin listener: {admin_listener}): accepted"),
        }
    }
}

fn rule(selector: &str, method: &str, path: &str) -> transcode::rest::HttpRule {
    transcode::rest::HttpRule {
        selector: format!("library.v1.Library.{selector}"),
        method: method.into(),
        path: path.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn templates_may_cover_own_paths_and_the_literals_win() {
    let config = edge::EdgeConfig {
        http_rules: vec![
            rule("GetBook", "GET", "/{name=**}"),
            rule("DeleteBook", "DELETE", "/{name=**}"),
            rule("ArchiveBook", "GET", "/{name=**}:archive"),
        ],
        ..Default::default()
    };
    let stack = library::start_with_gateway(config).await;
    let (http, gw) = (Http::h1(), stack.gw.addr);
    // The gateway's own answer where it serves one…
    let a = http.get(gw, "/healthz").await;
    assert_eq!((a.status.as_u16(), &*a.body), (200, &b"ok\n"[..]));
    let a = http.get(gw, "/metrics").await;
    assert!(String::from_utf8_lossy(&a.body).contains("protogate_requests_in_flight"));
    assert_eq!(
        http.get(gw, "/openapi.json").await.json()["openapi"],
        "3.1.0"
    );
    // …the rules everywhere else: other paths, other methods, a verb.
    let a = http.get(gw, "/shelves/1/books/2").await;
    assert_eq!(a.json()["name"], "shelves/1/books/2", "{:?}", a.body);
    let a = http.get(gw, "/").await;
    // (The empty name is proto3's default: left out of the JSON.)
    assert_eq!(
        (a.status.as_u16(), &a.json()["title"]),
        (200u16, &serde_json::json!("Title of ")),
        "the root too"
    );
    let a = http.request("DELETE", gw, "/healthz", &[], "").await;
    assert_eq!(
        a.json(),
        serde_json::json!({"name": "healthz", "title": "deleted"})
    );
    let a = http.get(gw, "/metrics:archive").await;
    assert_eq!(a.json()["title"], "archived", "{:?}", a.body);
    // A method no rule takes on an own path: the own endpoint's 405.
    let a = http.request("PUT", gw, "/healthz", &[], "").await;
    assert_eq!(a.status, 405);
}

#[tokio::test]
async fn openapi_path_moves_or_removes_the_document() {
    for (openapi_path, served, ruled) in [
        (
            Some("/api/openapi.json"),
            "/api/openapi.json",
            "/openapi.json",
        ),
        (None, "", "/openapi.json"),
    ] {
        let config = edge::EdgeConfig {
            openapi_path: openapi_path.map(str::to_owned),
            http_rules: vec![rule("GetBook", "GET", "/{name=**}")],
            ..Default::default()
        };
        let stack = library::start_with_gateway(config).await;
        let http = Http::h1();
        if !served.is_empty() {
            let a = http.get(stack.gw.addr, served).await;
            assert_eq!(a.json()["openapi"], "3.1.0", "{served}");
        }
        let a = http.get(stack.gw.addr, ruled).await;
        assert_eq!(a.json()["name"], "openapi.json", "{ruled}: the rule's");
    }
}

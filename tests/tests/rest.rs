//! The REST mapping end to end: the real gateway with the library schema's google.api.http
//! rules in front of the real tonic library backend, over HTTP/1.1 and HTTP/2. Settings under
//! test (`unknown_query_parameters`, `[[http_rules]]`, `max_body_bytes`) are keys of a
//! configuration file, read by the binary's loader.

use bytes::Bytes;
use http::Request;
use prost::Message as _;
use protogate_tests::library::{self, pb::library::v1 as pb};
use protogate_tests::{Http, metric};
use serde_json::json;

async fn gateway(config: edge::EdgeConfig) -> (protogate_tests::Running, protogate_tests::Running) {
    let s = library::start_with_gateway(config).await;
    (s.backend, s.gw)
}

/// [`gateway`] configured by a configuration file's text (`toml`: the settings under test).
async fn toml_gateway(toml: &str) -> (protogate_tests::Running, protogate_tests::Running) {
    let s = protogate_tests::start_library_toml(toml).await;
    (s.backend, s.gw)
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test]
async fn rules_serve_every_form_over_both_protocols() {
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    for http in [Http::h1(), Http::h2()] {
        let a = http
            .request("GET", gw.addr, "/v1/shelves/1/books/2", &[], "")
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(
            a.json(),
            json!({"name": "shelves/1/books/2", "title": "Title of shelves/1/books/2"})
        );

        // Accept picks the format, as on the POST route.
        let a = http
            .request(
                "GET",
                gw.addr,
                "/v1/shelves/1/books/2",
                &[("accept", "application/x-protobuf")],
                "",
            )
            .await;
        assert_eq!(a.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(pb::Book::decode(a.body).unwrap().name, "shelves/1/books/2");

        // Query parameters, an additional binding.
        let a = http
            .request("GET", gw.addr, "/v1/books?pageSize=2&pageToken=t", &[], "")
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        let v = a.json();
        assert_eq!(v["books"].as_array().unwrap().len(), 2);
        assert_eq!(v["nextPageToken"], "after-t");

        // body: "book", the parent from the path, a query parameter; msgpack in and out.
        let book = protogate_tests::convert_with(
            &library::schema(),
            "library.v1.Book",
            transcode::Format::Json,
            transcode::Format::Msgpack,
            br#"{"title":"Dune","pages":"412"}"#,
        );
        let a = http
            .request(
                "POST",
                gw.addr,
                "/v1/shelves/7/books?requestId=r-1",
                &[
                    ("content-type", "application/msgpack"),
                    ("accept", "application/json"),
                ],
                book,
            )
            .await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(
            a.json(),
            json!({"name": "shelves/7/books/new", "title": "Dune", "pages": "412", "labels": {"request_id": "r-1"}})
        );

        // PATCH fills update_mask from the body's fields.
        let a = http
            .request(
                "PATCH",
                gw.addr,
                "/v1/shelves/1/books/2",
                &[JSON],
                r#"{"title":"New","genre":"HISTORY"}"#,
            )
            .await;
        assert_eq!(
            a.json(),
            json!({"name": "shelves/1/books/2", "title": "New", "genre": "HISTORY", "tags": ["title", "genre"]})
        );

        // DELETE, a custom verb, a custom HTTP method.
        let a = http
            .request("DELETE", gw.addr, "/v1/shelves/1/books/2", &[], "")
            .await;
        assert_eq!(a.json()["title"], "deleted");
        let a = http
            .request(
                "POST",
                gw.addr,
                "/v1/shelves/1/books/2:archive",
                &[JSON],
                "{}",
            )
            .await;
        assert_eq!(
            a.json(),
            json!({"name": "shelves/1/books/2", "title": "archived"})
        );
        let a = http
            .request("SEARCH", gw.addr, "/v1/echo/a%2Fb", &[], "")
            .await;
        assert_eq!(a.json(), json!({"pageToken": "a/b"}));

        // response_body: a repeated field, and a message field.
        let a = http
            .request("GET", gw.addr, "/v1/shelves/1/books/2/tags", &[], "")
            .await;
        assert_eq!(a.json(), json!(["sf", "classic"]));
        let a = http
            .request("GET", gw.addr, "/v1/shelves/1/books/none/tags", &[], "")
            .await;
        assert_eq!(a.json(), json!([]));
        let a = http
            .request("GET", gw.addr, "/v1/shelves/1/books/2/published", &[], "")
            .await;
        assert_eq!(a.json(), json!("2023-11-14T22:13:20Z"));

        // The gRPC-path route keeps working, for annotated and unannotated methods.
        for m in ["GetBook", "Unannotated"] {
            let a = http
                .request(
                    "POST",
                    gw.addr,
                    &format!("/library.v1.Library/{m}"),
                    &[JSON],
                    r#"{"name":"x"}"#,
                )
                .await;
            assert_eq!(a.json()["name"], "x", "{m}");
        }
    }
}

#[tokio::test]
async fn http_body_travels_raw() {
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    let http = Http::h1();
    let a = http
        .request("GET", gw.addr, "/v1/shelves/1/books/2/cover", &[], "")
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("image/png"));
    assert_eq!(
        &a.body[..],
        "\u{89}PNG cover of shelves/1/books/2".as_bytes()
    );

    let png: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x01";
    let a = http
        .request(
            "PUT",
            gw.addr,
            "/v1/shelves/1/books/2/cover",
            &[("content-type", "image/png")],
            png,
        )
        .await;
    assert_eq!(a.header("content-type"), Some("text/plain"));
    assert_eq!(&a.body[..], b"shelves/1/books/2: 10 bytes of image/png");

    let a = http
        .request(
            "POST",
            gw.addr,
            "/v1/upload",
            &[("content-type", "application/octet-stream")],
            &b"\x00\x01\x02\xff"[..],
        )
        .await;
    assert_eq!(a.header("content-type"), Some("application/octet-stream"));
    assert_eq!(&a.body[..], b"\xff\x02\x01\x00");
}

#[tokio::test]
async fn protobuf_bodies_pass_through_with_unknown_fields() {
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    // ListBooksRequest{page_size: 3} plus field 99 (unknown to both sides), body "*".
    let body: &[u8] = b"\x10\x03\x9a\x06\x02hi";
    let a = Http::h2()
        .request(
            "POST",
            gw.addr,
            "/v1/echo",
            &[("content-type", "application/x-protobuf")],
            body,
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(&a.body[..], body, "Echo answers the request as it arrived");
}

#[tokio::test]
async fn bad_requests_are_named() {
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    let http = Http::h1();
    let a = http
        .request("GET", gw.addr, "/v1/echo/x?nope=1", &[], "")
        .await;
    assert_eq!(a.status, 400);
    let m = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        m.contains("query parameter nope") && m.contains("unknown"),
        "{m}"
    );
    let a = http
        .request("GET", gw.addr, "/v1/echo/x?pageSize=ten", &[], "")
        .await;
    assert_eq!(a.status, 400);
    assert!(a.json()["message"].as_str().unwrap().contains("pageSize"));
    let a = http
        .request(
            "POST",
            gw.addr,
            "/v1/shelves/7/books",
            &[JSON],
            r#"{"pages":"x"}"#,
        )
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.json()["message"].as_str().unwrap().contains("pages"),
        "{a:?}"
    );
    let a = http
        .request("GET", gw.addr, "/v1/shelves/1/books/2", &[JSON], "{}")
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("takes no request body")
    );
    let a = http
        .request("POST", gw.addr, "/v1/shelves/7/books", &[], "{}")
        .await;
    assert_eq!(a.status, 415);

    // 405 lists the methods the path serves; 404 names the path.
    let a = http
        .request("PUT", gw.addr, "/v1/shelves/1/books/2", &[], "")
        .await;
    assert_eq!(a.status, 405);
    assert_eq!(a.header("allow"), Some("DELETE, GET, PATCH"));
    let a = http.request("GET", gw.addr, "/v2/nothing", &[], "").await;
    assert_eq!(a.status, 404);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("/v2/nothing")
    );

    // Upstream errors keep their mapping.
    let a = http
        .request("GET", gw.addr, "/v1/shelves/1/books/missing", &[], "")
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["code"], 5);
}

#[tokio::test]
async fn unknown_query_parameters_can_be_ignored() {
    let (_backend, gw) = toml_gateway("unknown_query_parameters = \"ignore\"\n").await;
    let a = Http::h1()
        .request(
            "GET",
            gw.addr,
            "/v1/echo/x?utm_source=mail&pageSize=4",
            &[],
            "",
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json(), json!({"parent": "x", "pageSize": 4}));
}

#[tokio::test]
async fn configured_rules_replace_annotations() {
    let (_backend, gw) = toml_gateway(
        r#"
[[http_rules]]
selector = "library.v1.Library.Unannotated"
get = "/v2/unannotated/{name=**}"
"#,
    )
    .await;
    let a = Http::h1()
        .request("GET", gw.addr, "/v2/unannotated/a/b", &[], "")
        .await;
    assert_eq!(a.json()["name"], "a/b");

    // A rule that clashes with an annotation is refused when the gateway starts.
    let upstreams = edge::Upstreams::new(Some("http://127.0.0.1:1"), &[], 1 << 20).unwrap();
    let clash = r#"
[[http_rules]]
selector = "library.v1.Library.Unannotated"
get = "/v1/{name=shelves/*/books/*}"
"#;
    let clash = protogate_tests::config_from_toml(
        &protogate_tests::gateway_toml("http://127.0.0.1:1", protogate_tests::LIBRARY_PROTO, clash),
        protogate_tests::workspace(),
    )
    .edge;
    let e = edge::Edge::new(library::schema(), upstreams, clash)
        .err()
        .expect("conflict refused")
        .to_string();
    assert!(
        e.contains("library.v1.Library.GetBook") && e.contains("library.v1.Library.Unannotated"),
        "{e}"
    );
}

#[tokio::test]
async fn downgrades_are_counted_on_rest_routes() {
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    let http = Http::h1();
    for _ in 0..3 {
        http.request("GET", gw.addr, "/v1/shelves/1/books/2", &[], "")
            .await;
    }
    let text = http.metrics(gw.addr).await;
    assert_eq!(
        metric(
            &text,
            r#"protogate_downgrades_total{method="library.v1.Library/GetBook",reason="json_requested"}"#
        ),
        3.0,
        "{text}"
    );
}

#[tokio::test]
async fn an_unsupported_body_type_is_refused_before_the_body_is_read() {
    let (_backend, gw) = toml_gateway("max_body_bytes = 1024\n").await;
    // Over the size limit: had the body been read first, this would be 413. Only just over:
    // a body that still fills the socket buffers when the gateway answers and closes (it does
    // not read it) makes the close a reset, which may destroy the answer before it is read.
    // Each request on a connection of its own, for the same reason.
    let big = vec![b'x'; 2 * 1024];
    let a = Http::h1()
        .request(
            "POST",
            gw.addr,
            "/v1/shelves/7/books",
            &[("content-type", "text/plain")],
            big.clone(),
        )
        .await;
    assert_eq!(a.status, 415, "{a:?}");
    assert!(
        a.json()["message"].as_str().unwrap().contains("text/plain"),
        "{a:?}"
    );
    // A supported type is read, and held to the limit.
    let a = Http::h1()
        .request("POST", gw.addr, "/v1/shelves/7/books", &[JSON], big)
        .await;
    assert_eq!(a.status, 413, "{a:?}");
    // A route without a body still names that, whatever the type.
    let a = Http::h1()
        .request(
            "GET",
            gw.addr,
            "/v1/shelves/1/books/2",
            &[("content-type", "text/plain")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 400, "{a:?}");
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("takes no request body"),
        "{a:?}"
    );
}

#[tokio::test]
async fn an_empty_body_needs_no_content_type_however_it_is_framed() {
    type Empty =
        futures_util::stream::Empty<Result<http_body::Frame<Bytes>, std::convert::Infallible>>;
    let (_backend, gw) = gateway(edge::EdgeConfig::default()).await;
    for h2 in [false, true] {
        let http = if h2 { Http::h2() } else { Http::h1() };
        // A body of unknown length that turns out empty (h1: chunked; h2: DATA with
        // END_STREAM), with a type the gateway does not read: nothing to refuse.
        let req = Request::post(format!("http://{}/v1/shelves/7/books", gw.addr))
            .header("content-type", "text/plain")
            .body(http_body_util::StreamBody::new(
                futures_util::stream::empty() as Empty,
            ))
            .unwrap();
        let response = http.open(req).await;
        assert_eq!(response.status(), 200, "h2 {h2}");
    }
}

#[tokio::test]
async fn envoy_path_templates_serve_what_envoy_accepts() {
    let rules = r#"
[[http_rules]]
selector = "library.v1.Library.Unannotated"
get = "/v2/{name=**}/latest"
[[http_rules.additional_bindings]]
get = "/"
[[http_rules.additional_bindings]]
get = "/v2/{name=**}/latest:peek"
"#;
    let (_backend, gw) = toml_gateway(&format!("path_templates = \"envoy\"\n{rules}")).await;
    let http = Http::h1();
    // '**' before a literal: the segments between, '/' kept and RFC 6570's reserved
    // characters left encoded (Envoy's default), a trailing slash ignored.
    for (path, name) in [
        ("/v2/a/b%2Fc/d%20e/latest", "a/b%2Fc/d e"),
        ("/v2/a/latest/", "a"),
        ("/v2/x/y/latest:peek", "x/y"),
        ("/", ""),
    ] {
        let a = http.request("GET", gw.addr, path, &[], "").await;
        assert_eq!(a.status, 200, "{path}: {:?}", a.body);
        // An empty name is the default, which the canonical mapping leaves out.
        assert_eq!(a.json()["name"].as_str().unwrap_or(""), name, "{path}");
    }
    // '**' in the middle covers one segment at least.
    let a = http.request("GET", gw.addr, "/v2/latest", &[], "").await;
    assert_eq!(a.status, 404, "{:?}", a.body);

    // By the google.api.http grammar (the default) the same rules stop the start, naming
    // the template.
    let spec = protogate_tests::config_from_toml(
        &protogate_tests::gateway_toml("http://127.0.0.1:1", protogate_tests::LIBRARY_PROTO, rules),
        protogate_tests::workspace(),
    )
    .edge;
    let upstreams = edge::Upstreams::new(Some("http://127.0.0.1:1"), &[], 1 << 20).unwrap();
    let Err(e) = edge::Edge::new(library::schema(), upstreams, spec) else {
        panic!("'**' before a literal taken by the spec grammar");
    };
    let e = e.to_string();
    assert!(
        e.contains("/v2/{name=**}/latest") && e.contains("'**' must be the last"),
        "{e}"
    );
}

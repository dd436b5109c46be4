//! The REST mapping (google.api.http) on the library test schema: routing, the request message
//! built from path, query and body, and `response_body` renderings.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use transcode::rest::{HttpRule, Lookup, RequestBody, Routes, UnknownQuery};
use transcode::{Format, Options, Schema};

mod common;

fn schema() -> Schema {
    common::compile_proto("test/rest/v1", "library.proto")
}

fn routes(schema: &Schema) -> Routes {
    Routes::new(schema, &[]).expect("routes build")
}

/// Maps a request and renders the resulting request message as JSON.
fn map(
    method: &str,
    uri: &str,
    body: RequestBody<'_>,
    unknown: UnknownQuery,
) -> Result<(String, serde_json::Value), String> {
    let schema = schema();
    let routes = routes(&schema);
    let (path, query) = uri
        .split_once('?')
        .map_or((uri, None), |(p, q)| (p, Some(q)));
    let Lookup::Found(route, values) = routes.find(method, path) else {
        return Err(format!("no route for {method} {path}"));
    };
    let mut out = Vec::new();
    route
        .request(
            &schema,
            &values,
            query,
            body,
            unknown,
            &Options::default(),
            &mut out,
        )
        .map_err(|e| e.to_string())?;
    let mut json = Vec::new();
    schema
        .from_protobuf(
            &route.method.input,
            Format::Json,
            &out,
            &mut json,
            &Options::default(),
        )
        .unwrap();
    Ok((
        route.method.full_name.to_string(),
        serde_json::from_slice(&json).unwrap(),
    ))
}

fn get(uri: &str) -> Result<serde_json::Value, String> {
    map("GET", uri, RequestBody::Empty, UnknownQuery::Reject).map(|(_, v)| v)
}

#[test]
fn annotations_are_read() {
    let schema = schema();
    let rules = schema.http_rules().unwrap();
    let list = rules
        .iter()
        .find(|r| r.selector == "library.v1.Library.ListBooks")
        .unwrap();
    assert_eq!(list.method, "GET");
    assert_eq!(list.path, "/v1/{parent=shelves/*}/books");
    assert_eq!(list.additional_bindings.len(), 1);
    let echo = rules
        .iter()
        .find(|r| r.selector == "library.v1.Library.Echo")
        .unwrap();
    assert_eq!(echo.additional_bindings[3].method, "SEARCH");
    assert!(
        rules
            .iter()
            .all(|r| r.selector != "library.v1.Library.Unannotated")
    );
    // A descriptor set round trip keeps them (options travel as bytes).
    let again = Schema::from_descriptor_set(&schema.to_descriptor_set()).unwrap();
    assert_eq!(again.http_rules().unwrap(), rules);
}

#[test]
fn routes_pick_the_method_and_bind_variables() {
    let schema = schema();
    let routes = routes(&schema);
    let found = |m: &str, p: &str| match routes.find(m, p) {
        Lookup::Found(r, v) => format!("{} {:?}", r.method.full_name, v),
        Lookup::MethodNotAllowed(allowed) => format!("405 {allowed:?}"),
        Lookup::NotFound => "404".into(),
    };
    assert_eq!(
        found("GET", "/v1/shelves/1/books/2"),
        r#"library.v1.Library/GetBook ["shelves/1/books/2"]"#
    );
    assert_eq!(
        found("GET", "/v1/shelves/1/books/2/tags"),
        r#"library.v1.Library/GetTags ["shelves/1/books/2"]"#
    );
    assert_eq!(
        found("POST", "/v1/shelves/1/books/2:archive"),
        r#"library.v1.Library/ArchiveBook ["shelves/1/books/2"]"#
    );
    assert_eq!(
        found("GET", "/v1/shelves/1/books:watch"),
        r#"library.v1.Library/WatchBooks ["shelves/1"]"#
    );
    assert_eq!(
        found("GET", "/v1/shelves/1/books"),
        r#"library.v1.Library/ListBooks ["shelves/1"]"#
    );
    assert_eq!(
        found("GET", "/v1/books"),
        r#"library.v1.Library/ListBooks []"#
    );
    assert_eq!(
        found("SEARCH", "/v1/echo/tok"),
        r#"library.v1.Library/Echo ["tok"]"#
    );
    assert_eq!(
        found("DELETE", "/v1/shelves/1/books/2"),
        r#"library.v1.Library/DeleteBook ["shelves/1/books/2"]"#
    );
    assert_eq!(
        found("PUT", "/v1/shelves/1/books/2"),
        r#"405 ["DELETE", "GET", "PATCH"]"#
    );
    assert_eq!(found("GET", "/v2/nothing"), "404");
    assert_eq!(found("GET", "/v1/shelves/1/books/2/3"), "404");
}

#[test]
fn query_parameters_map_to_fields() {
    let v = get(
        "/v1/echo/shelves/a%2Fb/c%20d?pageSize=10&page_token=t%2Bx+y&genres=FICTION&genres=2\
        &publishedAfter=2024-01-02T03:04:05Z&maxAge=1.5s&minPages=7&includeDrafts=true\
        &ids=1&ids=-9007199254740993&filter.author=Le%20Guin&filter.pages.min=3&cursor=AAEC\
        &minRating=4.5&readMask=title,book.page_count&big=18446744073709551615&note=",
    )
    .unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "parent": "shelves/a%2Fb/c d",
            "pageSize": 10,
            "pageToken": "t+x y",
            "genres": ["FICTION", "HISTORY"],
            "publishedAfter": "2024-01-02T03:04:05Z",
            "maxAge": "1.500s",
            "minPages": "7",
            "includeDrafts": true,
            "ids": ["1", "-9007199254740993"],
            "filter": {"author": "Le Guin", "pages": {"min": "3"}},
            "cursor": "AAEC",
            "minRating": 4.5,
            "readMask": "title,book.pageCount",
            "big": "18446744073709551615",
            "note": ""
        })
    );
    // `*` inside a multi-segment variable matches one segment, `%2F` kept as sent.
    assert_eq!(
        get("/v1/shelves/a%2Fb/books").unwrap(),
        serde_json::json!({"parent": "shelves/a%2Fb"})
    );
    // A single-segment variable is fully decoded.
    let (_, v) = map(
        "SEARCH",
        "/v1/echo/a%2Fb%3Ac",
        RequestBody::Empty,
        UnknownQuery::Reject,
    )
    .unwrap();
    assert_eq!(v, serde_json::json!({"pageToken": "a/b:c"}));
}

#[test]
fn bad_query_parameters_are_named() {
    for (uri, want) in [
        (
            "/v1/echo/x?nope=1",
            "query parameter nope: unknown parameter",
        ),
        ("/v1/echo/x?pageSize=ten", "query parameter pageSize"),
        (
            "/v1/echo/x?pageSize=1&pageSize=2",
            "query parameter pageSize given 2 times",
        ),
        ("/v1/echo/x?includeDrafts=maybe", "expected a boolean"),
        ("/v1/echo/x?genres=POETRY", "query parameter genres"),
        ("/v1/echo/x?labels=a", "map field"),
        ("/v1/echo/x?filter=a", "a URL can set only its fields"),
        ("/v1/echo/x?parent=y", "bound by the path"),
        (
            "/v1/echo/x?publishedAfter=yesterday",
            "query parameter publishedAfter",
        ),
        ("/v1/echo/x?ids=1.5", "query parameter ids"),
        ("/v1/echo/x?cursor=%zz", "bad percent-encoding"),
        ("/v1/echo/x?big=-1", "query parameter big"),
        // A wrapper's JSON form is its value: it has no fields to name.
        (
            "/v1/echo/x?minPages.value=5",
            "min_pages is not a message field with fields of its own",
        ),
    ] {
        let e = get(uri).unwrap_err();
        assert!(e.contains(want), "{uri}: {e}");
    }
    // Ignored on request, known ones still checked.
    let (_, v) = map(
        "GET",
        "/v1/echo/x?nope=1&pageSize=3",
        RequestBody::Empty,
        UnknownQuery::Ignore,
    )
    .unwrap();
    assert_eq!(v, serde_json::json!({"parent": "x", "pageSize": 3}));
}

#[test]
fn bodies_bind_by_the_rule() {
    // body: "book", parent from the path.
    let (m, v) = map(
        "POST",
        "/v1/shelves/7/books?requestId=r1",
        RequestBody::Formatted(Format::Json, br#"{"title":"Dune","pages":"412"}"#),
        UnknownQuery::Reject,
    )
    .unwrap();
    assert_eq!(m, "library.v1.Library/CreateBook");
    assert_eq!(
        v,
        serde_json::json!({"parent":"shelves/7","book":{"title":"Dune","pages":"412"},"requestId":"r1"})
    );
    // The body field cannot also come from the query.
    let e = map(
        "POST",
        "/v1/shelves/7/books?book.title=x",
        RequestBody::Formatted(Format::Json, b"{}"),
        UnknownQuery::Reject,
    )
    .unwrap_err();
    assert!(e.contains("bound by the request body"), "{e}");
    // body: "*" with a path variable: the path wins over the body.
    let (_, v) = map(
        "POST",
        "/v1/shelves/1/books/2:archive",
        RequestBody::Formatted(Format::Json, br#"{"name":"other"}"#),
        UnknownQuery::Reject,
    )
    .unwrap();
    assert_eq!(v, serde_json::json!({"name":"shelves/1/books/2"}));
    // A protobuf body travels byte for byte, bound fields after it.
    let schema = schema();
    let routes = routes(&schema);
    let Lookup::Found(route, values) = routes.find("POST", "/v1/shelves/7/books") else {
        panic!()
    };
    let book = [0x12, 0x04, b'D', b'u', b'n', b'e', 0xf8, 0x3e, 0x01]; // title + unknown field 1007
    let mut out = Vec::new();
    route
        .request(
            &schema,
            &values,
            None,
            RequestBody::Formatted(Format::Protobuf, &book),
            UnknownQuery::Reject,
            &Options::default(),
            &mut out,
        )
        .unwrap();
    let mut want = vec![0x12, book.len() as u8];
    want.extend_from_slice(&book);
    want.extend_from_slice(b"\x0a\x09shelves/7");
    assert_eq!(out, want);
    // A repeated field as the body.
    let (_, v) = map(
        "PUT",
        "/v1/echo/p/ids",
        RequestBody::Formatted(Format::Json, b"[1, \"2\"]"),
        UnknownQuery::Reject,
    )
    .unwrap();
    assert_eq!(v, serde_json::json!({"parent":"p","ids":["1","2"]}));
    let e = map(
        "PUT",
        "/v1/echo/p/ids",
        RequestBody::Formatted(Format::Json, b"[1], \"parent\": \"q\""),
        UnknownQuery::Reject,
    )
    .unwrap_err();
    assert!(e.contains("malformed JSON"), "{e}");
    // A rule without a body refuses one.
    let e = map(
        "GET",
        "/v1/shelves/1/books/2",
        RequestBody::Formatted(Format::Json, b"{}"),
        UnknownQuery::Reject,
    )
    .unwrap_err();
    assert!(e.contains("takes no request body"), "{e}");
}

#[test]
fn patch_fills_the_field_mask_from_the_body() {
    let patch = |body: &[u8], query: &str, format: Format| {
        map(
            "PATCH",
            &format!("/v1/shelves/1/books/2{query}"),
            RequestBody::Formatted(format, body),
            UnknownQuery::Reject,
        )
        .unwrap()
        .1
    };
    let v = patch(
        br#"{"title":"T","published":"2020-01-01T00:00:00Z","labels":{"a":"b"},"pages":0}"#,
        "",
        Format::Json,
    );
    assert_eq!(v["updateMask"], "title,published,labels,pages");
    assert_eq!(v["book"]["name"], "shelves/1/books/2");
    // Given in the query: kept.
    let v = patch(br#"{"title":"T"}"#, "?updateMask=author", Format::Json);
    assert_eq!(v["updateMask"], "author");
    // MessagePack and protobuf bodies too.
    let v = patch(b"\x81\xa6author\xa1A", "", Format::Msgpack);
    assert_eq!(v["updateMask"], "author");
    let v = patch(b"\x12\x01T\x20\x05", "", Format::Protobuf);
    assert_eq!(v["updateMask"], "title,pages");
}

#[test]
fn response_body_selects_a_field() {
    let schema = schema();
    let routes = routes(&schema);
    let render = |path: &str, to: Format, wire: &[u8]| {
        let Lookup::Found(route, _) = routes.find("GET", path) else {
            panic!()
        };
        let mut out = Vec::new();
        route
            .response(&schema, to, wire, &mut out, &Options::default())
            .map(|_| out)
            .map_err(|e| e.to_string())
    };
    // Book{tags: ["a", "b"], title: "x"}
    let book = b"\x32\x01a\x12\x01x\x32\x01b";
    assert_eq!(
        render("/v1/shelves/1/books/2/tags", Format::Json, book).unwrap(),
        br#"["a","b"]"#
    );
    assert_eq!(
        render("/v1/shelves/1/books/2/tags", Format::Json, b"").unwrap(),
        b"[]"
    );
    assert!(render("/v1/shelves/1/books/2/tags", Format::Protobuf, book).is_err());
    // A message field: its bytes, merged over repeats, in protobuf; its JSON form otherwise.
    let published = b"\x3a\x02\x08\x01\x3a\x02\x10\x02";
    assert_eq!(
        render(
            "/v1/shelves/1/books/2/published",
            Format::Protobuf,
            published
        )
        .unwrap(),
        b"\x08\x01\x10\x02"
    );
    assert_eq!(
        render("/v1/shelves/1/books/2/published", Format::Json, published).unwrap(),
        br#""1970-01-01T00:00:01.000000002Z""#
    );
}

#[test]
fn http_body_is_raw() {
    let schema = schema();
    let routes = routes(&schema);
    let Lookup::Found(route, values) = routes.find("PUT", "/v1/shelves/1/books/2/cover") else {
        panic!()
    };
    assert!(route.raw_request() && route.raw_response());
    let mut out = Vec::new();
    route
        .request(
            &schema,
            &values,
            None,
            RequestBody::Raw {
                content_type: "image/png",
                data: b"\x89PNG",
            },
            UnknownQuery::Reject,
            &Options::default(),
            &mut out,
        )
        .unwrap();
    let mut want = b"\x12\x11\x0a\x09image/png\x12\x04\x89PNG".to_vec();
    want.extend_from_slice(b"\x0a\x11shelves/1/books/2");
    assert_eq!(out, want);
    let (ct, data) = route
        .raw_response_parts(b"\x0a\x0atext/plain\x12\x02hi")
        .unwrap();
    assert_eq!((ct.as_str(), data.as_slice()), ("text/plain", &b"hi"[..]));
}

#[test]
fn configured_rules_replace_annotations_and_conflicts_are_named() {
    let schema = schema();
    let rule = |selector: &str, method: &str, path: &str| HttpRule {
        selector: selector.into(),
        method: method.into(),
        path: path.into(),
        ..HttpRule::default()
    };
    let routes = Routes::new(
        &schema,
        &[rule(
            "library.v1.Library.GetBook",
            "GET",
            "/v2/books/{name}",
        )],
    )
    .unwrap();
    assert!(matches!(
        routes.find("GET", "/v2/books/x"),
        Lookup::Found(..)
    ));
    let l = routes.find("GET", "/v1/shelves/1/books/2");
    assert!(
        matches!(&l, Lookup::MethodNotAllowed(m) if *m == ["DELETE", "PATCH"]),
        "{l:?}"
    );
    let e = Routes::new(
        &schema,
        &[rule(
            "library.v1.Library.Unannotated",
            "GET",
            "/v1/{name=shelves/*/books/*}",
        )],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("library.v1.Library.GetBook") && e.contains("library.v1.Library.Unannotated"),
        "{e}"
    );
    for (r, want) in [
        (rule("library.v1.Library.Nope", "GET", "/x"), "no method"),
        (
            rule("library.v1.Library.GetBook", "GET", "/x/{nope}"),
            "has no field nope",
        ),
        (
            rule("library.v1.Library.GetBook", "GET", "x"),
            "must start with '/'",
        ),
        (
            rule("library.v1.Library.GetBook", "", "/x"),
            "no HTTP method",
        ),
        (
            HttpRule {
                body: "nope".into(),
                ..rule("library.v1.Library.GetBook", "POST", "/x")
            },
            "body: library.v1.GetBookRequest has no field nope",
        ),
        (
            rule("library.v1.Library.CreateBook", "GET", "/x/{book}"),
            "a URL can set only its fields",
        ),
        (
            HttpRule {
                body: "*".into(),
                ..rule("library.v1.Library.ImportBooks", "POST", "/x/{name}")
            },
            "streams its requests",
        ),
        (
            rule("library.v1.Library.Chat", "POST", "/x"),
            "streams its requests",
        ),
    ] {
        let e = Routes::new(&schema, &[r]).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn a_map_field_is_a_body_and_a_response_body_as_a_whole() {
    // prost-reflect's is_list() is false for maps: a map must not pass for a message field.
    let schema = schema();
    let rule =
        |selector: &str, method: &str, path: &str, body: &str, response_body: &str| HttpRule {
            selector: selector.into(),
            method: method.into(),
            path: path.into(),
            body: body.into(),
            response_body: response_body.into(),
            ..HttpRule::default()
        };
    let routes = Routes::new(
        &schema,
        &[
            rule(
                "library.v1.Library.Echo",
                "PUT",
                "/v1/echo/{parent}/labels",
                "labels",
                "",
            ),
            rule(
                "library.v1.Library.GetTags",
                "GET",
                "/v1/labels/{name}",
                "",
                "labels",
            ),
        ],
    )
    .unwrap();
    let Lookup::Found(route, values) = routes.find("PUT", "/v1/echo/p/labels") else {
        panic!()
    };
    let mut out = Vec::new();
    route
        .request(
            &schema,
            &values,
            None,
            RequestBody::Formatted(Format::Json, br#"{"k":"v","x":"y"}"#),
            UnknownQuery::Reject,
            &Options::default(),
            &mut out,
        )
        .unwrap();
    let mut json = Vec::new();
    schema
        .from_protobuf(
            &route.method.input,
            Format::Json,
            &out,
            &mut json,
            &Options::default(),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
        serde_json::json!({"parent": "p", "labels": {"k": "v", "x": "y"}})
    );

    let Lookup::Found(route, _) = routes.find("GET", "/v1/labels/b") else {
        panic!()
    };
    assert!(!route.protobuf_response() && route.response_message().is_none());
    // Book{labels: {a: b, c: d}}: entries are (key 1, value 2) messages in field 8.
    let book = b"\x42\x06\x0a\x01a\x12\x01b\x42\x06\x0a\x01c\x12\x01d";
    let mut out = Vec::new();
    route
        .response(&schema, Format::Json, book, &mut out, &Options::default())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"a": "b", "c": "d"})
    );
    assert!(
        route
            .response(
                &schema,
                Format::Protobuf,
                book,
                &mut out,
                &Options::default()
            )
            .is_err()
    );
}

/// The one precedence: `POST` to a gRPC path is that method even where a rule claims the same
/// path; other HTTP methods go to the rules; a gRPC path under another method is named.
#[test]
fn resolve_puts_the_grpc_path_before_the_rules() {
    use transcode::rest::Resolution;
    let schema = schema();
    let grpc = "/library.v1.Library/GetBook";
    let rules = [
        // A rule on the very gRPC path, for GET and for POST (the POST one is shadowed).
        HttpRule {
            selector: "library.v1.Library.ListBooks".into(),
            method: "GET".into(),
            path: grpc.into(),
            ..HttpRule::default()
        },
        HttpRule {
            selector: "library.v1.Library.ListBooks".into(),
            method: "POST".into(),
            path: grpc.into(),
            body: "*".into(),
            ..HttpRule::default()
        },
    ];
    let shadowing = Routes::new(&schema, &rules).unwrap();
    let found = |method: &str, path: &str| match shadowing.resolve(&schema, method, path) {
        Resolution::Found(r) => (r.method.full_name.to_string(), r.rule.is_some()),
        _ => panic!("{method} {path} not found"),
    };
    assert_eq!(
        found("POST", grpc),
        ("library.v1.Library/GetBook".into(), false)
    );
    assert_eq!(
        found("GET", grpc),
        ("library.v1.Library/ListBooks".into(), true)
    );
    match shadowing.resolve(&schema, "DELETE", grpc) {
        // POST once, though both a rule and the gRPC path take it.
        Resolution::PathNotAllowed(allow) => assert_eq!(allow, ["GET", "POST"]),
        _ => panic!("DELETE on a served path"),
    }
    let plain = routes(&schema);
    match plain.resolve(&schema, "GET", "/library.v1.Library/ListBooks") {
        Resolution::MethodNotAllowed(m) => {
            assert_eq!(&*m.full_name, "library.v1.Library/ListBooks")
        }
        _ => panic!("GET on a gRPC path without a rule"),
    }
    assert!(matches!(
        plain.resolve(&schema, "POST", "/nowhere"),
        Resolution::NotFound
    ));
    // What a binding says, either way.
    let Resolution::Found(r) = plain.resolve(&schema, "POST", grpc) else {
        panic!()
    };
    let b = r.binding();
    assert!(b.takes_body() && !b.raw_request() && b.protobuf_response());
    assert!(b.request_passes_through(transcode::Format::Protobuf));
    assert!(!b.request_passes_through(transcode::Format::Json));
    assert!(b.response_passes_through(transcode::Format::Protobuf));
    let Resolution::Found(r) = plain.resolve(&schema, "GET", "/v1/shelves/1/books/2") else {
        panic!()
    };
    let b = r.binding();
    assert!(!b.takes_body() && !b.request_passes_through(transcode::Format::Protobuf));
}

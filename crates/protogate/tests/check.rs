//! `protogate check` (and the effective sunset policy): a good
//! configuration prints the route table and the policy in force per method and exits 0; a bad
//! one lists every problem it has and exits 64. No port is opened, no upstream dialed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{PROTO_DIR, Scratch, run, stderr};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_good_configuration_prints_its_routes_and_sunset_policy() {
    let scratch = Scratch::new("check-good");
    let config = scratch.file(
        "gw.toml",
        &format!(
            r#"
upstream = ["http://127.0.0.1:1", "http://localhost:2"]
protos = ["{PROTO_DIR}/demo/v1/shop.proto"]
includes = ["{PROTO_DIR}"]

[[json_sunset]]
selector = "demo.shop.v1.Shop.*"
deprecation = "2000-01-01T00:00:00Z"
sunset = "2999-01-01T00:00:00Z"
link = "https://wiki.example/protobuf"

[[json_sunset]]
selector = "demo.shop.v1.Shop.GetOrder"
sunset = "2001-01-01T00:00:00Z"
exempt_clients = ["legacy"]
"#
        ),
    );
    let out = run(&["check", "--config", &config], b"");
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0], "ok: 4 methods, 4 REST routes (schema from files)",
        "{text}"
    );
    let row = |cells: &[&str]| {
        lines.iter().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words == cells
        })
    };
    assert!(
        row(&[
            "HTTP",
            "path",
            "gRPC",
            "method",
            "body",
            "response_body",
            "protocols"
        ]),
        "{text}"
    );
    assert!(
        row(&[
            "POST",
            "/demo.shop.v1.Shop/GetOrder",
            "demo.shop.v1.Shop/GetOrder",
            "*",
            "-",
            "http,grpc,grpc-web,connect,connect-get"
        ]),
        "{text}"
    );
    assert!(
        row(&[
            "GET",
            "/v1/orders/{id}",
            "demo.shop.v1.Shop/GetOrder",
            "-",
            "-",
            "http"
        ]),
        "{text}"
    );
    assert!(
        row(&[
            "POST",
            "/v1/customers/{customer_id}/orders",
            "demo.shop.v1.Shop/CreateOrder",
            "*",
            "-",
            "http"
        ]),
        "{text}"
    );
    // No trailing spaces in the aligned table.
    assert!(lines.iter().all(|l| !l.ends_with(' ')), "{text:?}");
    // The most specific rule wins per method, with its phase now.
    assert!(
        text.contains(
            "demo.shop.v1.Shop.GetOrder: sunset (rule \"demo.shop.v1.Shop.GetOrder\"), deprecation -, sunset 2001-01-01T00:00:00Z, 0 brownouts, exempt: legacy"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "demo.shop.v1.Shop.ListOrders: deprecated (rule \"demo.shop.v1.Shop.*\"), deprecation 2000-01-01T00:00:00Z, sunset 2999-01-01T00:00:00Z, 0 brownouts, link https://wiki.example/protobuf"
        ),
        "{text}"
    );
}

#[test]
fn a_bad_configuration_lists_every_problem_and_exits_64() {
    let scratch = Scratch::new("check-bad");
    let broken = scratch.file(
        "broken.proto",
        "syntax = \"proto3\";\nmessage A { int32 x = 1\n}\n",
    );
    let config = scratch.file(
        "gw.toml",
        &format!(
            r#"
upstream = "https://shop.internal:8443"
protos = ["{broken}"]
ca = "missing-ca.pem"

[tls]
cert = "missing.crt"
key = "missing.key"
"#
        ),
    );
    let out = run(&["check", "--config", &config], b"");
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("3 problems found"), "{text}");
    // The .proto with its file and line, the listener's certificate, the upstream's CA.
    assert!(text.contains("broken.proto:"), "{text}");
    assert!(
        text.contains("tls.cert") && text.contains("missing.crt"),
        "{text}"
    );
    assert!(
        text.contains("ca ") && text.contains("missing-ca.pem"),
        "{text}"
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));

    // A REST rule that collides with another is named, the schema being fine.
    let config = scratch.file(
        "rules.toml",
        &format!(
            r#"
upstream = "http://127.0.0.1:1"
protos = ["{PROTO_DIR}/demo/v1/shop.proto"]
includes = ["{PROTO_DIR}"]

[[http_rules]]
selector = "demo.shop.v1.Shop.ListOrders"
get = "/v1/orders/{{id}}"
"#
        ),
    );
    let out = run(&["check", "--config", &config], b"");
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("1 problem found") && text.contains("/v1/orders/{id}"),
        "{text}"
    );
}

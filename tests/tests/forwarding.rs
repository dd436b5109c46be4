//! `forward_headers`, `forward_response_headers`, `X-Forwarded-*` and `trusted_proxies`
//! through the real gateway, seen by a backend that answers with the metadata it received
//! (`TestService/Metadata`: each `name=value` a key of `counts`).

use protogate_tests::{Answer, Http, start_backend, start_gateway_toml};

const METADATA: &str = "/protogate.test.svc.TestService/Metadata";

/// The `name=value` pairs the upstream received.
fn seen(a: &Answer) -> Vec<String> {
    assert_eq!(a.status, 200, "{:?}", a.body);
    let mut seen: Vec<String> = a.json()["counts"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    seen.sort();
    seen
}

fn has(seen: &[String], pair: &str) -> bool {
    seen.iter().any(|s| s == pair)
}

fn named(seen: &[String], name: &str) -> bool {
    seen.iter().any(|s| s.starts_with(&format!("{name}=")))
}

const SENT: &[(&str, &str)] = &[
    ("x-tenant", "acme"),
    ("x-feature-beta", "also"),
    ("x-feature-beta", "on"),
    ("x-feature-gamma", "off"),
    ("x-other", "no"),
    ("cookie", "session=1"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_headers_reach_the_upstream_and_the_rest_do_not() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml(
        "forward_headers = [\"x-tenant\", \"X-Feature-*\"]\nforward_response_headers = [\"x-served-*\"]\n",
        &upstream,
    )
    .await;
    let http = Http::h1();
    let a = http
        .post(gw.addr, METADATA, "application/json", SENT, "{}")
        .await;
    let s = seen(&a);
    // Every value of a header sent twice.
    for pair in [
        "x-tenant=acme",
        "x-feature-beta=on",
        "x-feature-beta=also",
        "x-feature-gamma=off",
    ] {
        assert!(has(&s, pair), "{pair}: {s:?}");
    }
    assert!(!named(&s, "x-other") && !named(&s, "cookie"), "{s:?}");
    // The upstream's metadata the list names is answered under its own name.
    assert_eq!(a.header("x-served-by"), Some("backend-v2"));
    assert_eq!(a.header("grpc-metadata-x-served-by"), None);

    // Without the lists: the fixed set only, the answer's metadata as grpc-metadata-*.
    let (plain, _) = start_gateway_toml("", &upstream).await;
    let a = http
        .post(plain.addr, METADATA, "application/json", SENT, "{}")
        .await;
    let s = seen(&a);
    assert!(
        !named(&s, "x-tenant") && !named(&s, "x-feature-beta"),
        "{s:?}"
    );
    assert_eq!(a.header("grpc-metadata-x-served-by"), Some("backend-v2"));
    assert_eq!(a.header("x-served-by"), None);

    // A list naming what HTTP or gRPC keep is refused before serving.
    let text = protogate_tests::gateway_toml(
        &upstream,
        protogate_tests::V1_PROTO,
        "forward_headers = [\"te\"]\n",
    );
    let Err(e) = protogate_tests::try_config_from_toml(&text, protogate_tests::workspace()) else {
        panic!("forward_headers = [\"te\"] was taken");
    };
    let e = e.to_string();
    assert!(e.contains("forward_headers") && e.contains("\"te\""), "{e}");
}

const FORWARDED: &[(&str, &str)] = &[
    ("x-forwarded-for", "203.0.113.9, 198.51.100.2"),
    ("x-forwarded-proto", "https"),
    ("x-forwarded-host", "api.example.com"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_forwarded_headers_believe_trusted_proxies_only() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let http = Http::h1();

    // Not asked for: the client's X-Forwarded-* are not forwarded, none are made.
    let (plain, _) = start_gateway_toml("", &upstream).await;
    let s = seen(
        &http
            .post(plain.addr, METADATA, "application/json", FORWARDED, "{}")
            .await,
    );
    assert!(!s.iter().any(|p| p.starts_with("x-forwarded-")), "{s:?}");

    // Asked for, no trusted proxy: the client's X-Forwarded-* are replaced by what the
    // gateway saw.
    let (gw, _) = start_gateway_toml("forward_headers = [\"x-forwarded-for\"]\n", &upstream).await;
    let s = seen(
        &http
            .post(gw.addr, METADATA, "application/json", FORWARDED, "{}")
            .await,
    );
    assert!(has(&s, "x-forwarded-for=127.0.0.1"), "{s:?}");
    assert!(has(&s, "x-forwarded-proto=http"), "{s:?}");
    assert!(has(&s, &format!("x-forwarded-host={}", gw.addr)), "{s:?}");
    // Without any: the same, made here.
    let s = seen(
        &http
            .post(gw.addr, METADATA, "application/json", &[], "{}")
            .await,
    );
    assert!(has(&s, "x-forwarded-for=127.0.0.1"), "{s:?}");

    // The peer trusted: its chain kept with the peer appended, its -Proto and -Host kept.
    let (trusting, _) =
        start_gateway_toml("trusted_proxies = [\"127.0.0.0/8\"]\n", &upstream).await;
    let s = seen(
        &http
            .post(trusting.addr, METADATA, "application/json", FORWARDED, "{}")
            .await,
    );
    assert!(
        has(&s, "x-forwarded-for=203.0.113.9, 198.51.100.2, 127.0.0.1"),
        "{s:?}"
    );
    assert!(has(&s, "x-forwarded-proto=https"), "{s:?}");
    assert!(has(&s, "x-forwarded-host=api.example.com"), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_keys_anonymous_clients_by_the_first_untrusted_address() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let http = Http::h1();
    // One request per client, refilled once an hour: the second from one address is 429.
    let limit = "[rate_limit]\nper_client = 0.0003\nburst = 1\n";
    let from = |xff: &'static str| [("x-forwarded-for", xff)];
    let (trusting, _) = start_gateway_toml(
        &format!("trusted_proxies = [\"127.0.0.1\"]\n{limit}"),
        &upstream,
    )
    .await;
    let call = |addr, xff| async move {
        Http::h1()
            .post(addr, METADATA, "application/json", &from(xff), "{}")
            .await
            .status
    };
    assert_eq!(call(trusting.addr, "203.0.113.1").await, 200);
    assert_eq!(call(trusting.addr, "203.0.113.1").await, 429);
    // Another client behind the same proxy has its own budget.
    assert_eq!(call(trusting.addr, "203.0.113.2").await, 200);
    // Not trusted: every request is the proxy's, whatever its chain says.
    let (plain, _) = start_gateway_toml(limit, &upstream).await;
    assert_eq!(call(plain.addr, "203.0.113.1").await, 200);
    assert_eq!(call(plain.addr, "203.0.113.2").await, 429);
    drop(http);
}

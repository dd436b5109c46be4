//! TLS (issue 13 §1, §2) with certificates made in the test: the listener speaks HTTP/1.1 and
//! HTTP/2 by ALPN on one port; client certificates are required or optional, a verified one
//! names the client in the migration report; a replaced certificate serves new connections
//! while an open one keeps working; `https` upstreams are called over TLS (mTLS too) for
//! unary and streaming calls, and one whose certificate the gateway cannot verify is a 503
//! naming the upstream and the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use protogate_tests::tls::{
    Ca, TlsHttp, client_config, server_config, server_config_with, start_tls_backend,
};
use protogate_tests::{Http, start_backend, start_gateway, start_gateway_upstreams};
use serde_json::Value;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const WATCH: &str = "/protogate.test.svc.TestService/Watch";
const THING: &str = r#"{"id":"7","name":"tls"}"#;

fn listener_tls(ca: &Ca, cn: &str, clients: Option<&Ca>) -> edge::server::ListenerTls {
    edge::server::ListenerTls::new(server_config(&ca.server(cn), clients))
}

#[tokio::test]
async fn http1_and_http2_are_served_over_tls_by_alpn() {
    let backend = start_backend().await;
    let ca = Ca::new("test CA");
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig {
            tls: Some(listener_tls(&ca, "gateway", None)),
            ..Default::default()
        },
    )
    .await;
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let mut conn = TlsHttp::open(gw.addr, client_config(&ca, None, &[alpn]))
            .await
            .unwrap();
        assert_eq!(conn.alpn.as_deref(), Some(alpn));
        let a = conn.post(ECHO, "application/json", THING).await.unwrap();
        assert_eq!(a.status, 200, "{alpn:?}: {:?}", a.body);
        assert_eq!(a.json()["name"], "tls");
        // Two requests on one connection.
        let a = conn.post(ECHO, "application/json", THING).await.unwrap();
        assert_eq!(a.status, 200);
    }
    // No ALPN at all: the first bytes decide, as on a plain port.
    let mut conn = TlsHttp::open(gw.addr, client_config(&ca, None, &[]))
        .await
        .unwrap();
    assert_eq!(conn.alpn, None);
    assert_eq!(
        conn.post(ECHO, "application/json", THING)
            .await
            .unwrap()
            .status,
        200
    );
    // A client that does not trust the gateway's CA refuses it.
    let stranger = Ca::new("another CA");
    assert!(
        TlsHttp::open(gw.addr, client_config(&stranger, None, &[b"h2"]))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn client_certificates_are_required_checked_and_name_the_client() {
    let backend = start_backend().await;
    let (ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig {
            tls: Some(listener_tls(&ca, "gateway", Some(&clients))),
            ..Default::default()
        },
    )
    .await;
    let billing = clients.client("billing", "spiffe://mesh.test/ns/shop/sa/billing");
    let mut conn = TlsHttp::open(gw.addr, client_config(&ca, Some(&billing), &[b"h2"]))
        .await
        .unwrap();
    let a = conn.post(ECHO, "application/json", THING).await.unwrap();
    assert_eq!(a.status, 200, "{:?}", a.body);
    // The verified identity names the client that sent JSON.
    let a = conn
        .send(
            http::Request::get("https://127.0.0.1/admin/migration.json")
                .body(Default::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&a.body).unwrap();
    let names: Vec<&str> = report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["clients"].as_array().unwrap())
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"spiffe://mesh.test/ns/shop/sa/billing"),
        "{report}"
    );
    // Without a certificate, or with one the client CA did not sign: refused. (TLS 1.3
    // clients learn of it at their first read, so the request fails if the handshake did not.)
    let impostor = Ca::new("client CA").client("billing", "spiffe://mesh.test/ns/shop/sa/billing");
    for identity in [None, Some(&impostor)] {
        let refused = match TlsHttp::open(gw.addr, client_config(&ca, identity, &[b"h2"])).await {
            Err(_) => true,
            Ok(mut conn) => conn.post(ECHO, "application/json", THING).await.is_err(),
        };
        assert!(refused, "a client without a good certificate was served");
    }
}

#[tokio::test]
async fn optional_client_certificates_let_anonymous_clients_in() {
    let backend = start_backend().await;
    let (ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let config = server_config_with(&ca.server("gateway"), &clients, true);
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig {
            tls: Some(edge::server::ListenerTls::new(config)),
            ..Default::default()
        },
    )
    .await;
    let anonymous = client_config(&ca, None, &[b"http/1.1"]);
    let mut conn = TlsHttp::open(gw.addr, anonymous).await.unwrap();
    assert_eq!(
        conn.post(ECHO, "application/json", THING)
            .await
            .unwrap()
            .status,
        200
    );
    let known = clients.client("known", "");
    let mut conn = TlsHttp::open(gw.addr, client_config(&ca, Some(&known), &[b"h2"]))
        .await
        .unwrap();
    assert_eq!(
        conn.post(ECHO, "application/json", THING)
            .await
            .unwrap()
            .status,
        200
    );
}

#[tokio::test]
async fn a_replaced_certificate_serves_new_connections_and_open_ones_go_on() {
    let backend = start_backend().await;
    let ca = Ca::new("test CA");
    let tls = listener_tls(&ca, "first", None);
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig {
            tls: Some(tls.clone()),
            ..Default::default()
        },
    )
    .await;
    let mut old = TlsHttp::open(gw.addr, client_config(&ca, None, &[b"h2"]))
        .await
        .unwrap();
    let first = old.server_cert.clone();
    tls.replace(server_config(&ca.server("second"), None));
    let new = TlsHttp::open(gw.addr, client_config(&ca, None, &[b"h2"]))
        .await
        .unwrap();
    assert_ne!(
        new.server_cert, first,
        "a new connection got the old certificate"
    );
    // The connection made before the rotation still serves.
    let a = old.post(ECHO, "application/json", THING).await.unwrap();
    assert_eq!(a.status, 200);
}

#[tokio::test]
async fn https_upstreams_are_called_over_tls_and_mtls() {
    let (upstream_ca, gateway_ca) = (Ca::new("upstream CA"), Ca::new("gateway client CA"));
    // The backend asks for the gateway's client certificate.
    let backend = start_tls_backend(server_config(
        &upstream_ca.server("backend"),
        Some(&gateway_ca),
    ))
    .await;
    let uri = format!("https://localhost:{}", backend.addr.port());
    let identity = gateway_ca.client("gateway", "spiffe://mesh.test/gateway");
    let upstream_tls = |ca: &Ca, identity: Option<&protogate_tests::tls::Pem>| {
        edge::UpstreamTls::new(
            client_config(ca, identity, &[]),
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
        )
    };
    let gateway = |tls: edge::UpstreamTls| {
        let upstreams = edge::Upstreams::from_targets(
            Some(edge::Target {
                uri: uri.clone(),
                tls: Some(tls),
            }),
            Vec::new(),
            1 << 26,
            edge::UpstreamOptions::default(),
        )
        .unwrap();
        start_gateway_upstreams(
            protogate_tests::v1_schema(),
            upstreams,
            edge::EdgeConfig::default(),
        )
    };
    let (gw, _) = gateway(upstream_tls(&upstream_ca, Some(&identity))).await;
    for http in [Http::h1(), Http::h2()] {
        let a = http
            .post(gw.addr, ECHO, "application/json", &[], THING)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(a.json()["name"], "tls");
        // A stream goes over the same TLS.
        let a = http
            .post(gw.addr, WATCH, "application/json", &[], THING)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert!(
            String::from_utf8_lossy(&a.body).contains("tls"),
            "{:?}",
            a.body
        );
    }
    // A CA that did not sign the upstream's certificate: 503 naming the upstream and why.
    let (wrong, _) = gateway(upstream_tls(&Ca::new("other CA"), Some(&identity))).await;
    let a = Http::h1()
        .post(wrong.addr, ECHO, "application/json", &[], THING)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.body);
    let message = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&format!("localhost:{}", backend.addr.port()))
            && message.contains("TLS handshake")
            && message.contains("certificate"),
        "{message}"
    );
    // No client certificate for an upstream that requires one: 503 as well.
    let (anonymous, _) = gateway(upstream_tls(&upstream_ca, None)).await;
    let a = Http::h1()
        .post(anonymous.addr, ECHO, "application/json", &[], THING)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.body);
}

//! TLS with certificates made in the test: the listener speaks HTTP/1.1 and
//! HTTP/2 by ALPN on one port; client certificates are required or optional, a verified one
//! names the client in the migration report; a replaced certificate serves new connections
//! while an open one keeps working; `https` upstreams are called over TLS (mTLS too) for
//! unary and streaming calls, and one whose certificate the gateway cannot verify is a 503
//! naming the upstream and the reason.
//!
//! The gateway's TLS comes from a configuration file's `[tls]` (and `ca`, `client_cert`,
//! `client_key` for upstreams) through the binary's own loader, the certificates written to
//! files: `required` and `optional` mean what the loader makes of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use protogate_tests::tls::{Ca, TlsHttp, client_config, server_config, start_tls_backend};
use protogate_tests::{
    Http, Running, TempDir, eventually_async, start_backend, start_gateway_toml_in,
};
use serde_json::Value;

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
const WATCH: &str = "/protogate.test.svc.TestService/Watch";
const THING: &str = r#"{"id":"7","name":"tls"}"#;
const PATIENCE: Duration = Duration::from_secs(30);

/// A directory holding the gateway's certificate from `ca` (`server.pem`, `server.key`, its
/// subject `cn`) and, when given, the CA of client certificates (`clients.pem`).
fn tls_files(ca: &Ca, cn: &str, clients: Option<&Ca>) -> TempDir {
    let dir = TempDir::new("tls");
    ca.server(cn).write(&dir, "server");
    if let Some(clients) = clients {
        clients.write(&dir, "clients");
    }
    dir
}

/// The real gateway in front of `backend`, its `[tls]` table `cert = "server.pem"`, `key =
/// "server.key"` and `more` (relative paths: the loader finds them in `dir`).
async fn tls_gateway(dir: &TempDir, backend: &Running, more: &str) -> Running {
    let toml = format!("[tls]\ncert = \"server.pem\"\nkey = \"server.key\"\n{more}");
    let (gw, _) =
        start_gateway_toml_in(dir.path(), &toml, &format!("http://{}", backend.addr)).await;
    gw
}

/// Whether the gateway refuses a client presenting `identity` (none: no certificate). TLS 1.3
/// clients learn of a refused certificate at their first read, so the request fails if the
/// handshake did not.
async fn refused(gw: &Running, ca: &Ca, identity: Option<&protogate_tests::tls::Pem>) -> bool {
    match TlsHttp::open(gw.addr, client_config(ca, identity, &[b"h2"])).await {
        Err(_) => true,
        Ok(mut conn) => conn.post(ECHO, "application/json", THING).await.is_err(),
    }
}

/// The client names of the gateway's migration report, asked on `conn`.
async fn reported_clients(conn: &mut TlsHttp) -> (Vec<String>, Value) {
    let a = conn
        .send(
            http::Request::get("https://127.0.0.1/admin/migration.json")
                .body(Default::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&a.body).unwrap();
    let names = report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["clients"].as_array().unwrap())
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    (names, report)
}

#[tokio::test]
async fn http1_and_http2_are_served_over_tls_by_alpn() {
    let backend = start_backend().await;
    let ca = Ca::new("test CA");
    let dir = tls_files(&ca, "gateway", None);
    let gw = tls_gateway(&dir, &backend, "").await;
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
    let dir = tls_files(&ca, "gateway", Some(&clients));
    let gw = tls_gateway(
        &dir,
        &backend,
        "client_ca = \"clients.pem\"\nclient_auth = \"required\"\n",
    )
    .await;
    let billing = clients.client("billing", "spiffe://mesh.test/ns/shop/sa/billing");
    let mut conn = TlsHttp::open(gw.addr, client_config(&ca, Some(&billing), &[b"h2"]))
        .await
        .unwrap();
    let a = conn.post(ECHO, "application/json", THING).await.unwrap();
    assert_eq!(a.status, 200, "{:?}", a.body);
    // The verified identity names the client that sent JSON.
    let (names, report) = reported_clients(&mut conn).await;
    assert!(
        names
            .iter()
            .any(|n| n == "spiffe://mesh.test/ns/shop/sa/billing"),
        "{report}"
    );
    // Without a certificate, or with one the client CA did not sign: refused.
    let impostor = Ca::new("client CA").client("billing", "spiffe://mesh.test/ns/shop/sa/billing");
    for identity in [None, Some(&impostor)] {
        assert!(
            refused(&gw, &ca, identity).await,
            "a client without a good certificate was served"
        );
    }
}

/// `client_auth` left out with a `client_ca`: a certificate is required.
#[tokio::test]
async fn a_client_ca_without_client_auth_requires_a_certificate() {
    let backend = start_backend().await;
    let (ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let dir = tls_files(&ca, "gateway", Some(&clients));
    let gw = tls_gateway(&dir, &backend, "client_ca = \"clients.pem\"\n").await;
    assert!(
        refused(&gw, &ca, None).await,
        "a client without a certificate was served"
    );
    let known = clients.client("known", "");
    assert!(!refused(&gw, &ca, Some(&known)).await);
}

#[tokio::test]
async fn optional_client_certificates_let_anonymous_clients_in() {
    let backend = start_backend().await;
    let (ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let dir = tls_files(&ca, "gateway", Some(&clients));
    let gw = tls_gateway(
        &dir,
        &backend,
        "client_ca = \"clients.pem\"\nclient_auth = \"optional\"\n",
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
    let known = clients.client("known", "spiffe://mesh.test/ns/shop/sa/known");
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
    // A certificate presented is still verified: it names the client...
    let (names, report) = reported_clients(&mut conn).await;
    assert!(
        names
            .iter()
            .any(|n| n == "spiffe://mesh.test/ns/shop/sa/known"),
        "{report}"
    );
    // ...and one the client CA did not sign is refused.
    let impostor = Ca::new("client CA").client("known", "spiffe://mesh.test/ns/shop/sa/known");
    assert!(
        refused(&gw, &ca, Some(&impostor)).await,
        "a client with a certificate the client CA did not sign was served"
    );
}

/// The certificate's files replaced: the gateway reads them again (as the binary does, every
/// second), new connections get the new certificate, an open one goes on with the old.
#[tokio::test]
async fn a_replaced_certificate_serves_new_connections_and_open_ones_go_on() {
    let backend = start_backend().await;
    let ca = Ca::new("test CA");
    let dir = tls_files(&ca, "first", None);
    let gw = tls_gateway(&dir, &backend, "").await;
    let mut old = TlsHttp::open(gw.addr, client_config(&ca, None, &[b"h2"]))
        .await
        .unwrap();
    let first = old.server_cert.clone();
    ca.server("second").write(&dir, "server");
    eventually_async(
        "a new connection to get the new certificate",
        PATIENCE,
        || async {
            let new = TlsHttp::open(gw.addr, client_config(&ca, None, &[b"h2"]))
                .await
                .unwrap();
            (new.server_cert != first).then_some(())
        },
    )
    .await;
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
    let dir = TempDir::new("upstream-tls");
    upstream_ca.write(&dir, "upstream-ca");
    Ca::new("other CA").write(&dir, "other-ca");
    gateway_ca
        .client("gateway", "spiffe://mesh.test/gateway")
        .write(&dir, "gateway");
    // The upstreams' TLS settings as a configuration file gives them.
    let gateway = |toml: &'static str| start_gateway_toml_in(dir.path(), toml, &uri);
    let mtls =
        "ca = \"upstream-ca.pem\"\nclient_cert = \"gateway.pem\"\nclient_key = \"gateway.key\"\n";
    let (gw, _) = gateway(mtls).await;
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
    let (wrong, _) = gateway(
        "ca = \"other-ca.pem\"\nclient_cert = \"gateway.pem\"\nclient_key = \"gateway.key\"\n",
    )
    .await;
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
    let (anonymous, _) = gateway("ca = \"upstream-ca.pem\"\n").await;
    let a = Http::h1()
        .post(anonymous.addr, ECHO, "application/json", &[], THING)
        .await;
    assert_eq!(a.status, 503, "{:?}", a.body);
}

/// gRPC over TLS when ALPN chose h2 (the listener's own), refused over http/1.1; gRPC-Web
/// over either.
#[tokio::test]
async fn grpc_and_grpc_web_are_served_over_tls() {
    let backend = start_backend().await;
    let ca = Ca::new("test CA");
    let dir = tls_files(&ca, "gateway", None);
    let gw = tls_gateway(&dir, &backend, "").await;
    // Thing{id: 7}, in gRPC's envelope.
    let message = [0u8, 0, 0, 0, 2, 0x08, 0x07];
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let mut conn = TlsHttp::open(gw.addr, client_config(&ca, None, &[alpn]))
            .await
            .unwrap();
        let a = conn
            .post(ECHO, "application/grpc", message.to_vec())
            .await
            .unwrap();
        if alpn == b"h2" {
            assert_eq!(a.status, 200, "{a:?}");
            assert_eq!(a.body.as_ref(), message, "relayed byte for byte");
            let trailers = a.trailers.as_ref().expect("trailers");
            assert_eq!(trailers["grpc-status"], "0");
        } else {
            assert_eq!(a.status, 501, "{a:?}");
            assert_eq!(a.headers["grpc-status"], "12");
        }
        // An HTTP/1.1 refusal closes its connection (the gateway answered before reading the
        // body): gRPC-Web on a new one.
        let mut conn = TlsHttp::open(gw.addr, client_config(&ca, None, &[alpn]))
            .await
            .unwrap();
        let a = conn
            .post(ECHO, "application/grpc-web+proto", message.to_vec())
            .await
            .unwrap();
        assert_eq!(a.status, 200, "{alpn:?}: {a:?}");
        assert_eq!(a.headers["content-type"], "application/grpc-web+proto");
        // The message, then the trailers frame (flags 0x80).
        assert_eq!(&a.body[..message.len()], message);
        assert_eq!(a.body[message.len()], 0x80);
        assert!(
            String::from_utf8_lossy(&a.body[message.len() + 5..]).contains("grpc-status:0"),
            "{a:?}"
        );
    }
}

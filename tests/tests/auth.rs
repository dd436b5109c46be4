//! `[auth]` and `[rate_limit]` through the real gateway, configured by the binary's loader:
//! tokens signed here with keys made here (RSA by openssl, P-256 and Ed25519 by rcgen), their
//! key set in a JWKS file; every kind of bad token refused 401 with an RFC 6750 challenge and
//! a google.rpc.Status in the protocol's form (REST, gRPC, Connect), counted by reason; API
//! keys by their hash; the verified identity and the forwarded claims seen by the backend, and
//! what the client sent under those names gone; `x-client-id` unable to pass for a verified
//! client (the sunset exemption and the migration report checked); per-client rate limits
//! over the wire.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use protogate_tests::tls::{self, Ca};
use protogate_tests::{
    Http, TempDir, eventually, eventually_async, grpc_call, sha256_hex, start_backend,
    start_gateway_toml_in,
};
use serde_json::{Value, json};

const METADATA: &str = "/protogate.test.svc.TestService/Metadata";
const ECHO: &str = "/protogate.test.svc.TestService/Echo";
/// How long a change the test made may take to show (only a failing test waits it out).
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The signing keys of one test, and their public halves as a JWKS.
struct Keys {
    rsa: EncodingKey,
    /// Another RSA key, published nowhere.
    rogue: EncodingKey,
    /// The RSA key's public half (PEM), for the HS256-with-the-public-key attack.
    rsa_public_pem: Vec<u8>,
    ec: EncodingKey,
    ed: EncodingKey,
    jwks: Value,
}

fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs (Debian's openssl package)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// An RSA key made by openssl: the signing key and the JWK's `n`.
fn rsa_key(dir: &TempDir, name: &str) -> (EncodingKey, String, Vec<u8>) {
    let path = dir.path().join(name);
    let path = path.to_str().unwrap();
    openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        path,
    ]);
    let pem = std::fs::read(path).unwrap();
    let modulus = String::from_utf8(openssl(&["rsa", "-in", path, "-noout", "-modulus"])).unwrap();
    let hex = modulus.trim().strip_prefix("Modulus=").unwrap();
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let public = openssl(&["pkey", "-in", path, "-pubout"]);
    (
        EncodingKey::from_rsa_pem(&pem).unwrap(),
        B64.encode(n),
        public,
    )
}

fn keys(dir: &TempDir) -> Keys {
    let (rsa, n, rsa_public_pem) = rsa_key(dir, "rsa.pem");
    let (rogue, _, _) = rsa_key(dir, "rogue.pem");
    let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = ec.public_key_raw();
    assert_eq!(point.len(), 65, "an uncompressed P-256 point");
    let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let jwks = json!({"keys": [
        {"kty": "RSA", "kid": "rsa", "use": "sig", "n": n, "e": "AQAB"},
        {"kty": "EC", "kid": "ec", "crv": "P-256", "alg": "ES256",
         "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])},
        {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": B64.encode(ed.public_key_raw())},
    ]});
    Keys {
        rsa,
        rogue,
        rsa_public_pem,
        ec: EncodingKey::from_ec_der(&ec.serialize_der()),
        ed: EncodingKey::from_ed_der(&ed.serialize_der()),
        jwks,
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims valid now for `sub`, with `extra` over them.
fn claims(sub: &str, extra: Value) -> Value {
    let mut c = json!({
        "iss": "https://idp.test/", "aud": "protogate", "sub": sub,
        "iat": now(), "exp": now() + 600, "tenant": "t-7",
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn sign(alg: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

/// `[auth]` on a JWKS file, one API key, Metadata requiring credentials; `more` after it.
fn config(more: &str) -> String {
    config_keys("jwks_file = \"jwks.json\"", more)
}

/// [`config`] with the keys from `keys` (`jwks_file = …`, or `jwks_url = …` and the rest).
fn config_keys(keys: &str, more: &str) -> String {
    format!(
        r#"
access_log = true
[auth]
{keys}
issuer = "https://idp.test/"
audiences = ["protogate", "other"]
leeway = "5s"
forward_claims = {{ tenant = "x-tenant" }}
[[auth.api_keys]]
client = "billing-legacy"
sha256 = "{}"
[[auth.rules]]
selector = "protogate.test.svc.TestService.Metadata"
required = true
{more}
"#,
        sha256_hex("k-billing-7f3a")
    )
}

/// A JSON POST of a small message to `path` with `headers`.
async fn post(
    http: &Http,
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> protogate_tests::Answer {
    http.post(addr, path, "application/json", headers, r#"{"name":"n"}"#)
        .await
}

/// What the backend's Metadata method saw: `name=value` of every ASCII header it got.
fn seen(answer: &protogate_tests::Answer) -> Vec<String> {
    let body = answer.json();
    let mut seen: Vec<String> = body["counts"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    seen.sort();
    seen
}

#[tokio::test]
async fn tokens_and_api_keys_name_the_caller_and_bad_ones_are_refused() {
    let dir = TempDir::new("auth-tokens");
    let keys = keys(&dir);
    dir.write("jwks.json", keys.jwks.to_string());
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml_in(dir.path(), &config(""), &upstream).await;
    let http = Http::h1();
    let call = |headers: Vec<(&'static str, String)>| {
        let http = http.clone();
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http.post(gw.addr, METADATA, "application/json", &headers, "{}")
                .await
        }
    };
    let bearer = |t: &str| ("authorization", format!("Bearer {t}"));

    // Every accepted algorithm and key type; the identity and the claim reach the backend,
    // and what the client said under those names does not.
    for (alg, kid, key, who) in [
        (Algorithm::RS256, "rsa", &keys.rsa, "alice"),
        (Algorithm::RS512, "rsa", &keys.rsa, "alice"),
        (Algorithm::PS256, "rsa", &keys.rsa, "alice"),
        (Algorithm::ES256, "ec", &keys.ec, "bob"),
        (Algorithm::EdDSA, "ed", &keys.ed, "carol"),
    ] {
        let token = sign(alg, kid, key, &claims(who, json!({})));
        let a = call(vec![
            bearer(&token),
            ("grpc-metadata-x-protogate-client", "mallory".into()),
            ("grpc-metadata-x-tenant", "t-evil".into()),
            ("x-client-id", "legacy-billing".into()),
        ])
        .await;
        assert_eq!(a.status, 200, "{alg:?}: {:?}", a.body);
        let seen = seen(&a);
        assert!(
            seen.contains(&format!("x-protogate-client={who}")),
            "{alg:?}: {seen:?}"
        );
        assert!(
            seen.contains(&"x-tenant=t-7".to_string()),
            "{alg:?}: {seen:?}"
        );
        assert!(
            !seen
                .iter()
                .any(|s| s.contains("mallory") || s.contains("t-evil")),
            "{seen:?}"
        );
        // The token stays at the gateway (forward_token = false).
        assert!(
            !seen.iter().any(|s| s.starts_with("authorization=")),
            "{seen:?}"
        );
    }
    // The second audience, a token from a clock 3 s ahead (within the leeway).
    let token = sign(
        Algorithm::RS256,
        "rsa",
        &keys.rsa,
        &claims("dave", json!({"aud": ["x", "other"], "nbf": now() + 3})),
    );
    assert_eq!(call(vec![bearer(&token)]).await.status, 200);

    // Refused, each with the same challenge and message; the reason only in the metric.
    let rsa = |c: Value| sign(Algorithm::RS256, "rsa", &keys.rsa, &claims("eve", c));
    let none = format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"none","typ":"JWT","kid":"rsa"}"#),
        B64.encode(claims("eve", json!({})).to_string())
    );
    let hs256 = sign(
        Algorithm::HS256,
        "rsa",
        &EncodingKey::from_secret(&keys.rsa_public_pem),
        &claims("eve", json!({})),
    );
    let bad = [
        ("expired", rsa(json!({"exp": now() - 60}))),
        ("not_yet_valid", rsa(json!({"nbf": now() + 120}))),
        ("issuer", rsa(json!({"iss": "https://other.test/"}))),
        ("audience", rsa(json!({"aud": "someone-else"}))),
        (
            "signature",
            sign(
                Algorithm::RS256,
                "rsa",
                &keys.rogue,
                &claims("eve", json!({})),
            ),
        ),
        (
            "unknown_key",
            sign(
                Algorithm::RS256,
                "nope",
                &keys.rsa,
                &claims("eve", json!({})),
            ),
        ),
        ("algorithm", none),
        ("algorithm", hs256),
        (
            "algorithm",
            sign(Algorithm::ES256, "rsa", &keys.ec, &claims("eve", json!({}))),
        ),
        ("malformed", "abc.def".into()),
        ("claims", rsa(json!({"exp": null}))),
    ];
    for (reason, token) in &bad {
        let a = call(vec![bearer(token)]).await;
        assert_eq!(a.status, 401, "{reason}: {:?}", a.body);
        assert_eq!(
            a.header("www-authenticate"),
            Some(
                "Bearer realm=\"protogate\", error=\"invalid_token\", error_description=\"the access token is expired, malformed or not valid\""
            ),
            "{reason}"
        );
        let status = a.json();
        assert_eq!(status["code"], 16, "{reason}: {status}");
        assert_eq!(
            status["message"], "the bearer token is not valid",
            "{reason}"
        );
    }
    // A bad token is refused on a method that requires nothing too.
    let a = http
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[("authorization", &format!("Bearer {}", bad[0].1))],
            "{}",
        )
        .await;
    assert_eq!(a.status, 401);

    // API keys: by their hash; a wrong one refused.
    let a = call(vec![("x-api-key", "k-billing-7f3a".into())]).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(seen(&a).contains(&"x-protogate-client=billing-legacy".to_string()));
    // Relayed as gRPC (every header goes on), the key itself stays at the gateway.
    let grpc = grpc_call(gw.addr, METADATA, &[("x-api-key", "k-billing-7f3a")]).await;
    assert_eq!(
        grpc.header("grpc-status").or(grpc
            .trailers
            .as_ref()
            .and_then(|t| t.get("grpc-status"))
            .and_then(|v| v.to_str().ok())),
        Some("0")
    );
    let message = &grpc.body[5..];
    assert!(
        !String::from_utf8_lossy(message).contains("k-billing-7f3a"),
        "the key reached the backend"
    );
    assert!(String::from_utf8_lossy(message).contains("x-protogate-client=billing-legacy"));
    let a = call(vec![("x-api-key", "k-billing-7f3b".into())]).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["message"], "the API key is not valid");

    // No credentials: refused where required (a challenge without an error), served elsewhere
    // and then nothing names the caller upstream.
    let a = call(vec![("x-client-id", "legacy-billing".into())]).await;
    assert_eq!(a.status, 401);
    assert_eq!(
        a.header("www-authenticate"),
        Some("Bearer realm=\"protogate\"")
    );
    let a = http
        .post(gw.addr, ECHO, "application/json", &[], r#"{"name":"n"}"#)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    // gRPC: status 16 in a trailers-only answer; Connect: `unauthenticated` under 401.
    let a = grpc_call(gw.addr, METADATA, &[("authorization", "Bearer abc.def")]).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("grpc-status"), Some("16"), "{:?}", a.headers);
    assert!(a.header("www-authenticate").is_some());
    let a = http
        .post(
            gw.addr,
            METADATA,
            "application/json",
            &[("connect-protocol-version", "1")],
            "{}",
        )
        .await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["code"], "unauthenticated", "{:?}", a.body);

    // Counted by reason, every reason's series there from the start.
    let metrics = http.metrics(gw.addr).await;
    for (reason, n) in [
        ("expired", 2),
        ("not_yet_valid", 1),
        ("issuer", 1),
        ("audience", 1),
        ("signature", 1),
        ("unknown_key", 1),
        ("algorithm", 3),
        ("malformed", 2),
        ("claims", 1),
        ("api_key", 1),
        ("missing", 2),
    ] {
        let line = format!("protogate_auth_failures_total{{reason=\"{reason}\"}} {n}");
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
}

#[tokio::test]
async fn a_self_declared_name_is_no_verified_identity() {
    let dir = TempDir::new("auth-exempt");
    let keys = keys(&dir);
    dir.write("jwks.json", keys.jwks.to_string());
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    // JSON on Echo past its sunset; billing-legacy exempt.
    let sunset = r#"
[[json_sunset]]
selector = "protogate.test.svc.TestService.Echo"
deprecation = "2020-01-01T00:00:00Z"
sunset = "2020-06-01T00:00:00Z"
exempt_clients = ["billing-legacy", "legacy-billing"]
"#;
    let (gw, _) = start_gateway_toml_in(dir.path(), &config(sunset), &upstream).await;
    let http = Http::h1();
    let echo = |headers| post(&http, gw.addr, ECHO, headers);
    // The verified client is exempt; a client calling itself so is not.
    assert_eq!(echo(&[("x-api-key", "k-billing-7f3a")]).await.status, 200);
    let a = echo(&[("x-client-id", "legacy-billing")]).await;
    assert_eq!(a.status, 415, "{:?}", a.body);
    // Nor does x-client-id override a token's identity.
    let token = sign(
        Algorithm::ES256,
        "ec",
        &keys.ec,
        &claims("frank", json!({})),
    );
    let a = echo(&[
        ("authorization", &format!("Bearer {token}")),
        ("x-client-id", "billing-legacy"),
    ])
    .await;
    assert_eq!(a.status, 415, "{:?}", a.body);

    // The report names the verified clients so, and the self-declared one unverified.
    let report = http.get(gw.addr, "/admin/migration.json").await.json();
    let method = report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "protogate.test.svc.TestService.Echo")
        .unwrap_or_else(|| panic!("{report}"));
    let client = |name: &str| {
        method["clients"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {method}"))
            .clone()
    };
    assert_eq!(client("billing-legacy")["verified"], true);
    assert_eq!(client("frank")["verified"], true);
    assert_eq!(client("legacy-billing")["verified"], false);
    assert_eq!(client("legacy-billing")["unverified_requests"], 1);
    assert_eq!(client("billing-legacy")["exempt"], 1);
}

#[tokio::test]
async fn rate_limits_hold_per_client() {
    let dir = TempDir::new("auth-rate");
    let keys = keys(&dir);
    dir.write("jwks.json", keys.jwks.to_string());
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    // One request every 100 s after a burst: nothing comes back during the test.
    let limits = r#"
[rate_limit]
per_client = 0.01
burst = 3
[[rate_limit.rules]]
selector = "protogate.test.svc.TestService.Metadata"
per_client = 0.01
burst = 1
"#;
    let (gw, _) = start_gateway_toml_in(dir.path(), &config(limits), &upstream).await;
    let http = Http::h1();
    let echo = |headers| post(&http, gw.addr, ECHO, headers);
    // Anonymous clients by address: x-client-id changes nothing.
    for i in 0..3 {
        let id = format!("c{i}");
        let a = post(&http, gw.addr, ECHO, &[("x-client-id", &id)]).await;
        assert_eq!(a.status, 200, "{i}");
    }
    let a = echo(&[("x-client-id", "c9")]).await;
    assert_eq!(a.status, 429, "{:?}", a.body);
    assert_eq!(a.json()["code"], 8);
    let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=100).contains(&retry), "{retry}");
    assert_eq!(a.header("ratelimit-policy"), Some("\"default\";q=3;w=300"));
    assert_eq!(
        a.header("ratelimit"),
        Some(format!("\"default\";r=0;t={retry}").as_str())
    );
    // A verified client has its own budget; the method's rule its own.
    let key = [("x-api-key", "k-billing-7f3a")];
    for _ in 0..3 {
        assert_eq!(echo(&key).await.status, 200);
    }
    assert_eq!(echo(&key).await.status, 429);
    let meta = |headers| post(&http, gw.addr, METADATA, headers);
    assert_eq!(meta(&[("x-api-key", "k-billing-7f3a")]).await.status, 200);
    assert_eq!(meta(&[("x-api-key", "k-billing-7f3a")]).await.status, 429);
    // gRPC: RESOURCE_EXHAUSTED.
    let a = grpc_call(gw.addr, METADATA, &[("x-api-key", "k-billing-7f3a")]).await;
    assert_eq!(a.header("grpc-status"), Some("8"), "{:?}", a.headers);
    let metrics = http.metrics(gw.addr).await;
    for (method, n) in [("Echo", 2), ("Metadata", 2)] {
        let line = format!(
            "protogate_rate_limited_total{{method=\"protogate.test.svc.TestService/{method}\"}} {n}"
        );
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
}

/// A P-256 key made by rcgen: its signing key and its JWK under `kid`.
fn ec_key(kid: &str) -> (EncodingKey, Value) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = key.public_key_raw();
    let jwk = json!({"kty": "EC", "kid": kid, "crv": "P-256",
        "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])});
    (EncodingKey::from_ec_der(&key.serialize_der()), jwk)
}

/// An HTTPS server of one JWKS document (503 while it is empty), counting the fetches.
struct JwksServer {
    addr: std::net::SocketAddr,
    doc: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
}

impl JwksServer {
    async fn start(ca: &Ca) -> JwksServer {
        let acceptor =
            tokio_rustls::TlsAcceptor::from(Arc::new(tls::server_config(&ca.server("jwks"), None)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let doc = Arc::new(Mutex::new(String::new()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (d, f) = (doc.clone(), fetches.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, d, f) = (acceptor.clone(), d.clone(), f.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |_req| {
                        f.fetch_add(1, Ordering::SeqCst);
                        let body = d.lock().unwrap().clone();
                        let status = if body.is_empty() { 503 } else { 200 };
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .header("content-type", "application/jwk-set+json")
                                    .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        JwksServer { addr, doc, fetches }
    }

    fn serve(&self, keys: &[&Value]) {
        *self.doc.lock().unwrap() = json!({ "keys": keys }).to_string();
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn keys_from_a_url_are_fetched_again_for_a_new_kid_and_rotate() {
    let dir = TempDir::new("auth-jwks-url");
    let ca = Ca::new("idp-ca");
    ca.write(&dir, "idp-ca");
    let server = JwksServer::start(&ca).await;
    let (k1, jwk1) = ec_key("k1");
    let (k2, jwk2) = ec_key("k2");
    let (k3, _) = ec_key("k3");
    server.serve(&[&jwk1]);
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let keys = |refresh: &str| {
        format!(
            "jwks_url = \"https://127.0.0.1:{}/jwks.json\"\njwks_ca = \"idp-ca.pem\"\njwks_refresh = \"{refresh}\"",
            server.addr.port()
        )
    };
    let http = Http::h1();
    let status = async |gw: std::net::SocketAddr, key: &EncodingKey, kid: &str| {
        let token = sign(Algorithm::ES256, kid, key, &claims("gina", json!({})));
        post(
            &http,
            gw,
            METADATA,
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await
        .status
    };

    // Fetched at start; not again for an hour but when a token names a new kid, and then at
    // most once an hour.
    let (slow, _) =
        start_gateway_toml_in(dir.path(), &config_keys(&keys("1h"), ""), &upstream).await;
    assert_eq!(server.fetches(), 1, "fetched at start");
    assert_eq!(status(slow.addr, &k1, "k1").await, 200);
    server.serve(&[&jwk1, &jwk2]);
    // (The request waits up to 2 s for the fetch; a slower one is in force soon after.)
    let status = &status;
    let (k1, k2) = (&k1, &k2);
    eventually_async("a new kid fetched", WAIT, || async move {
        (status(slow.addr, k2, "k2").await == 200).then_some(())
    })
    .await;
    assert_eq!(server.fetches(), 2);
    for _ in 0..10 {
        assert_eq!(status(slow.addr, &k3, "k3").await, 401);
    }
    assert_eq!(
        server.fetches(),
        2,
        "unknown kids do not make the gateway ask again"
    );

    // Fetched every 200 ms: a key that leaves the set takes its tokens with it; a fetch that
    // fails keeps the keys in force.
    let (fast, _) =
        start_gateway_toml_in(dir.path(), &config_keys(&keys("200ms"), ""), &upstream).await;
    assert_eq!(status(fast.addr, k1, "k1").await, 200);
    server.serve(&[&jwk2]);
    eventually_async(
        "k1's tokens refused once it left the set",
        WAIT,
        || async move { (status(fast.addr, k1, "k1").await == 401).then_some(()) },
    )
    .await;
    assert_eq!(status(fast.addr, k2, "k2").await, 200);
    *server.doc.lock().unwrap() = String::new();
    let before = server.fetches();
    eventually("two failed fetches", WAIT, || {
        (server.fetches() >= before + 2).then_some(())
    })
    .await;
    assert_eq!(
        status(fast.addr, k2, "k2").await,
        200,
        "the keys in force stay"
    );
}

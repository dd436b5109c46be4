//! Reload promises of docs/operations.md ("Reloading") and docs/tls.md, through the binary:
//! file changes close together are one reload; each setting only a restart changes is named
//! when a reload changes it, and the listener's TLS settings a reload changes are put in
//! force; a call in flight across a reload (by a file change, and by SIGHUP) ends on the
//! snapshot it started with while new calls get the new one; a replaced `[tls] client_ca`
//! decides which client certificates new connections accept; every change written under the
//! file watcher alone is put in force, also one written while the gateway starts or while a
//! reload builds (or fails); a rewritten `[auth] jwks_file` puts its keys in force (and takes
//! the removed key's tokens, cached ones too, out of it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use support::{DEADLINE, PROTO_DIR, Proc, Scratch, eventually, http, metric, replace};

/// The line of each reload put in force, and the warning of one that changed what only a
/// restart changes.
const RELOADED: &str = "configuration reloaded";
const RESTART: &str = "changed, but in force only after a restart: ";

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// The stderr lines of `gw` containing every one of `needles`.
fn lines(gw: &Proc, needles: &[&str]) -> Vec<String> {
    gw.log()
        .into_iter()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .collect()
}

/// Waits until `gw` has logged `n` lines containing every one of `needles`; the n-th. A
/// failed reload fails the test at once, with the log.
fn nth_line(gw: &Proc, needles: &[&str], n: usize) -> String {
    eventually(&format!("{n} lines with {needles:?}"), || {
        let log = gw.log();
        if let Some(failed) = log.iter().find(|l| l.contains("reload failed")) {
            panic!("{failed}\nlog:\n{}", log.join("\n"));
        }
        let found: Vec<&String> = log
            .iter()
            .filter(|l| needles.iter().all(|x| l.contains(x)))
            .collect();
        found.get(n - 1).map(|l| (*l).clone())
    })
    .unwrap_or_else(|| {
        panic!(
            "fewer than {n} lines with {needles:?}; log:\n{}",
            gw.log().join("\n")
        )
    })
}

/// SIGHUP, and its reload logged: whatever the files said before the signal is in force
/// then. (The file watcher reloads the same changes by itself, 300 ms after the last; the
/// tests that count warnings or check what is in force at a given step use SIGHUP as the
/// point they know.)
fn sighup_reload(gw: &Proc) -> String {
    let before = lines(gw, &[RELOADED, "SIGHUP"]).len();
    gw.signal("-HUP");
    nth_line(gw, &[RELOADED, "SIGHUP"], before + 1)
}

/// A config file serving the demo shop's v1 schema; `rest` is appended.
fn shop_config(upstream: &str, rest: &str) -> String {
    format!(
        "# gateway\nlisten = \"127.0.0.1:0\"\nupstream = \"{upstream}\"\nprotos = [\"{PROTO_DIR}/demo/v1/shop.proto\"]\nincludes = [\"{PROTO_DIR}\"]\n{rest}"
    )
}

// === debouncing ===

/// docs/operations.md: a change of the config file is reloaded, and "changes within 300 ms
/// are one". Six versions of the file written 100 ms apart (half a second from the first to
/// the last, no two further apart than 300 ms) are one reload, of the last version.
#[test]
fn file_changes_within_300_ms_are_one_reload() {
    let scratch = Scratch::new("debounce");
    let base = shop_config("http://127.0.0.1:1", "");
    let config = scratch.file("gw.toml", &base);
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    sighup_reload(&gw);
    let ok = "protogate_schema_reloads_total{result=\"ok\"}";
    assert_eq!(metric(addr, ok), Some(format!("{ok} 1")));

    let changed = [RELOADED, "a watched file changed"];
    let mut widest = Duration::ZERO;
    let mut last = Instant::now();
    for version in 1..=6 {
        if version > 1 {
            std::thread::sleep(Duration::from_millis(100));
        }
        replace(&config, &format!("{base}# version {version}\n"));
        if version > 1 {
            widest = widest.max(last.elapsed());
        }
        last = Instant::now();
    }
    nth_line(&gw, &changed, 1);
    // No second reload follows: given three debounce periods to show, which is plenty (a
    // slow machine can only hide a second reload here, never make one).
    std::thread::sleep(Duration::from_millis(900));
    let reloads = lines(&gw, &changed).len();
    if widest < Duration::from_millis(250) {
        assert_eq!(reloads, 1, "log:\n{}", gw.log().join("\n"));
        assert_eq!(metric(addr, ok), Some(format!("{ok} 2")));
    } else {
        // This machine stalled the writer past the debounce between two writes: they may
        // rightly be two reloads.
        eprintln!("writes {widest:?} apart: the count of reloads is not checked");
        assert!(reloads >= 1);
    }
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

// === settings only a restart changes ===

/// The warning's name for TLS turned on or off on the listener.
const TLS_ON_OFF: &str = "the listener's TLS (on or off)";

/// A gateway's config file changed a step at a time, each step put in force by SIGHUP, and
/// the warnings of what only a restart changes counted as they come.
struct Steps<'a> {
    gw: &'a Proc,
    config: String,
    text: String,
    /// The settings named so far, in order.
    named: Vec<&'static str>,
}

impl Steps<'_> {
    /// Replaces `from` by `to` in the file and reloads; `setting` is the one name the reload's
    /// warning must give (None: no warning).
    ///
    /// SIGHUP reloads whatever the file says; the watcher may reload the same change too,
    /// before or after. Either way one reload reads it first, and only that one can name a
    /// setting (a reload compares with the last one). A reload's warning follows its line, so
    /// once the SIGHUP's line is logged, the change is in force and its warning is coming.
    fn change(&mut self, from: &str, to: &str, setting: Option<&'static str>) {
        assert!(self.text.contains(from), "{from}");
        self.text = self.text.replacen(from, to, 1);
        replace(&self.config, &self.text);
        sighup_reload(self.gw);
        let want = self.named.len() + usize::from(setting.is_some());
        let seen = eventually("the warnings so far", || {
            (lines(self.gw, &[RESTART]).len() >= want).then_some(())
        });
        assert!(seen.is_some(), "{to:?}:\n{}", self.gw.log().join("\n"));
        self.named.extend(setting);
        let seen = lines(self.gw, &[RESTART]);
        assert!(
            seen.len() <= self.named.len(),
            "a warning for {to:?}:\n{}",
            self.gw.log().join("\n")
        );
    }
}

/// docs/operations.md: "What only a restart changes is named in a warning when it changed" —
/// every setting read once at start: by the process (the addresses bound, the runtime, the
/// log, the span exporter, TLS on the listener or not), by what every snapshot shares (the
/// admission limits, the migration report's bound, the downgrade log), and by the listener
/// (connections, timeouts, hyper's limits, the drain, the shutdown grace period, the
/// connection's span). Each is changed by a reload of its own and named, alone; a reload that
/// changes none of them warns of nothing. The listener's TLS settings are put in force
/// instead, while TLS stays on: `client_auth = "optional"` lets a client without a
/// certificate in, a new `client_ca` decides which client certificates new connections
/// accept, a new certificate and key are what new connections get. Turning TLS off is named,
/// and the listener goes on with TLS.
#[test]
fn each_setting_only_a_restart_changes_is_named_when_a_reload_changes_it() {
    let scratch = Scratch::new("restart-only");
    let (server_ca, server_ca2) = (Ca::new("server CA"), Ca::new("second server CA"));
    let (clients, clients2) = (Ca::new("clients CA"), Ca::new("second clients CA"));
    let (cert, key) = server_ca.server();
    let (cert2, key2) = server_ca2.server();
    for (name, text) in [
        ("server.pem", &cert),
        ("server.key", &key),
        ("server2.pem", &cert2),
        ("server2.key", &key2),
        ("clients.pem", &clients.pem()),
        ("clients2.pem", &clients2.pem()),
    ] {
        scratch.file(name, text);
    }
    let tls = "[tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"clients.pem\"\n\
               client_auth = \"required\"\n";
    let text = shop_config(
        "http://127.0.0.1:1",
        &format!(
            "admin_listen = \"127.0.0.1:0\"\nmax_body_bytes = 4194304\nworker_threads = 2\n\
             log_format = \"text\"\nmax_concurrent_requests = 4096\nmax_inflight_bytes = 268435456\n\
             downgrade_log_interval = \"60s\"\ndowngrade_log_max_lines = 100\n\
             max_connections = 10000\nheader_read_timeout = \"10s\"\nidle_timeout = \"90s\"\n\
             max_header_bytes = 16384\nmax_concurrent_streams = 250\ndrain_delay = \"5s\"\n\
             upstream_timeout = \"30s\"\naccess_log = false\n\
             [auth]\njwks_url = \"https://127.0.0.1:1/jwks.json\"\njwks_ca = \"clients.pem\"\n\
             jwks_refresh = \"5m\"\n\
             [migration]\nmax_clients = 1000\n{tls}"
        ),
    );
    let config = scratch.file("gw.toml", &text);
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    let mut steps = Steps {
        gw: &gw,
        config,
        text,
        named: Vec::new(),
    };
    sighup_reload(steps.gw);

    let mut table: Vec<(&str, &str, Option<&'static str>)> = vec![
        // A setting a reload does change: no warning.
        ("max_body_bytes = 4194304", "max_body_bytes = 4194000", None),
        // The process's.
        (
            "\nlisten = \"127.0.0.1:0\"",
            "\nlisten = \"127.0.0.1:1\"",
            Some("listen"),
        ),
        (
            "admin_listen = \"127.0.0.1:0\"",
            "admin_listen = \"127.0.0.1:1\"",
            Some("admin_listen"),
        ),
        (
            "worker_threads = 2",
            "worker_threads = 3",
            Some("worker_threads"),
        ),
        (
            "log_format = \"text\"",
            "log_format = \"json\"",
            Some("log_format"),
        ),
        // What every snapshot shares.
        (
            "max_concurrent_requests = 4096",
            "max_concurrent_requests = 4000",
            Some("max_concurrent_requests"),
        ),
        (
            "max_inflight_bytes = 268435456",
            "max_inflight_bytes = 134217728",
            Some("max_inflight_bytes"),
        ),
        (
            "max_clients = 1000",
            "max_clients = 500",
            Some("migration.max_clients"),
        ),
        (
            "downgrade_log_interval = \"60s\"",
            "downgrade_log_interval = \"61s\"",
            Some("downgrade_log_interval"),
        ),
        (
            "downgrade_log_max_lines = 100",
            "downgrade_log_max_lines = 99",
            Some("downgrade_log_max_lines"),
        ),
        // The listener's.
        (
            "max_connections = 10000",
            "max_connections = 9999",
            Some("max_connections"),
        ),
        (
            "header_read_timeout = \"10s\"",
            "header_read_timeout = \"11s\"",
            Some("header_read_timeout"),
        ),
        (
            "idle_timeout = \"90s\"",
            "idle_timeout = \"91s\"",
            Some("idle_timeout"),
        ),
        (
            "max_header_bytes = 16384",
            "max_header_bytes = 16000",
            Some("max_header_bytes (hyper's HTTP/1.1 buffer and HTTP/2 header list limit)"),
        ),
        (
            "max_concurrent_streams = 250",
            "max_concurrent_streams = 100",
            Some("max_concurrent_streams"),
        ),
        (
            "drain_delay = \"5s\"",
            "drain_delay = \"4s\"",
            Some("drain_delay"),
        ),
        (
            "upstream_timeout = \"30s\"",
            "upstream_timeout = \"29s\"",
            Some("upstream_timeout (as the shutdown grace period)"),
        ),
        (
            "access_log = false",
            "access_log = true",
            Some("access_log (whether its lines name the peer)"),
        ),
        // The token keys' fetcher, started once.
        (
            "jwks_refresh = \"5m\"",
            "jwks_refresh = \"6m\"",
            Some("[auth] jwks_url, jwks_refresh, jwks_ca"),
        ),
    ];
    // `[otel]` is a configuration error in a gateway built without the feature.
    if cfg!(feature = "otel") {
        table.push((
            "[migration]",
            "[otel]\nendpoint = \"http://127.0.0.1:1\"\n[migration]",
            Some("[otel]"),
        ));
    }
    for (from, to, setting) in table {
        steps.change(from, to, setting);
    }

    // The listener's TLS settings: in force, not named. The main listener answers /healthz
    // 404 (it is on the admin listener).
    let not_found = Ok("HTTP/1.1 404 Not Found".to_owned());
    let anonymous = || healthz(addr, tls_client(&server_ca, None));
    let first_clients = || healthz(addr, tls_client(&server_ca, Some(clients.client("one"))));
    let second_clients = || healthz(addr, tls_client(&server_ca, Some(clients2.client("two"))));
    assert!(anonymous().is_err(), "{:?}", anonymous());
    assert_eq!(first_clients(), not_found);
    steps.change(
        "client_auth = \"required\"",
        "client_auth = \"optional\"",
        None,
    );
    assert_eq!(anonymous(), not_found, "{}", gw.log().join("\n"));
    assert_eq!(first_clients(), not_found);
    steps.change(
        "client_ca = \"clients.pem\"",
        "client_ca = \"clients2.pem\"",
        None,
    );
    assert_eq!(second_clients(), not_found, "{}", gw.log().join("\n"));
    assert!(first_clients().is_err(), "{:?}", first_clients());
    assert_eq!(anonymous(), not_found);
    steps.change(
        "cert = \"server.pem\"\nkey = \"server.key\"",
        "cert = \"server2.pem\"\nkey = \"server2.key\"",
        None,
    );
    let second_server = || healthz(addr, tls_client(&server_ca2, None));
    assert_eq!(second_server(), not_found, "{}", gw.log().join("\n"));
    assert!(anonymous().is_err(), "{:?}", anonymous());
    // TLS off: named, and the listener goes on with TLS.
    let tls_now = steps.text[steps.text.find("[tls]").unwrap()..].to_owned();
    steps.change(&tls_now, "", Some(TLS_ON_OFF));
    assert_eq!(second_server(), not_found);

    // The last: every warning before it is in the log once it is.
    steps.change("max_body_bytes = 4194000", "max_body_bytes = 4193000", None);
    let named = std::mem::take(&mut steps.named);
    sighup_reload(&gw);
    let warned: Vec<String> = lines(&gw, &[RESTART])
        .iter()
        .map(|l| l.split_once(RESTART).unwrap().1.trim_end().to_owned())
        .collect();
    assert_eq!(warned, named, "log:\n{}", gw.log().join("\n"));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// `max_concurrent_streams` is read at start only (the listener's HTTP/2 settings are the
/// first snapshot's): a reload that sets it to 10 names it in the warning, and new HTTP/2
/// connections still get 250.
#[test]
fn a_reloaded_max_concurrent_streams_is_named_and_not_in_force() {
    let scratch = Scratch::new("streams-setting");
    let mut text = shop_config("http://127.0.0.1:1", "max_concurrent_streams = 250\n");
    let config = scratch.file("gw.toml", &text);
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    sighup_reload(&gw);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let advertised = || rt.block_on(max_concurrent_streams(addr));
    assert_eq!(advertised(), 250);

    text = text.replace(
        "max_concurrent_streams = 250",
        "max_concurrent_streams = 10",
    );
    replace(&config, &text);
    sighup_reload(&gw);
    let warned = eventually("the warning", || lines(&gw, &[RESTART]).into_iter().next());
    let warned = warned.unwrap_or_else(|| panic!("no warning:\n{}", gw.log().join("\n")));
    assert!(
        warned
            .trim_end()
            .ends_with(&format!("{RESTART}max_concurrent_streams")),
        "{warned}"
    );
    // Another: a warning of the watcher's reload of the same change would be logged by then.
    sighup_reload(&gw);
    assert_eq!(lines(&gw, &[RESTART]).len(), 1, "{}", gw.log().join("\n"));
    assert_eq!(advertised(), 250);
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// The SETTINGS_MAX_CONCURRENT_STREAMS a new h2c connection to `addr` gets.
async fn max_concurrent_streams(addr: SocketAddr) -> usize {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    // Before the server's SETTINGS the client allows any number.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while client.current_max_send_streams() == usize::MAX {
        assert!(tokio::time::Instant::now() < deadline, "no SETTINGS");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let max = client.current_max_send_streams();
    driver.abort();
    max
}

// === a call in flight across a reload ===

/// An h2 upstream for `hold.v1.Hold/Get` (the schemas below) answering `Reply{1: "x"}`: at
/// once, except a request whose bytes contain "held", which it counts as received and
/// answers only when given a permit.
struct HoldUpstream {
    addr: SocketAddr,
    received: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
    permits: Arc<tokio::sync::Semaphore>,
    _rt: tokio::runtime::Runtime,
}

impl HoldUpstream {
    fn start() -> HoldUpstream {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let state = (received.clone(), answered.clone(), permits.clone());
        rt.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((request, respond))) = conn.accept().await {
                        tokio::spawn(answer(request, respond, state.clone()));
                    }
                });
            }
        });
        HoldUpstream {
            addr,
            received,
            answered,
            permits,
            _rt: rt,
        }
    }

    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }
}

type HoldState = (
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    Arc<tokio::sync::Semaphore>,
);

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    (received, answered, permits): HoldState,
) {
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    let held = bytes.windows(4).any(|w| w == b"held");
    if held {
        received.fetch_add(1, Ordering::SeqCst);
        let Ok(permit) = permits.acquire().await else {
            return;
        };
        permit.forget();
    }
    let head = http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    // Reply{1: "x"}, framed.
    let _ = stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 3, 0x0a, 1, b'x']), false);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
    if held {
        answered.fetch_add(1, Ordering::SeqCst);
    }
}

const GET: &str = "/hold.v1.Hold/Get";

/// The service with its own `Reply`, whose field 1 is `name`.
const SERVICE_A: &str = r#"syntax = "proto3";
package hold.v1;
service Hold { rpc Get(GetRequest) returns (Reply); }
message GetRequest { string id = 1; }
message Reply { string name = 1; }
"#;

/// The service with `Reply` imported from reply.proto (which the gateway does not watch: only
/// the files the configuration names are).
const SERVICE_B: &str = r#"syntax = "proto3";
package hold.v1;
import "reply.proto";
service Hold { rpc Get(GetRequest) returns (Reply); }
message GetRequest { string id = 1; }
"#;

/// reply.proto with field 1 called `field`.
fn reply(field: &str) -> String {
    format!("syntax = \"proto3\";\npackage hold.v1;\nmessage Reply {{ string {field} = 1; }}\n")
}

/// docs/operations.md: "Requests in flight finish on the snapshot they started with; new
/// ones get the new one", for a reload by a file change and one by SIGHUP. The field the
/// upstream answers is called `name`, then `label` (the config file changed to another
/// .proto), then `title` (an imported file changed, and SIGHUP). Each time a call is held by
/// the upstream — received, not answered — from before the reload until its line is logged
/// and a new call has been answered by the new schema; released, it is answered with the old
/// field name.
#[test]
fn a_call_in_flight_across_a_reload_ends_on_its_snapshot_and_new_calls_get_the_new_one() {
    let upstream = HoldUpstream::start();
    let scratch = Scratch::new("in-flight");
    scratch.file("a.proto", SERVICE_A);
    scratch.file("b.proto", SERVICE_B);
    let reply_proto = scratch.file("reply.proto", &reply("label"));
    let text = format!(
        "listen = \"127.0.0.1:0\"\nupstream = \"http://{}\"\nprotos = [\"a.proto\"]\n",
        upstream.addr
    );
    let config = scratch.file("gw.toml", &text);
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    sighup_reload(&gw);
    let now = || {
        let answer = http(addr, "POST", GET, "application/json", br#"{"id":"now"}"#);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        body(&answer).to_owned()
    };
    let held = || {
        std::thread::spawn(move || http(addr, "POST", GET, "application/json", br#"{"id":"held"}"#))
    };
    assert_eq!(now(), r#"{"name":"x"}"#);

    // A file change: the config names another .proto.
    let first = held();
    let in_flight = eventually("the held call to reach the upstream", || {
        (upstream.received() == 1).then_some(())
    });
    assert!(in_flight.is_some(), "{}", gw.log().join("\n"));
    replace(&config, &text.replace("a.proto", "b.proto"));
    let line = nth_line(&gw, &[RELOADED, "a watched file changed"], 1);
    // At the swap the call was in flight: received, not answered.
    assert_eq!(upstream.answered(), 0, "{line}");
    assert!(!first.is_finished());
    assert_eq!(now(), r#"{"label":"x"}"#);
    upstream.permits.add_permits(1);
    let answer = first.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(body(&answer), r#"{"name":"x"}"#);

    // SIGHUP: reply.proto (imported, not watched) changed first.
    let second = held();
    let in_flight = eventually("the second held call to reach the upstream", || {
        (upstream.received() == 2).then_some(())
    });
    assert!(in_flight.is_some(), "{}", gw.log().join("\n"));
    replace(&reply_proto, &reply("title"));
    let line = sighup_reload(&gw);
    assert_eq!(upstream.answered(), 1, "{line}");
    assert!(!second.is_finished());
    assert_eq!(now(), r#"{"title":"x"}"#);
    upstream.permits.add_permits(1);
    let answer = second.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(body(&answer), r#"{"label":"x"}"#);
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

// === the client CA, replaced ===

struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    fn pem(&self) -> String {
        self.0.pem()
    }

    /// A server certificate for 127.0.0.1 and its key, PEM.
    fn server(&self) -> (String, String) {
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate named `name` and its key.
    fn client(&self, name: &str) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(vec![format!("{name}.clients.test")]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (cert.der().clone(), key)
    }
}

/// A TLS client trusting `server_ca`, showing `client` if given.
fn tls_client(
    server_ca: &Ca,
    client: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(server_ca.0.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// An HTTP/1.1 keep-alive connection over TLS.
struct Conn(StreamOwned<ClientConnection, TcpStream>);

impl Conn {
    fn open(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<Conn, String> {
        let tcp = TcpStream::connect_timeout(&addr, DEADLINE).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(DEADLINE)).unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let client = ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        let mut tls = StreamOwned::new(client, tcp);
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| e.to_string())?;
        }
        Ok(Conn(tls))
    }

    /// GET /healthz on this connection: the status line, or why there is none (with TLS 1.3
    /// a refused client certificate shows here, as the server's alert).
    fn healthz(&mut self) -> Result<String, String> {
        self.0
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !support::complete(&answer) {
            match self.0.read(&mut buf) {
                Ok(0) => return Err(format!("closed after {answer:?}")),
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
        let text = String::from_utf8_lossy(&answer).into_owned();
        Ok(text.lines().next().unwrap_or_default().to_owned())
    }
}

/// GET /healthz on a new connection.
fn healthz(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<String, String> {
    Conn::open(addr, config)?.healthz()
}

/// docs/tls.md: "The certificate, key and client CA are read again every second; when they
/// change … new connections get the new pair and open ones keep theirs", and "with
/// `client_ca`, clients must show a certificate signed by it". The `client_ca` file replaced
/// by another CA's certificate: without a restart, new connections with a certificate from
/// the new CA are served and those from the old one refused; a connection opened before
/// goes on.
#[test]
fn a_replaced_client_ca_decides_which_clients_new_connections_accept() {
    let scratch = Scratch::new("client-ca");
    let server_ca = Ca::new("server CA");
    let (old, new) = (Ca::new("old clients CA"), Ca::new("new clients CA"));
    let (cert, key) = server_ca.server();
    scratch.file("server.pem", &cert);
    scratch.file("server.key", &key);
    let clients = scratch.file("clients.pem", &old.pem());
    let config = scratch.file(
        "gw.toml",
        &shop_config(
            "http://127.0.0.1:1",
            "[tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"clients.pem\"\n",
        ),
    );
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    let from_old = || tls_client(&server_ca, Some(old.client("old")));
    let from_new = || tls_client(&server_ca, Some(new.client("new")));
    let ok = Ok("HTTP/1.1 200 OK".to_owned());
    assert_eq!(healthz(addr, from_old()), ok);
    let refused = healthz(addr, from_new());
    assert!(refused.is_err(), "{refused:?}");
    let mut open = Conn::open(addr, from_old()).unwrap();
    assert_eq!(open.healthz(), ok);

    replace(&clients, &new.pem());
    let served = eventually("a client of the new CA to be served", || {
        healthz(addr, from_new()).ok()
    });
    assert_eq!(
        served.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "{}",
        gw.log().join("\n")
    );
    gw.wait_for_line("TLS certificate reloaded");
    let refused = healthz(addr, from_old());
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(open.healthz(), ok);
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

// === every change written is reloaded ===

/// GET /admin/schema (on the main listener: no admin_listen in these tests).
fn schema_document(addr: SocketAddr) -> String {
    body(&http(addr, "GET", "/admin/schema", "", b"")).to_owned()
}

/// Polls `check` on the gateway's `/admin/schema` every 2 ms (tight: a test that writes the
/// next file as soon as the last is in force writes it as close as it can to the reload that
/// put it there) until it holds, for at most [`DEADLINE`]; fails the test with the log if it
/// never does.
fn wait_for_schema(gw: &Proc, what: &str, check: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let log = gw.log();
        if let Some(failed) = log.iter().find(|l| l.contains("reload failed")) {
            panic!("{failed}\nlog:\n{}", log.join("\n"));
        }
        let document = schema_document(gw_addr(gw));
        if check(&document) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never in force: /admin/schema {document}\nlog:\n{}",
            log.join("\n")
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The address `gw` logged it listens on (it has: the callers took it before).
fn gw_addr(gw: &Proc) -> SocketAddr {
    let line = gw
        .log()
        .into_iter()
        .find(|l| l.contains("listening on http://"))
        .expect("the gateway listens");
    let rest = line.split("listening on http://").nth(1).unwrap();
    rest.split(|c: char| c.is_whitespace() || c == '"')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// docs/operations.md: the gateway reloads "whenever the config file … or a `.proto` file it
/// was started with changes on disk". Under the file watcher alone — no SIGHUP, from the
/// moment the gateway says it listens — the config file (a REST rule's path) and the
/// `.proto` (one more method) are rewritten in turn, each as soon as the one before is in
/// force; every version is put in force. (A reload noted what the files held by reading them
/// again after its line was logged, and the watcher was set up by a task that could start
/// after the gateway said it listened: a file written in either gap was taken as loaded and
/// never reloaded.)
#[test]
fn every_change_written_under_the_watcher_alone_is_put_in_force() {
    let scratch = Scratch::new("every-change");
    let v1 = std::fs::read_to_string(format!("{PROTO_DIR}/demo/v1/shop.proto")).unwrap();
    let proto_text = |extra: usize| {
        v1.replace(
            "  rpc GetOrder(",
            &format!("  rpc Extra{extra}(GetOrderRequest) returns (Order);\n  rpc GetOrder("),
        )
    };
    let config_text = |rule: usize| {
        format!(
            "listen = \"127.0.0.1:0\"\nupstream = \"http://127.0.0.1:1\"\nprotos = [\"shop.proto\"]\nincludes = [\".\", \"{PROTO_DIR}\"]\n\
             [[http_rules]]\nselector = \"demo.shop.v1.Shop.GetOrder\"\nget = \"/rule{rule}/orders/{{id}}\"\n"
        )
    };
    let proto = scratch.file("shop.proto", &proto_text(0));
    let config = scratch.file("gw.toml", &config_text(0));
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    gw.addr();
    let (mut rule, mut extra) = (0, 0);
    for version in 1..=12 {
        if version % 2 == 1 {
            rule = version;
            replace(&config, &config_text(rule));
        } else {
            extra = version;
            replace(&proto, &proto_text(extra));
        }
        wait_for_schema(&gw, &format!("version {version}"), |document| {
            document.contains(&format!("\"/rule{rule}/orders/{{id}}\""))
                && document.contains(&format!("/demo.shop.v1.Shop/Extra{extra}\""))
        });
    }
    assert!(lines(&gw, &["SIGHUP"]).is_empty());
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// What a held reflection question gets when the test lets it go.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Release {
    Not,
    Answer,
    Refuse,
}

/// A backend serving gRPC server reflection (v1) of proto/test/reflect/v1 and nothing else,
/// whose questions the test can hold: while held, a question is counted and waits until
/// released, then is answered or refused (UNAVAILABLE). So a test can write a file while the
/// gateway is in the middle of building a snapshot: it has read its files and waits for the
/// reflection.
struct ReflectionBackend {
    addr: SocketAddr,
    hold: Arc<AtomicBool>,
    held: Arc<AtomicUsize>,
    release: tokio::sync::watch::Sender<Release>,
    _rt: tokio::runtime::Runtime,
}

impl ReflectionBackend {
    fn start(held_from_the_start: bool) -> ReflectionBackend {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let dirs = [
            format!("{PROTO_DIR}/test/reflect/v1"),
            concat!(env!("CARGO_MANIFEST_DIR"), "/../transcode/proto").to_owned(),
        ];
        let schema = transcode::Schema::compile(&["evolving.proto".to_owned()], move |name| {
            dirs.iter()
                .find_map(|dir| std::fs::read_to_string(format!("{dir}/{name}")).ok())
        })
        .unwrap();
        let set: &'static [u8] = Box::leak(schema.to_descriptor_set().into_boxed_slice());
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(set)
            .build_v1()
            .unwrap();
        let hold = Arc::new(AtomicBool::new(held_from_the_start));
        let held = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(Release::Not);
        let gated = Gated {
            reflection,
            hold: hold.clone(),
            held: held.clone(),
            released,
        };
        rt.spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            tonic::transport::Server::builder()
                .serve_with_incoming(gated, incoming)
                .await
                .unwrap();
        });
        ReflectionBackend {
            addr,
            hold,
            held,
            release,
            _rt: rt,
        }
    }

    /// Questions from now on are held.
    fn hold(&self) {
        self.release.send_replace(Release::Not);
        self.hold.store(true, Ordering::SeqCst);
    }

    /// The held questions are let go (`how`), and the next ones answered at once.
    fn release(&self, how: Release) {
        self.hold.store(false, Ordering::SeqCst);
        self.release.send_replace(how);
    }

    fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits until more than `before` questions were held.
    fn wait_held(&self, before: usize, gw: &Proc) {
        let held = eventually("a reflection question to be held", || {
            (self.held() > before).then_some(())
        });
        assert!(held.is_some(), "{}", gw.log().join("\n"));
    }
}

#[derive(Clone)]
struct Gated<R> {
    reflection: R,
    hold: Arc<AtomicBool>,
    held: Arc<AtomicUsize>,
    released: tokio::sync::watch::Receiver<Release>,
}

impl<R> tonic::server::NamedService for Gated<R> {
    const NAME: &'static str = "grpc.reflection.v1.ServerReflection";
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<R> tower::Service<http::Request<tonic::body::Body>> for Gated<R>
where
    R: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    R::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let path = req.uri().path().to_owned();
        if !path.starts_with("/grpc.reflection.v1.") {
            return Box::pin(async move { Ok(tonic::Status::unimplemented(path).into_http()) });
        }
        let mut reflection = self.reflection.clone();
        let (hold, held, mut released) =
            (self.hold.clone(), self.held.clone(), self.released.clone());
        Box::pin(async move {
            if hold.load(Ordering::SeqCst) {
                held.fetch_add(1, Ordering::SeqCst);
                let how = *released.wait_for(|r| *r != Release::Not).await.unwrap();
                if how == Release::Refuse {
                    return Ok(tonic::Status::unavailable("refused by the test").into_http());
                }
            }
            reflection.call(req).await
        })
    }
}

/// A config file for the reflection backend: the schema from its reflection, and a REST rule
/// whose path names `version` (in force when `/admin/schema` lists it).
fn reflected_config(backend: &ReflectionBackend, version: usize) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nupstream = \"http://{}\"\nschema_source = \"reflection\"\nschema_refresh = \"1h\"\n\
         [[http_rules]]\nselector = \"protogate.test.reflect.Evolving.Echo\"\nget = \"/rule{version}/{{id}}\"\n",
        backend.addr
    )
}

fn has_rule(version: usize) -> impl Fn(&str) -> bool {
    move |document: &str| document.contains(&format!("\"/rule{version}/{{id}}\""))
}

/// The config file rewritten while the gateway starts — after it read the file, before it
/// listens (it waits for the upstream's reflection) — is put in force once it listens: the
/// watcher compares the files with those the running configuration was built from, not with
/// what they hold when the watch begins.
#[test]
fn a_file_written_while_the_gateway_starts_is_put_in_force() {
    let backend = ReflectionBackend::start(true);
    let scratch = Scratch::new("written-at-start");
    let config = scratch.file("gw.toml", &reflected_config(&backend, 1));
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    backend.wait_held(0, &gw);
    replace(&config, &reflected_config(&backend, 2));
    backend.release(Release::Answer);
    gw.addr();
    wait_for_schema(&gw, "the file written at start", has_rule(2));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// A gateway serving the first config from reflection, a SIGHUP reload of it held at the
/// reflection (it has read the file), and the file rewritten to the second config meanwhile:
/// the caller releases the reload.
fn rewritten_during_a_held_reload(name: &str) -> (ReflectionBackend, Scratch, Proc) {
    let backend = ReflectionBackend::start(false);
    let scratch = Scratch::new(name);
    let config = scratch.file("gw.toml", &reflected_config(&backend, 1));
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    gw.addr();
    wait_for_schema(&gw, "the first file", has_rule(1));
    backend.hold();
    let before = backend.held();
    gw.signal("-HUP");
    backend.wait_held(before, &gw);
    replace(&config, &reflected_config(&backend, 2));
    (backend, scratch, gw)
}

/// The config file rewritten while a reload (SIGHUP) builds its snapshot from the file's
/// previous text — read, waiting for the reflection — is reloaded after it: the reload notes
/// as loaded the text it built from, not what the file holds when it is done.
#[test]
fn a_file_written_while_a_reload_builds_is_reloaded_after_it() {
    let (backend, _scratch, mut gw) = rewritten_during_a_held_reload("written-in-reload");
    backend.release(Release::Answer);
    nth_line(&gw, &[RELOADED, "SIGHUP"], 1);
    wait_for_schema(&gw, "the file written during the reload", has_rule(2));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// The same when that reload fails (the reflection refused): the file written meanwhile is
/// reloaded after the failure, which notes the text it failed on, not the new one.
#[test]
fn a_file_written_while_a_reload_fails_is_reloaded_after_it() {
    let (backend, _scratch, mut gw) = rewritten_during_a_held_reload("written-in-failed-reload");
    backend.release(Release::Refuse);
    let failed = eventually("the reload to fail", || {
        lines(&gw, &["reload failed", "SIGHUP"]).into_iter().next()
    });
    assert!(failed.is_some(), "{}", gw.log().join("\n"));
    let in_force = eventually("the file written during the failed reload", || {
        has_rule(2)(&schema_document(gw_addr(&gw))).then_some(())
    });
    assert!(
        in_force.is_some(),
        "the file written during the failed reload never in force; log:\n{}",
        gw.log().join("\n")
    );
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

// === [auth] jwks_file ===

/// A P-256 key: its signing key and its JWK under `kid`.
fn ec_key(kid: &str) -> (jsonwebtoken::EncodingKey, String) {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = key.public_key_raw();
    let jwk = format!(
        r#"{{"kty":"EC","kid":"{kid}","crv":"P-256","x":"{}","y":"{}"}}"#,
        b64(&point[1..33]),
        b64(&point[33..])
    );
    (
        jsonwebtoken::EncodingKey::from_ec_der(&key.serialize_der()),
        jwk,
    )
}

/// GetOrder with a token signed by `key` under `kid`: the answer's status.
fn get_order_as(addr: SocketAddr, key: &jsonwebtoken::EncodingKey, kid: &str) -> u16 {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let claims = serde_json::json!({"sub": "reloaded", "exp": exp});
    let token = jsonwebtoken::encode(&header, &claims, key).unwrap();
    let (status, _, _) = support::exchange(
        addr,
        "POST",
        "/demo.shop.v1.Shop/GetOrder",
        &[
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {token}")),
        ],
        br#"{"id":"1"}"#,
    );
    status
}

#[test]
fn a_rewritten_jwks_file_is_put_in_force() {
    let scratch = Scratch::new("jwks-file");
    let shop = support::shop();
    let (k1, jwk1) = ec_key("k1");
    let (k2, jwk2) = ec_key("k2");
    let jwks = scratch.file("jwks.json", &format!(r#"{{"keys":[{jwk1}]}}"#));
    let config = scratch.file(
        "gw.toml",
        &shop_config(
            &format!("http://{}", shop.addr),
            "[auth]\njwks_file = \"jwks.json\"\nrequired = true\n",
        ),
    );
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    assert_eq!(get_order_as(addr, &k1, "k1"), 200);
    assert_eq!(get_order_as(addr, &k2, "k2"), 401, "k2 is in no set yet");
    // The file rewritten (its directory is watched): k2 in, k1 out — its token, verified and
    // cached a moment ago, too.
    replace(&jwks, &format!(r#"{{"keys":[{jwk2}]}}"#));
    eventually("k2's tokens accepted", || {
        (get_order_as(addr, &k2, "k2") == 200).then_some(())
    })
    .unwrap_or_else(|| panic!("k2 never accepted; log:\n{}", gw.log().join("\n")));
    assert_eq!(get_order_as(addr, &k1, "k1"), 401);
    // A key set that does not parse is a failed reload: the keys in force stay.
    replace(&jwks, "{not json");
    nth_line_failed(&gw);
    assert_eq!(get_order_as(addr, &k2, "k2"), 200);
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// Waits for a failed reload's line.
fn nth_line_failed(gw: &Proc) {
    eventually("a failed reload", || {
        gw.log()
            .iter()
            .any(|l| l.contains("reload failed"))
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no failed reload; log:\n{}", gw.log().join("\n")));
}

//! TLS as the binary is configured with it: `--tls-cert`/`--tls-key` and `[tls]`;
//! a rotated certificate file is served to new connections while an open one goes on, and a
//! broken one is logged and not taken; every bad TLS setting exits 64 before a port opens,
//! naming the file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use support::{DEADLINE, Proc, Scratch, eventually, replace, run, stderr};

struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        Ca(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    /// A certificate for 127.0.0.1 and its key, PEM.
    fn server(&self) -> (String, String) {
        self.server_until(2040)
    }

    /// A certificate for 127.0.0.1 valid until the start of `year`, and its key, PEM.
    fn server_until(&self, year: i32) -> (String, String) {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn client(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.0.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// An HTTP/1.1 keep-alive connection over TLS.
struct Conn {
    tls: StreamOwned<ClientConnection, TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<Conn> {
        let tcp = TcpStream::connect_timeout(&addr, DEADLINE)?;
        tcp.set_read_timeout(Some(DEADLINE))?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let client = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut tls = StreamOwned::new(client, tcp);
        // The handshake, done now so the certificate can be looked at.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Conn { tls })
    }

    fn certificate(&self) -> CertificateDer<'static> {
        self.tls.conn.peer_certificates().unwrap()[0].clone()
    }

    /// GET /healthz on this connection: the status line.
    fn healthz(&mut self) -> String {
        let text = self.get("/healthz");
        text.lines().next().unwrap_or_default().to_owned()
    }

    /// GET `path` on this connection: the whole answer.
    fn get(&mut self, path: &str) -> String {
        self.tls
            .write_all(format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").as_bytes())
            .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        // /healthz answers a short body with a content-length: read until it is all here.
        while !support::complete(&answer) {
            let n = self.tls.read(&mut buf).unwrap();
            assert!(n > 0, "the connection closed: {answer:?}");
            answer.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&answer).into_owned()
    }
}

#[test]
fn a_rotated_certificate_is_served_to_new_connections_and_a_broken_one_is_refused() {
    let scratch = Scratch::new("tls-rotation");
    let ca = Ca::new();
    let (cert, key) = ca.server_until(2031);
    let cert_path = scratch.file("server.pem", &cert);
    let key_path = scratch.file("server.key", &key);
    let config = scratch.file(
        "gateway.toml",
        "upstream = \"http://127.0.0.1:1\"\n[tls]\ncert = \"server.pem\"\nkey = \"server.key\"\n",
    );
    let proto = format!("{}/demo/v1/shop.proto", support::PROTO_DIR);
    let mut gw = Proc::spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        &config,
        "--proto",
        &proto,
    ]);
    let line = gw.wait_for_line("listening on");
    assert!(line.contains("https://"), "{line}");
    let addr = gw.addr();
    let mut open = Conn::open(addr, ca.client()).unwrap();
    let first = open.certificate();
    assert!(open.healthz().contains("200"));
    // The certificate's notAfter (2031-01-01T00:00:00Z) for the expiry alert.
    let expiry = |conn: &mut Conn| {
        let text = conn.get("/metrics");
        text.lines()
            .find_map(|l| {
                l.strip_prefix(
                    r#"protogate_tls_certificate_expiration_timestamp_seconds{name="server"} "#,
                )
            })
            .map(str::to_owned)
    };
    assert_eq!(expiry(&mut open).as_deref(), Some("1924992000"));

    // cert-manager renews: both files replaced. The gateway may look between the two and
    // find the new key with the old certificate (a "do not work" line): the waits below
    // count only lines logged after the step they wait for.
    let (cert2, key2) = ca.server_until(2032);
    let before_renewal = gw.log().len();
    replace(&key_path, &key2);
    replace(&cert_path, &cert2);
    let second = eventually("a new connection to get the new certificate", || {
        let c = Conn::open(addr, ca.client()).ok()?.certificate();
        (c != first).then_some(c)
    })
    .unwrap_or_else(|| {
        panic!(
            "the certificate was not reloaded; log:\n{}",
            gw.log().join("\n")
        )
    });
    assert_eq!(
        second,
        CertificateDer::from_pem_slice(cert2.as_bytes()).unwrap(),
        "not the renewed certificate"
    );
    line_after(&gw, before_renewal, "TLS certificate reloaded");
    // The connection opened before is still served, and the gauge follows the renewal.
    assert!(open.healthz().contains("200"));
    assert_eq!(expiry(&mut open).as_deref(), Some("1956528000"));

    // A key that does not go with the certificate: logged, the working pair kept.
    let (_, other_key) = ca.server();
    let before_break = gw.log().len();
    replace(&key_path, &other_key);
    let warning = line_after(&gw, before_break, "do not work");
    assert!(warning.contains("server.key"), "{warning}");
    let mut conn = Conn::open(addr, ca.client()).unwrap();
    assert_eq!(conn.certificate(), second);
    assert!(conn.healthz().contains("200"));
}

/// The first of the gateway's stderr lines after its first `from` to contain `needle`, waited
/// for under the deadline: a line logged before `from` (an earlier step's) does not count.
fn line_after(gw: &Proc, from: usize, needle: &str) -> String {
    eventually(&format!("a log line with {needle:?}"), || {
        gw.log().into_iter().skip(from).find(|l| l.contains(needle))
    })
    .unwrap_or_else(|| {
        panic!(
            "no {needle:?} after line {from}; log:\n{}",
            gw.log().join("\n")
        )
    })
}

#[test]
fn bad_tls_settings_exit_64_naming_the_file() {
    let scratch = Scratch::new("tls-config");
    let ca = Ca::new();
    let (cert, key) = ca.server();
    let (_, other_key) = ca.server();
    let cert = scratch.file("server.pem", &cert);
    let key = scratch.file("server.key", &key);
    let other_key = scratch.file("other.key", &other_key);
    let garbage = scratch.file("garbage.pem", "not PEM at all\n");
    let missing = scratch.0.join("missing.pem").display().to_string();
    let proto = format!("{}/demo/v1/shop.proto", support::PROTO_DIR);
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--proto", &proto];
        args.extend_from_slice(extra);
        run(&args, b"")
    };
    let plain = ["--upstream", "http://127.0.0.1:1"];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--tls-cert", &missing, "--tls-key", &key],
            vec![&missing],
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &missing],
            vec![&missing],
        ),
        (
            vec!["--tls-cert", &garbage, "--tls-key", &key],
            vec![&garbage, "no PEM certificate"],
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &garbage],
            vec![&garbage, "private key"],
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other_key],
            vec![&other_key, &cert, "does not go with"],
        ),
        (vec!["--tls-cert", &cert], vec!["--tls-key"]),
    ];
    for (flags, named) in cases {
        let mut args = plain.to_vec();
        args.extend(flags.iter());
        let out = serve(&args);
        assert_eq!(out.status.code(), Some(64), "{flags:?}: {}", stderr(&out));
        for name in named {
            assert!(stderr(&out).contains(name), "{flags:?}: {}", stderr(&out));
        }
        assert!(!stderr(&out).contains("listening"), "{}", stderr(&out));
    }

    // Files named in the config file: an https upstream's CA that cannot be read, a client
    // certificate without its key, client_auth without client_ca, TLS settings for an http
    // upstream.
    let toml_cases = [
        (
            "upstream = \"https://127.0.0.1:1\"\nca = \"missing.pem\"\n",
            "missing.pem",
        ),
        (
            "upstream = \"https://127.0.0.1:1\"\nca = \"garbage.pem\"\n",
            "garbage.pem",
        ),
        (
            "upstream = \"https://127.0.0.1:1\"\nca = \"server.pem\"\nclient_cert = \"server.pem\"\n",
            "client_cert is set without client_key",
        ),
        (
            "upstream = \"http://127.0.0.1:1\"\n[tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_auth = \"optional\"\n",
            "tls.client_auth needs tls.client_ca",
        ),
        (
            "upstream = \"http://127.0.0.1:1\"\n[services.\"demo.shop.v1.Shop\"]\nupstream = \"http://127.0.0.1:2\"\nca = \"server.pem\"\n",
            "services.\"demo.shop.v1.Shop\"",
        ),
    ];
    for (text, named) in toml_cases {
        let config = scratch.file("gateway.toml", text);
        let out = serve(&["--config", &config]);
        assert_eq!(out.status.code(), Some(64), "{text}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{text}: {}", stderr(&out));
        assert!(!stderr(&out).contains("listening"), "{}", stderr(&out));
    }
}

//! TLS on the listener: the handshake, under the header timeout like a plain
//! connection's first bytes, with the certificate in force when the connection came; the
//! verified client certificate's identity. The binary reads the files and replaces the
//! certificate when they change ([`ListenerTls::replace`]); connections already open keep the
//! one they were made with.
//!
//! rustls (through tokio-rustls) does the TLS; ALPN offers `h2` and `http/1.1`, and what the
//! client then sends decides the protocol, as on a plain port (`first_bytes`).

use std::io;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsStream};

use crate::transport::Transport;

/// The listener's TLS settings, shared with the binary, which replaces them when the
/// certificate files change.
#[derive(Clone)]
pub struct ListenerTls {
    config: Arc<ArcSwap<ServerConfig>>,
    /// The certificate in force's notAfter, in Unix seconds (`i64::MIN`: not known), for
    /// `protogate_tls_certificate_expiration_timestamp_seconds`.
    not_after: Arc<std::sync::atomic::AtomicI64>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls").finish_non_exhaustive()
    }
}

impl ListenerTls {
    /// TLS with `config`, whose certificate chain starts with `leaf`; its ALPN protocols
    /// are set here to `h2` and `http/1.1`.
    pub fn new(config: ServerConfig, leaf: &CertificateDer<'_>) -> ListenerTls {
        ListenerTls {
            config: Arc::new(ArcSwap::from_pointee(with_alpn(config))),
            not_after: Arc::new(std::sync::atomic::AtomicI64::new(
                not_after(leaf).unwrap_or(i64::MIN),
            )),
        }
    }

    /// Connections accepted from now on use `config` (whose chain starts with `leaf`); open
    /// ones keep theirs.
    pub fn replace(&self, config: ServerConfig, leaf: &CertificateDer<'_>) {
        self.config.store(Arc::new(with_alpn(config)));
        self.not_after.store(
            not_after(leaf).unwrap_or(i64::MIN),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// When the certificate in force expires, in Unix seconds.
    pub fn not_after(&self) -> Option<i64> {
        Some(self.not_after.load(std::sync::atomic::Ordering::Relaxed)).filter(|&t| t != i64::MIN)
    }

    /// The settings new connections get.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }
}

fn with_alpn(mut config: ServerConfig) -> ServerConfig {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// The verified identity of a client that presented a certificate, in each request's
/// extensions: it names the client before any credential or header does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIdentity(pub Arc<str>);

/// The handshake with `tls` on `stream` (nothing when there is no TLS), and the client
/// certificate's identity if it sent one.
pub(super) async fn accept(
    stream: TcpStream,
    tls: Option<&ListenerTls>,
) -> io::Result<(Transport, Option<PeerIdentity>)> {
    let Some(tls) = tls else {
        return Ok((Transport::Plain(stream), None));
    };
    let stream = TlsAcceptor::from(tls.current()).accept(stream).await?;
    let identity = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(<[CertificateDer]>::first)
        .and_then(|cert| identity(cert))
        .map(|id| PeerIdentity(id.into()));
    Ok((
        Transport::Tls(Box::new(TlsStream::Server(stream))),
        identity,
    ))
}

/// A certificate's notAfter, in Unix seconds (`None` when it does not parse).
fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// A certificate's identity: its first URI name (a SPIFFE id in a mesh), else its first DNS
/// name, else its first e-mail name, else its subject's common name, else its whole subject.
/// None when the certificate cannot be read (rustls verified it, so this does not happen) or
/// names nothing.
pub fn identity(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        let names = &san.value.general_names;
        let first = |pick: fn(&GeneralName<'_>) -> Option<String>| names.iter().find_map(pick);
        let found = first(|n| match n {
            GeneralName::URI(uri) => Some((*uri).to_owned()),
            _ => None,
        })
        .or_else(|| {
            first(|n| match n {
                GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
        })
        .or_else(|| {
            first(|n| match n {
                GeneralName::RFC822Name(mail) => Some((*mail).to_owned()),
                _ => None,
            })
        });
        if found.is_some() {
            return found;
        }
    }
    let subject = cert.subject();
    if let Some(cn) = subject.iter_common_name().find_map(|cn| cn.as_str().ok()) {
        return Some(cn.to_owned());
    }
    let whole = subject.to_string();
    (!whole.is_empty()).then_some(whole)
}

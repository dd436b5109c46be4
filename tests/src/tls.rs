//! TLS for the tests: a CA made in the test (rcgen) and the certificates it signs, rustls
//! settings for servers and clients, an HTTP client over TLS (ALPN picks HTTP/1.1 or HTTP/2),
//! and the v2 backend behind TLS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::{Answer, Running, TempDir, within};

/// A certificate and its key, as PEM text (what files hold).
#[derive(Clone, Debug)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

impl Pem {
    /// Writes the certificate to `NAME.pem` and the key to `NAME.key` in `dir` (for a
    /// configuration file's `cert` and `key`, say).
    pub fn write(&self, dir: &TempDir, name: &str) {
        dir.write(&format!("{name}.pem"), &self.cert);
        dir.write(&format!("{name}.key"), &self.key);
    }
}

/// A certificate authority made for one test.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for 127.0.0.1 and localhost, with `common_name` as its subject.
    pub fn server(&self, common_name: &str) -> Pem {
        self.issue(
            common_name,
            vec![
                SanType::IpAddress("127.0.0.1".parse().expect("ip")),
                SanType::DnsName("localhost".try_into().expect("dns")),
            ],
        )
    }

    /// A client certificate whose URI name is `uri` (a SPIFFE id, say); none when empty.
    pub fn client(&self, common_name: &str, uri: &str) -> Pem {
        let sans = if uri.is_empty() {
            Vec::new()
        } else {
            vec![SanType::URI(uri.try_into().expect("uri"))]
        };
        self.issue(common_name, sans)
    }

    fn issue(&self, common_name: &str, sans: Vec<SanType>) -> Pem {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = sans;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes the CA's certificate to `NAME.pem` in `dir` (for a configuration file's
    /// `client_ca` or `ca`).
    pub fn write(&self, dir: &TempDir, name: &str) {
        dir.write(&format!("{name}.pem"), self.pem());
    }

    /// Roots holding this CA alone.
    pub fn roots(&self) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).expect("root");
        Arc::new(roots)
    }
}

fn chain(pem: &Pem) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let certs = CertificateDer::pem_slice_iter(pem.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).expect("key");
    (certs, key)
}

/// A server's settings (the TLS backend's): `pem` as its certificate; client certificates
/// from `clients` required. The gateway's listener gets its settings from `[tls]` through the
/// binary's loader instead (`crate::start_gateway_toml_in`, [`Pem::write`]).
pub fn server_config(pem: &Pem, clients: Option<&Ca>) -> ServerConfig {
    let (certs, key) = chain(pem);
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match clients {
        Some(ca) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(ca.roots(), provider())
                .build()
                .expect("verifier"),
        ),
        None => builder.with_no_client_auth(),
    };
    builder.with_single_cert(certs, key).expect("server config")
}

/// A client's settings: servers checked against `ca`, `identity` presented when given,
/// `alpn` offered.
pub fn client_config(ca: &Ca, identity: Option<&Pem>, alpn: &[&[u8]]) -> ClientConfig {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(ca.roots());
    let mut config = match identity {
        Some(pem) => {
            let (certs, key) = chain(pem);
            builder
                .with_client_auth_cert(certs, key)
                .expect("client cert")
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A TLS connection to `addr` as 127.0.0.1 (the handshake's error when it fails).
pub async fn connect(
    addr: SocketAddr,
    config: ClientConfig,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1").expect("name");
    within(
        "the TLS handshake",
        Duration::from_secs(30),
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp),
    )
    .await
}

/// One HTTP connection over TLS: HTTP/2 when ALPN chose it, else HTTP/1.1.
pub struct TlsHttp {
    send: Sender,
    /// The protocol ALPN chose.
    pub alpn: Option<Vec<u8>>,
    /// The subject of the certificate the server presented.
    pub server_cert: CertificateDer<'static>,
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl TlsHttp {
    /// Connects to `addr` with `config` and shakes hands at the HTTP level.
    pub async fn open(addr: SocketAddr, config: ClientConfig) -> std::io::Result<TlsHttp> {
        let tls = connect(addr, config).await?;
        let (_, state) = tls.get_ref();
        let alpn = state.alpn_protocol().map(<[u8]>::to_vec);
        let server_cert = state
            .peer_certificates()
            .and_then(<[CertificateDer]>::first)
            .expect("a server certificate")
            .clone()
            .into_owned();
        let io = TokioIo::new(tls);
        let send = if alpn.as_deref() == Some(b"h2") {
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(std::io::Error::other)?;
            tokio::spawn(conn);
            Sender::H2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(std::io::Error::other)?;
            tokio::spawn(conn);
            Sender::H1(send)
        };
        Ok(TlsHttp {
            send,
            alpn,
            server_cert,
        })
    }

    /// Sends `req` on this connection and reads the whole answer.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Answer, hyper::Error> {
        let response: Response<hyper::body::Incoming> = match &mut self.send {
            Sender::H1(send) => {
                within("h1 ready", Duration::from_secs(30), send.ready()).await?;
                within(
                    "the answer",
                    Duration::from_secs(30),
                    send.send_request(req),
                )
                .await?
            }
            Sender::H2(send) => {
                within("h2 ready", Duration::from_secs(30), send.ready()).await?;
                within(
                    "the answer",
                    Duration::from_secs(30),
                    send.send_request(req),
                )
                .await?
            }
        };
        let (parts, body) = response.into_parts();
        let body = within("the body", Duration::from_secs(60), body.collect()).await?;
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            trailers: body.trailers().cloned(),
            body: body.to_bytes(),
        })
    }

    /// POSTs `body` as `content_type` to `path` on this connection.
    pub async fn post(
        &mut self,
        path: &str,
        content_type: &str,
        body: impl Into<Bytes>,
    ) -> Result<Answer, hyper::Error> {
        let req = Request::post(format!("https://127.0.0.1{path}"))
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::HOST, "127.0.0.1")
            .body(Full::new(body.into()))
            .expect("request");
        self.send(req).await
    }
}

/// Starts the v2 backend behind TLS with `config` (ALPN h2) on 127.0.0.1:0.
pub async fn start_tls_backend(mut config: ServerConfig) -> Running {
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    // Handshakes that fail (a client refusing the certificate) end that connection only.
    let incoming = accepted(listener, acceptor);
    let dispatch = crate::dispatch();
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(dispatch, incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    Running::new(addr, stop, task)
}

/// The accepted connections, each once its handshake is done.
fn accepted(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
) -> impl futures_core::Stream<Item = std::io::Result<Accepted>> {
    let (found, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, found) = (acceptor.clone(), found.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = found.send(Ok(Accepted(tls))).await;
                }
            });
        }
    });
    tokio_stream_from(rx)
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_core::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A TLS connection the backend serves (tonic wants to know its peer).
pub struct Accepted(tokio_rustls::server::TlsStream<TcpStream>);

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl tokio::io::AsyncRead for Accepted {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Accepted {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

//! Dialing an upstream's endpoint: TCP with `TCP_NODELAY`, then, for an `https` upstream,
//! the TLS handshake (rustls, ALPN `h2`) checking the configured server name.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::{TlsConnector, TlsStream};

use crate::transport::Transport;

/// How to speak TLS to an upstream: the client settings (roots, client certificate; the
/// binary reads them from the configured files) and the name its certificate must carry.
#[derive(Clone)]
pub struct UpstreamTls {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for UpstreamTls {
    /// The same settings object and name: services configured alike share a connection.
    fn eq(&self, other: &UpstreamTls) -> bool {
        Arc::ptr_eq(&self.config, &other.config) && self.server_name == other.server_name
    }
}

impl UpstreamTls {
    /// TLS with `config` (its ALPN protocols are set here to `h2` alone: gRPC is HTTP/2),
    /// checking the upstream's certificate against `server_name`.
    pub fn new(mut config: ClientConfig, server_name: ServerName<'static>) -> UpstreamTls {
        config.alpn_protocols = vec![b"h2".to_vec()];
        UpstreamTls {
            config: Arc::new(config),
            server_name,
        }
    }

    /// The same settings with another server name (the default settings reused for an
    /// upstream of another host). Shares the settings object.
    pub fn for_server(&self, server_name: ServerName<'static>) -> UpstreamTls {
        UpstreamTls {
            config: self.config.clone(),
            server_name,
        }
    }
}

/// Why a dial failed: words for a 503's message, which names the upstream before them.
#[derive(Debug)]
pub(crate) enum DialError {
    Connect(std::io::Error),
    Tls(std::io::Error),
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DialError::Connect(e) => write!(f, "not reachable: {e}"),
            DialError::Tls(e) => write!(f, "failed the TLS handshake: {e}"),
        }
    }
}

impl std::error::Error for DialError {}

/// A connection to `addr`: TCP, then TLS when `tls` is given.
pub(crate) async fn dial(
    addr: SocketAddr,
    tls: Option<&UpstreamTls>,
) -> Result<Transport, DialError> {
    let tcp = TcpStream::connect(addr).await.map_err(DialError::Connect)?;
    tcp.set_nodelay(true).map_err(DialError::Connect)?;
    let Some(tls) = tls else {
        return Ok(Transport::Plain(tcp));
    };
    let stream = TlsConnector::from(tls.config.clone())
        .connect(tls.server_name.clone(), tcp)
        .await
        .map_err(DialError::Tls)?;
    Ok(Transport::Tls(Box::new(TlsStream::Client(stream))))
}

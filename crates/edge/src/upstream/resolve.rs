//! Host names to addresses. The gateway resolves through the system ([`SystemResolver`]:
//! every A and AAAA record, as `getaddrinfo` gives them); tests and embedders supply their
//! own [`Resolve`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

/// What a resolution returns: the addresses of the host, with the port given.
pub type Resolution = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Resolves an upstream's host name to every address it has. Called when the upstreams are
/// built and again every `dns_refresh`.
pub trait Resolve: Send + Sync + 'static {
    fn resolve(&self, host: &str, port: u16) -> Resolution;
}

/// The system's resolver (`getaddrinfo`, on tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> Resolution {
        let host = host.to_owned();
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
    }
}

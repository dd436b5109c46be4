//! One accepted connection, from its first bytes to its close: the TLS handshake and the
//! first bytes under the head timeout, hyper serving it, and the watch beside hyper (idle
//! and head timeouts, `max_connections` making room, the shutdown's phases). Each request
//! goes to the snapshot in force through [`service`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::{Service, service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::Instrument;

use super::connection::{Active, Conn, Expired, Registered, Tracked, Watched};
use super::{PeerIdentity, Phase, first_bytes, tls};
use crate::Live;
use crate::service::ResponseBody;

/// What a connection's task needs besides its socket.
pub(super) struct Driver {
    pub(super) peer: SocketAddr,
    pub(super) registered: Registered,
    pub(super) live: Live,
    pub(super) builder: Arc<auto::Builder<TokioExecutor>>,
    pub(super) stopped: watch::Receiver<Phase>,
    pub(super) tls: Option<tls::ListenerTls>,
    pub(super) head_timeout: Duration,
    pub(super) idle_timeout: Duration,
}

impl Driver {
    /// Serves the connection until it ends, is closed by a timeout or a shutdown, or makes
    /// room for a newer one.
    pub(super) async fn drive(self, stream: TcpStream) {
        let Driver {
            peer,
            registered,
            live,
            builder,
            mut stopped,
            tls,
            head_timeout,
            idle_timeout,
        } = self;
        let conn = &registered.conn;
        // The TLS handshake and the first bytes under the header timeout (see
        // first_bytes.rs).
        let first = async {
            let (transport, identity) = tls::accept(stream, tls.as_ref()).await?;
            Ok::<_, std::io::Error>((first_bytes::read(transport).await?, identity))
        };
        let read = tokio::select! {
            read = tokio::time::timeout(head_timeout, first) => read,
            _ = stopped.wait_for(|phase| *phase == Phase::Stopped) => return,
            () = conn.closed() => return,
        };
        let (stream, identity) = match read {
            Ok(Ok(accepted)) => accepted,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "connection ended before its first request");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "connection closed: no request head within the header read timeout");
                return;
            }
        };
        let request_span = tracing::Span::current();
        if let Some(PeerIdentity(id)) = &identity {
            request_span.record("tls_client", &**id);
        }
        let h1 = !stream.is_h2();
        conn.head_began();
        let served = builder.serve_connection(
            TokioIo::new(Watched::new(stream, Arc::clone(conn), h1)),
            service(Arc::clone(conn), live, identity, peer, request_span),
        );
        tokio::pin!(served);
        let mut closing = false;
        loop {
            let next = match conn.check(idle_timeout, head_timeout, h1) {
                Ok(next) => next,
                Err(Expired::Head) => {
                    tracing::debug!(%peer, "connection closed: request head not complete within the header read timeout");
                    return;
                }
                Err(Expired::Idle) => {
                    if !closing {
                        tracing::debug!(%peer, "closing a connection idle for the idle timeout");
                        served.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    // Looked at again only for a head (HTTP/1.1 closes at once).
                    tokio::time::Instant::now() + head_timeout
                }
            };
            tokio::select! {
                ended = served.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = tokio::time::sleep_until(next) => {}
                () = conn.closed(), if !closing => {
                    tracing::debug!(%peer, "closing the longest-idle connection: max_connections reached");
                    served.as_mut().graceful_shutdown();
                    closing = true;
                }
                // HTTP/1.1 is not shut while draining: a new connection has not sent its
                // request yet, and a busy one is closed by its answer's Connection: close.
                _ = stopped.wait_for(|phase| *phase == Phase::Stopped || (*phase == Phase::Draining && !h1)), if !closing => {
                    served.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// The hyper service of one connection: each request counted on the connection while it is
/// served, handed the client certificate's identity, and served by the snapshot in force
/// ([`crate::Edge::handle`]).
fn service(
    conn: Arc<Conn>,
    live: Live,
    identity: Option<PeerIdentity>,
    peer: SocketAddr,
    request_span: tracing::Span,
) -> impl Service<
    http::Request<Incoming>,
    Response = http::Response<Tracked<ResponseBody>>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ 'static {
    service_fn(move |mut req: http::Request<Incoming>| {
        let active: Active = conn.begin();
        let edge = live.load();
        if let Some(identity) = &identity {
            req.extensions_mut().insert(identity.clone());
        }
        // Draining: the client is told to take its next request elsewhere (a drain that
        // begins while a request is served closes its connection when the listeners do).
        let close = req.version() < http::Version::HTTP_2 && edge.is_draining();
        let serve = async move {
            // Boxed: the request's future is large (every step's state), and hyper moves the
            // future it is given (into a task of its own for each HTTP/2 stream): a pointer
            // moves instead (BENCHMARKS.md).
            let mut response = Box::pin(edge.handle_from(req, Some(peer.ip()))).await;
            if close {
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(response.map(|b| Tracked::new(b, active)))
        };
        // Only an enabled span is entered on every poll (each enter and exit costs).
        if request_span.is_disabled() {
            futures_util::future::Either::Left(serve)
        } else {
            futures_util::future::Either::Right(serve.instrument(request_span.clone()))
        }
    })
}

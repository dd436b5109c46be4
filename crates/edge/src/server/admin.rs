//! The admin listener: `/healthz`, `/readyz`, `/metrics` for probes and scrapers, on an
//! address of their own (`--admin-listen`), HTTP/1.1 and h2c. A plain accept loop: probes and
//! scrapers are few, so none of the main listener's limits apply beyond hyper's own.

use std::future::Future;

use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::Live;

/// Serves the admin endpoints on `listener` until `shutdown` resolves, then lets the
/// connections finish (at most a second).
pub async fn serve_admin(
    listener: TcpListener,
    live: impl Into<Live>,
    shutdown: impl Future<Output = ()>,
) {
    let live: Live = live.into();
    let header_read_timeout = live.load().config().header_read_timeout;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let live = live.clone();
        let service = service_fn(move |req| {
            let edge = live.load();
            async move { Ok::<_, std::convert::Infallible>(edge.handle_admin(req).await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "admin connection ended with an error");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(1), graceful.shutdown()).await;
}

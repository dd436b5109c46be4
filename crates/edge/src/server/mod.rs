//! The accept loop: HTTP/1.1 and HTTP/2 cleartext (prior knowledge) on one port, with
//! graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::Edge;

mod first_bytes;

/// Serves `edge` on an already-bound listener until `shutdown` resolves; then stops
/// accepting, lets in-flight requests finish within the configured grace period, and returns.
pub async fn serve(listener: TcpListener, edge: Arc<Edge>, shutdown: impl Future<Output = ()>) {
    serve_all(vec![listener], edge, shutdown).await
}

/// [`serve`] on several listeners at once (one name resolving to several addresses).
pub async fn serve_all(
    owned: Vec<TcpListener>,
    edge: Arc<Edge>,
    shutdown: impl Future<Output = ()>,
) {
    let config = edge.config().clone();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.max_header_bytes.max(8192))
        // No pipeline_flush: with it hyper's writer reports room to buffer whatever is queued,
        // so a streamed answer is pulled from the upstream as fast as it comes for a client
        // that stopped reading (no back-pressure over HTTP/1.1), and an error answered while
        // request bytes sit unread (431) is never flushed.
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(config.max_header_bytes as u32)
        .max_concurrent_streams(config.max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    // Tells connections still waiting for their first bytes that the server stops: they close
    // at once (as hyper-util closes a connection it has not read a version from) instead of
    // holding the shutdown up until their header read timeout.
    let (stopping, stopped) = tokio::sync::watch::channel(false);

    // The downgrade log's pending counts are reported even when traffic stops.
    let flusher = {
        let edge = edge.clone();
        let every = (config.downgrade_log_interval / 2).max(Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                edge.downgrade_log().flush();
            }
        })
    };

    tokio::pin!(shutdown);
    // The listener asked first turns with each connection, so none waits behind another.
    let mut first: usize = 0;
    let listeners = &owned;
    let accept = |first: usize| {
        std::future::poll_fn(move |cx| {
            for i in 0..listeners.len() {
                let listener = &listeners[(first + i) % listeners.len()];
                if let std::task::Poll::Ready(accepted) = listener.poll_accept(cx) {
                    return std::task::Poll::Ready(accepted);
                }
            }
            std::task::Poll::Pending
        })
    };
    loop {
        first = first.wrapping_add(1);
        let accepted = tokio::select! {
            accepted = accept(first) => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let head_timeout = config.header_read_timeout;
        let edge = edge.clone();
        let service = service_fn(move |req| {
            let edge = edge.clone();
            async move { Ok::<_, std::convert::Infallible>(edge.handle(req).await) }
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            // The first bytes under the header timeout (see first_bytes.rs).
            let read = tokio::select! {
                read = tokio::time::timeout(head_timeout, first_bytes::read(stream)) => read,
                _ = stopped.wait_for(|stopped| *stopped) => return,
            };
            let stream = match read {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "connection ended before its first request");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "connection closed: no request head within the header read timeout");
                    return;
                }
            };
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(owned);
    stopping.send_replace(true);
    tracing::info!(
        in_flight = graceful.count(),
        "shutting down: no longer accepting connections"
    );
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(config.shutdown_grace) => {
            tracing::warn!(grace = ?config.shutdown_grace, "grace period over with requests still in flight; closing them");
        }
    }
    flusher.abort();
    edge.downgrade_log().flush();
}

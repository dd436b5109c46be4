//! The accept loop: HTTP/1.1 and HTTP/2 on one port, in clear text (HTTP/2 by prior
//! knowledge) or over TLS (ALPN), with graceful shutdown. Each accepted connection is driven
//! by its own task (`drive.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::Live;

mod admin;
mod connection;
mod drive;
mod first_bytes;
mod tls;

pub use admin::serve_admin;
pub use tls::{ListenerTls, PeerIdentity, identity};

use connection::Registry;
use drive::Driver;

/// Serves `edge` on an already-bound listener until `shutdown` resolves; then drains (for
/// `drain_delay`: `/readyz` answers 503, HTTP/1.1 answers close their connection, HTTP/2
/// connections get a GOAWAY, new connections are still served), stops accepting, lets
/// in-flight requests finish within the grace period, and returns.
pub async fn serve(
    listener: TcpListener,
    edge: impl Into<Live>,
    shutdown: impl Future<Output = ()>,
) {
    serve_all(vec![listener], edge, shutdown).await
}

/// [`serve`] on several listeners at once (one name resolving to several addresses). Each
/// request is served by the snapshot [`Live`] holds when it arrives; the listener's own
/// settings (timeouts, limits, TLS) are the first snapshot's.
pub async fn serve_all(
    owned: Vec<TcpListener>,
    live: impl Into<Live>,
    shutdown: impl Future<Output = ()>,
) {
    let live: Live = live.into();
    // The metrics, the downgrade log and the drain are shared by every snapshot; nothing here
    // holds the first snapshot itself, so a reload's old upstreams go when their requests do.
    let (config, metrics, downgrades) = {
        let edge = live.load();
        (
            edge.config().clone(),
            edge.metrics_shared(),
            edge.downgrades_shared(),
        )
    };
    let builder = Arc::new(http_builder(&config));
    let registry = Arc::new(Registry::new(
        config.max_connections,
        metrics.connections.clone(),
    ));
    // Tells every connection the shutdown's phase: draining, HTTP/2 connections get a GOAWAY
    // (HTTP/1.1 ones are closed by their next answer); stopped, one still waiting for its first
    // bytes closes at once and the others finish what they serve. Each holds a receiver; the
    // shutdown waits until all are dropped.
    let (stopping, stopped) = tokio::sync::watch::channel(Phase::Serving);
    let mut accept_errors = AcceptErrors::default();

    // The downgrade log's pending counts are reported even when traffic stops.
    let flusher = {
        let downgrades = downgrades.clone();
        let every = (config.downgrade_log_interval / 2).max(Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                downgrades.flush();
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
    let drained = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(drained);
    let mut draining = false;
    loop {
        first = first.wrapping_add(1);
        let accepted = tokio::select! {
            accepted = accept(first) => accepted,
            () = &mut shutdown, if !draining => {
                draining = true;
                live.load().drain();
                stopping.send_replace(Phase::Draining);
                drained.as_mut().reset(tokio::time::Instant::now() + config.drain_delay);
                tracing::info!(drain_delay = ?config.drain_delay, "draining: /readyz answers 503, connections are told to close; still serving");
                continue;
            }
            () = &mut drained, if draining => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning, and say
                // so once a second at most.
                accept_errors.note(&e);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(registered) = registry.open() else {
            // max_connections open and none idle: refused, closed at once.
            metrics
                .shed
                .get_or_create(&crate::metrics::ShedLabels {
                    reason: crate::ShedReason::Connections.as_str(),
                })
                .inc();
            tracing::debug!(%peer, "connection refused: max_connections open and none idle");
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Every line a request logs names its peer (and the identity of its client
        // certificate): at INFO when the access log is on (its lines need it), else at DEBUG
        // (a disabled span costs a level check).
        let span = if config.access_log {
            tracing::info_span!("connection", %peer, tls_client = tracing::field::Empty)
        } else {
            tracing::debug_span!("connection", %peer, tls_client = tracing::field::Empty)
        };
        let driver = Driver {
            peer,
            registered,
            live: live.clone(),
            builder: builder.clone(),
            stopped: stopped.clone(),
            tls: config.tls.clone(),
            head_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
        };
        tokio::spawn(driver.drive(stream).instrument(span));
    }
    drop(owned);
    drop(stopped);
    stop(stopping, config.shutdown_grace).await;
    flusher.abort();
    downgrades.flush();
}

/// hyper's HTTP/1.1 and HTTP/2 settings for the listener's connections.
fn http_builder(config: &crate::EdgeConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // The head timeout runs from a head's first byte (connection.rs), not hyper's, which
        // runs whenever hyper waits for a head and so closed idle keep-alive connections.
        .header_read_timeout(None)
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
    builder
}

/// The listeners are closed: every connection is told, and they get `grace` to finish what
/// they serve.
async fn stop(stopping: tokio::sync::watch::Sender<Phase>, grace: Duration) {
    stopping.send_replace(Phase::Stopped);
    tracing::info!(
        connections = stopping.receiver_count(),
        "shutting down: no longer accepting connections"
    );
    tokio::select! {
        () = stopping.closed() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => {
            tracing::warn!(grace = ?grace, "grace period over with requests still in flight; closing them");
        }
    }
}

/// Where the shutdown is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Serving,
    /// `drain_delay`: still accepting and serving; connections told to close.
    Draining,
    /// The listeners are closed.
    Stopped,
}

/// Accept failures (out of file descriptors, mostly): one warning a second at most, with the
/// count of those not logged since.
#[derive(Default)]
struct AcceptErrors {
    last_logged: Option<tokio::time::Instant>,
    unlogged: u64,
}

impl AcceptErrors {
    fn note(&mut self, e: &std::io::Error) {
        let now = tokio::time::Instant::now();
        if self
            .last_logged
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            self.unlogged += 1;
            return;
        }
        tracing::warn!(error = %e, more_since_last = self.unlogged, "accept failed");
        self.last_logged = Some(now);
        self.unlogged = 0;
    }
}

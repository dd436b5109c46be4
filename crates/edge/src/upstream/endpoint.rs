//! One address of an upstream and its HTTP/2 connections, driven straight on the `h2` crate.
//! Unary calls and streams share them: a call is one stream, polled by the request's own task
//! (unary) or by its answer's body (streams); no task or channel per unary call (tonic's
//! channel goes through a buffer task and hyper's dispatch task, and hyper spawns one more
//! task per call).
//!
//! What tonic's channel gave and this keeps: a lazily dialed connection with a connect
//! timeout, `TCP_NODELAY`, redialing after the connection is lost, HTTP/2 keep-alive pings
//! while calls are in flight (a dead peer is noticed). Added: a second connection (up to
//! [`MAX_CONNECTIONS`]) when the first one's stream limit is reached, a connection replaced
//! before its stream ids run out, and the endpoint's health: ejected when a dial fails or its
//! connection is lost, probed back with exponential backoff (see [`Endpoint::eject`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use bytes::buf::Chain;
use futures_util::future::BoxFuture;
use h2::Ping;
use h2::client::{Connection, SendRequest};
use http::uri::{Authority, Scheme};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tonic::Status;

use super::UpstreamOptions;
use super::connect::{self, UpstreamTls};
use crate::transport::Transport;

/// A request body frame: the gRPC message prefix and the message, sent as one DATA frame
/// without copying the message (a stream's frames, already framed, have an empty prefix).
pub(super) type Frame = Chain<std::io::Cursor<[u8; 5]>, Bytes>;

/// The question a probe asks an ejected endpoint on its new connection before restoring it:
/// the active health check (health.rs, `Check::probe`), when its services have one. The pool
/// builds it, so endpoints need not know how the check is asked.
pub(super) type ProbeCheck =
    Arc<dyn Fn(Arc<Endpoint>, Conn) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// Connections to one endpoint at most; past them, calls wait for a free stream.
pub(super) const MAX_CONNECTIONS: usize = 4;
/// The first ejection lasts this long; each failed probe doubles it, up to [`MAX_EJECTION`].
const FIRST_EJECTION: Duration = Duration::from_millis(500);
const MAX_EJECTION: Duration = Duration::from_secs(30);

/// A frame of bytes already framed as gRPC messages.
pub(super) fn raw_frame(bytes: Bytes) -> Frame {
    let mut prefix = std::io::Cursor::new([0u8; 5]);
    prefix.set_position(5);
    bytes::Buf::chain(prefix, bytes)
}

/// One resolved address of an upstream.
pub(crate) struct Endpoint {
    /// The configured URL it was resolved from (its index).
    pub(super) target: usize,
    /// Where to connect.
    pub(super) addr: SocketAddr,
    /// The configured host and port, sent as `:authority` (and named in messages).
    pub(super) authority: Authority,
    pub(super) tls: Option<UpstreamTls>,
    pub(super) options: UpstreamOptions,
    live: Mutex<Live>,
    /// Calls and streams in flight, for the balancer's choice.
    outstanding: AtomicUsize,
    /// A call was put on this endpoint since its connections last ran: its frames wait for
    /// their next write, which another call's frames may share ([`Endpoint::has_queued`]).
    queued: Arc<AtomicBool>,
    /// Out of the balancer's choice until a probe finds it working again.
    ejected: AtomicBool,
    /// The number of ejections in a row (the backoff's exponent).
    failures: AtomicU32,
    /// Calls in a row answered UNAVAILABLE or INTERNAL (outlier detection,
    /// `consecutive_failures`).
    failed_calls: AtomicU32,
    /// No longer resolved: out of the gauges, never restored.
    retired: AtomicBool,
    /// Held while the endpoint changes state (ejected, restored, retired), so the gauges move
    /// with the flags: a probe's restore and a retire at once cannot both count.
    transition: Mutex<()>,
    /// This endpoint's place in `protogate_upstream_endpoints{upstream,state}`.
    gauges: StateGauges,
    /// Answers the active health check, when the service has one (else always true).
    pub(super) checked: Option<ProbeCheck>,
}

/// Where an endpoint is: the configured URL it came from (its index, its authority and TLS
/// settings) and its address.
pub(super) struct Place {
    pub(super) target: usize,
    pub(super) addr: SocketAddr,
    pub(super) authority: Authority,
    pub(super) tls: Option<UpstreamTls>,
}

/// The `healthy` and `ejected` gauges of an upstream.
#[derive(Clone, Debug, Default)]
pub(crate) struct StateGauges {
    pub(crate) healthy: Gauge,
    pub(crate) ejected: Gauge,
}

#[derive(Default)]
struct Live {
    conns: Vec<Conn>,
    /// The dial in progress, which every caller that finds no usable connection waits for. It
    /// runs in its own task, so a caller that gives up does not abandon it for the others.
    dialing: Option<watch::Receiver<Option<Result<Conn, String>>>>,
}

/// A connection and what is known of it.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) sender: SendRequest<Frame>,
    pub(super) state: Arc<ConnState>,
}

#[derive(Default)]
pub(super) struct ConnState {
    pub(super) closed: AtomicBool,
    calls: AtomicUsize,
    streams: AtomicU32,
}

impl Conn {
    fn usable(&self) -> bool {
        !self.state.closed.load(Ordering::Relaxed)
    }

    /// Room for one more stream under the upstream's SETTINGS_MAX_CONCURRENT_STREAMS.
    fn has_room(&self) -> bool {
        self.state.calls.load(Ordering::Relaxed) < self.sender.current_max_send_streams()
    }

    /// Counts a stream opened: a connection is replaced well before its client stream ids
    /// (odd, up to 2^31) run out.
    pub(super) fn opened(&self, max_streams: u32) {
        if self.state.streams.fetch_add(1, Ordering::Relaxed) + 1 >= max_streams {
            self.state.closed.store(true, Ordering::Relaxed);
        }
    }
}

/// A call in flight on an endpoint and one of its connections: counted for the balancer and
/// for keep-alive pings (sent only while calls are in flight) until dropped.
pub(crate) struct InFlight {
    endpoint: Arc<Endpoint>,
    conn: Option<Arc<ConnState>>,
}

impl InFlight {
    pub(super) fn new(endpoint: &Arc<Endpoint>) -> InFlight {
        endpoint.outstanding.fetch_add(1, Ordering::Relaxed);
        InFlight {
            endpoint: endpoint.clone(),
            conn: None,
        }
    }

    fn on(&mut self, conn: &Conn) {
        conn.state.calls.fetch_add(1, Ordering::Relaxed);
        self.conn = Some(conn.state.clone());
    }

    pub(super) fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.endpoint.outstanding.fetch_sub(1, Ordering::Relaxed);
        if let Some(conn) = &self.conn {
            conn.calls.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn lock(live: &Mutex<Live>) -> MutexGuard<'_, Live> {
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .field("authority", &self.authority)
            .field("ejected", &self.ejected.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `addr`, healthy until shown otherwise; nothing is dialed until the first
    /// call.
    pub(super) fn new(
        Place {
            target,
            addr,
            authority,
            tls,
        }: Place,
        options: UpstreamOptions,
        gauges: StateGauges,
        checked: Option<ProbeCheck>,
    ) -> Arc<Endpoint> {
        gauges.healthy.inc();
        Arc::new(Endpoint {
            target,
            addr,
            authority,
            tls,
            options,
            live: Mutex::default(),
            outstanding: AtomicUsize::new(0),
            queued: Arc::default(),
            ejected: AtomicBool::new(false),
            failures: AtomicU32::new(0),
            failed_calls: AtomicU32::new(0),
            retired: AtomicBool::new(false),
            transition: Mutex::new(()),
            gauges,
            checked,
        })
    }

    /// The scheme calls are sent with.
    pub(super) fn scheme(&self) -> Scheme {
        if self.tls.is_some() {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        }
    }

    pub(super) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// Whether a call was put on this endpoint (by [`Endpoint::queue`]) and none of its
    /// connections has run since: a call sent now joins that call's frames in one write.
    pub(super) fn has_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
    }

    /// A call is being put on this endpoint (see [`Endpoint::has_queued`]).
    pub(super) fn queue(&self) {
        if !self.has_queued() {
            self.queued.store(true, Ordering::Relaxed);
        }
    }

    /// What a run of a connection's task does to [`Endpoint::has_queued`] (for tests).
    #[cfg(test)]
    pub(super) fn written(&self) {
        self.queued.store(false, Ordering::Relaxed);
    }

    pub(super) fn is_ejected(&self) -> bool {
        self.ejected.load(Ordering::Relaxed)
    }

    /// Whether a connection is up (no dial needed for the next call).
    pub(super) fn is_connected(&self) -> bool {
        lock(&self.live).conns.iter().any(Conn::usable)
    }

    /// A connection for one more call, counted in `call` (dialed, once for every caller
    /// waiting, when there is none with room and fewer than [`MAX_CONNECTIONS`]).
    pub(super) async fn connection(&self, call: &mut InFlight) -> Result<Conn, Status> {
        let mut dialing = {
            let mut live = lock(&self.live);
            live.conns.retain(Conn::usable);
            let roomiest = live
                .conns
                .iter()
                .min_by_key(|c| c.state.calls.load(Ordering::Relaxed));
            match roomiest {
                Some(conn) if conn.has_room() || live.conns.len() >= MAX_CONNECTIONS => {
                    call.on(conn);
                    return Ok(conn.clone());
                }
                _ => {}
            }
            match &live.dialing {
                Some(dialing) => dialing.clone(),
                None => {
                    let (done, dialing) = watch::channel(None);
                    live.dialing = Some(dialing.clone());
                    tokio::spawn(dial(call.endpoint.clone(), done));
                    dialing
                }
            }
        };
        // The dial task always reports before its sender is dropped.
        let outcome = dialing
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|outcome| outcome.clone())
            .unwrap_or_else(|| Err("the dial to the upstream was abandoned".into()));
        let conn = outcome.map_err(super::unreached)?;
        call.on(&conn);
        Ok(conn)
    }

    /// Takes the endpoint out of the balancer's choice after a failed dial or a lost
    /// connection (`why`), and probes it back in a task of its own: first after
    /// [`FIRST_EJECTION`], then twice as long after each failed probe, up to [`MAX_EJECTION`].
    pub(super) fn eject(self: &Arc<Self>, why: &str) {
        let _transition = self.transition();
        if self.ejected.swap(true, Ordering::Relaxed) {
            return;
        }
        self.gauges.healthy.dec();
        self.gauges.ejected.inc();
        let failures = self.failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(upstream = %self.authority, addr = %self.addr, reason = why, "upstream endpoint ejected");
        let backoff = FIRST_EJECTION
            .saturating_mul(1 << failures.min(10))
            .min(MAX_EJECTION);
        tokio::spawn(probe(Arc::downgrade(self), backoff));
    }

    /// Held while the state changes (see the field).
    fn transition(&self) -> std::sync::MutexGuard<'_, ()> {
        self.transition
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Back in the balancer's choice.
    fn restore(&self) {
        let _transition = self.transition();
        if self.retired.load(Ordering::Relaxed) {
            return;
        }
        if self.ejected.swap(false, Ordering::Relaxed) {
            self.gauges.ejected.dec();
            self.gauges.healthy.inc();
            tracing::info!(upstream = %self.authority, addr = %self.addr, "upstream endpoint healthy again");
        }
    }

    /// A call succeeded: the next ejection starts from the first backoff again, and the
    /// failed calls in a row from none.
    pub(super) fn succeeded(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        self.answered();
    }

    /// The upstream answered a call with a status of its own other than UNAVAILABLE and
    /// INTERNAL: the endpoint works.
    pub(super) fn answered(&self) {
        if self.failed_calls.load(Ordering::Relaxed) != 0 {
            self.failed_calls.store(0, Ordering::Relaxed);
        }
    }

    /// The upstream answered a call UNAVAILABLE or INTERNAL: after `consecutive_failures` in
    /// a row the endpoint is ejected as a failed dial would eject it (outlier detection, as
    /// Envoy's consecutive 5xx).
    pub(super) fn failed_call(self: &Arc<Self>) {
        let limit = self.options.consecutive_failures;
        if limit == 0 {
            return;
        }
        let in_a_row = self.failed_calls.fetch_add(1, Ordering::Relaxed) + 1;
        if in_a_row >= limit {
            self.failed_calls.store(0, Ordering::Relaxed);
            self.eject(&format!(
                "{in_a_row} calls in a row answered UNAVAILABLE or INTERNAL"
            ));
        }
    }

    /// Counts the upstream's answer `status` for outlier detection (statuses the gateway
    /// made itself are not the upstream's answers: a failed dial ejects on its own).
    pub(super) fn answered_status(self: &Arc<Self>, status: &tonic::Status) {
        if super::made_by_gateway(status) {
            return;
        }
        match status.code() {
            tonic::Code::Unavailable | tonic::Code::Internal => self.failed_call(),
            _ => self.answered(),
        }
    }

    /// The endpoint leaves its upstream (no longer resolved): out of the gauges. Calls in
    /// flight finish on it; its connections close when the last of them ends.
    pub(super) fn retire(&self) {
        let _transition = self.transition();
        if self.retired.swap(true, Ordering::Relaxed) {
            return;
        }
        if self.ejected.swap(true, Ordering::Relaxed) {
            self.gauges.ejected.dec();
        } else {
            self.gauges.healthy.dec();
        }
    }
}

/// Probes an ejected endpoint until it answers (a connection, and SERVING when the service
/// has an active health check), waiting `backoff` before the first try and doubling it after
/// each failure. Ends when the endpoint is dropped.
async fn probe(endpoint: Weak<Endpoint>, mut backoff: Duration) {
    loop {
        tokio::time::sleep(backoff).await;
        let Some(endpoint) = endpoint.upgrade() else {
            return;
        };
        let mut call = InFlight::new(&endpoint);
        let answered = match endpoint.connection(&mut call).await {
            Ok(conn) => match &endpoint.checked {
                Some(check) => check(endpoint.clone(), conn).await,
                None => Ok(()),
            },
            Err(e) => Err(e.message().to_owned()),
        };
        drop(call);
        match answered {
            Ok(()) => {
                endpoint.restore();
                return;
            }
            Err(error) => {
                tracing::debug!(upstream = %endpoint.authority, addr = %endpoint.addr, %error, "upstream endpoint still failing");
                backoff = backoff.saturating_mul(2).min(MAX_EJECTION);
            }
        }
    }
}

/// Dials `endpoint`, records the connection (or not) in its live state, and tells the
/// waiting calls. A failed dial ejects the endpoint.
async fn dial(endpoint: Arc<Endpoint>, done: watch::Sender<Option<Result<Conn, String>>>) {
    let authority = &endpoint.authority;
    let options = endpoint.options;
    let connect = async {
        let io = connect::dial(endpoint.addr, endpoint.tls.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        h2::client::Builder::new()
            // hyper's client defaults, which tonic used: large windows so a big answer does
            // not wait for WINDOW_UPDATEs.
            .initial_window_size(2 << 20)
            .initial_connection_window_size(5 << 20)
            // Upstreams may send DATA frames of up to 256 KiB (HTTP/2's default is 16 KiB).
            // h2's reader makes room for the rest of the frame it reads, so the frame size
            // bounds each read: a 150 KB answer took ≈ 19 reads of ≈ 8 KiB, now ≈ 4
            // (BENCHMARKS.md, history of 2026-12-04). Larger frames would interleave other streams'
            // frames on the connection more coarsely for answers past 256 KiB.
            .max_frame_size(256 << 10)
            .max_header_list_size(16 << 10)
            .enable_push(false)
            .handshake::<_, Frame>(io)
            .await
            .map_err(|e| format!("not reachable: HTTP/2 handshake failed: {e}"))
    };
    let outcome = match tokio::time::timeout(options.connect_timeout, connect).await {
        Ok(Ok((sender, connection))) => {
            let state = Arc::new(ConnState::default());
            tokio::spawn(drive(connection, state.clone(), Arc::downgrade(&endpoint)));
            Ok(Conn { sender, state })
        }
        Ok(Err(e)) => Err(format!("upstream {authority} ({}) {e}", endpoint.addr)),
        Err(_) => Err(format!(
            "upstream {authority} ({}) not reachable: connect timed out after {:?}",
            endpoint.addr, options.connect_timeout
        )),
    };
    {
        let mut live = lock(&endpoint.live);
        live.dialing = None;
        if let Ok(conn) = &outcome {
            live.conns.push(conn.clone());
        }
    }
    if let Err(why) = &outcome {
        endpoint.eject(why);
    }
    done.send_replace(Some(outcome));
}

/// Runs a connection until it ends or stops answering PINGs; then marks it closed (the next
/// call dials again). A connection that ends in an error (not a GOAWAY the upstream sent on
/// purpose) ejects its endpoint. Dropping it fails the calls still on it.
async fn drive(
    mut connection: Connection<Transport, Frame>,
    state: Arc<ConnState>,
    endpoint: Weak<Endpoint>,
) {
    let Some((options, authority, queued)) = endpoint
        .upgrade()
        .map(|e| (e.options, e.authority.clone(), e.queued.clone()))
    else {
        return;
    };
    let mut ping = connection.ping_pong();
    // Every poll writes what the calls queued: from then on they have none waiting.
    let mut connection = std::future::poll_fn(move |cx| {
        queued.store(false, Ordering::Relaxed);
        std::pin::Pin::new(&mut connection).poll(cx)
    });
    // No keep-alive when its interval is zero (or too large to schedule).
    let first = (!options.keepalive_interval.is_zero())
        .then(|| tokio::time::Instant::now().checked_add(options.keepalive_interval))
        .flatten();
    let mut ticks = first.map(|first| {
        let mut ticks = tokio::time::interval_at(first, options.keepalive_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks
    });
    let ended = loop {
        let tick = async {
            match ticks.as_mut() {
                Some(ticks) => ticks.tick().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = &mut connection => break result,
            _ = tick => {
                let Some(ping) = ping.as_mut() else { continue };
                if state.calls.load(Ordering::Relaxed) == 0 || ping.send_ping(Ping::opaque()).is_err() {
                    continue;
                }
                let pong = tokio::time::timeout(
                    options.keepalive_timeout,
                    std::future::poll_fn(|cx| ping.poll_pong(cx)),
                );
                tokio::select! {
                    result = &mut connection => break result,
                    answered = pong => match answered {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => break Err(e),
                        Err(_) => {
                            state.closed.store(true, Ordering::Relaxed);
                            let why = format!("no answer to a keep-alive PING within {:?}", options.keepalive_timeout);
                            if let Some(endpoint) = endpoint.upgrade() {
                                endpoint.eject(&why);
                            }
                            tracing::debug!(upstream = %authority, error = why, "upstream connection lost");
                            return;
                        }
                    },
                }
            }
        }
    };
    state.closed.store(true, Ordering::Relaxed);
    match ended {
        Ok(()) => tracing::debug!(upstream = %authority, "upstream connection closed"),
        // A GOAWAY the upstream sent (a drain, a restart on purpose) closes; anything else
        // (a reset, a broken connection) ejects.
        Err(e) if e.is_go_away() && e.is_remote() => {
            tracing::debug!(upstream = %authority, error = %e, "upstream connection closed by GOAWAY");
        }
        Err(e) => {
            tracing::debug!(upstream = %authority, error = %e, "upstream connection lost");
            if let Some(endpoint) = endpoint.upgrade() {
                endpoint.eject(&format!("connection lost: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// An h2 server on 127.0.0.1:0 that takes connections and streams and answers none.
    async fn h2_server() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok(_)) = conn.accept().await {}
                });
            }
        });
        addr
    }

    /// When each probe asked the endpoint, and how many more probes fail.
    #[derive(Default)]
    struct Probes {
        at: Mutex<Vec<Instant>>,
        failing: AtomicUsize,
    }

    impl Probes {
        fn taken(&self) -> Vec<Instant> {
            std::mem::take(&mut *self.at.lock().unwrap())
        }
    }

    /// An endpoint with a connection up whose probes ask `probes` (as an active health
    /// check is asked): a probe then needs no dial, so it does no I/O and runs at once when
    /// its sleep ends, and with the clock paused the times it records are the backoff's.
    async fn endpoint(probes: &Arc<Probes>) -> (Arc<Endpoint>, StateGauges) {
        let addr = h2_server().await;
        let probes = probes.clone();
        let check: ProbeCheck = Arc::new(move |_, _| {
            let probes = probes.clone();
            Box::pin(async move {
                probes.at.lock().unwrap().push(Instant::now());
                let failing = probes.failing.load(Ordering::SeqCst);
                if failing == 0 {
                    return Ok(());
                }
                probes.failing.store(failing - 1, Ordering::SeqCst);
                Err("still failing".to_owned())
            })
        });
        let place = Place {
            target: 0,
            addr,
            authority: Authority::from_static("upstream.test:50051"),
            tls: None,
        };
        let options = UpstreamOptions {
            // No keep-alive PINGs (I/O) while the clock is paused.
            keepalive_interval: Duration::ZERO,
            ..UpstreamOptions::default()
        };
        let gauges = StateGauges::default();
        let endpoint = Endpoint::new(place, options, gauges.clone(), Some(check));
        let mut call = InFlight::new(&endpoint);
        endpoint.connection(&mut call).await.unwrap();
        drop(call);
        assert!(endpoint.is_connected());
        (endpoint, gauges)
    }

    /// Ejects `endpoint` now and waits (in paused time) until a probe restores it: the
    /// gaps from the ejection to the first probe and between the probes.
    async fn ejection(endpoint: &Arc<Endpoint>, probes: &Probes) -> Vec<Duration> {
        let ejected = Instant::now();
        endpoint.eject("test");
        assert!(endpoint.is_ejected());
        let deadline = ejected + Duration::from_secs(3600);
        while endpoint.is_ejected() {
            assert!(Instant::now() < deadline, "not restored within an hour");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut last = ejected;
        probes
            .taken()
            .into_iter()
            .map(|at| {
                let gap = at - last;
                last = at;
                gap
            })
            .collect()
    }

    /// `gaps` are `expected` (in ms; the timer wheel's 1 ms rounding allowed).
    fn assert_gaps(gaps: &[Duration], expected: &[u64]) {
        let ms: Vec<u128> = gaps.iter().map(Duration::as_millis).collect();
        assert_eq!(gaps.len(), expected.len(), "{ms:?}");
        for (gap, want) in gaps.iter().zip(expected) {
            let want = Duration::from_millis(*want);
            assert!(
                *gap >= want && *gap <= want + Duration::from_millis(2),
                "gaps {ms:?}, expected {expected:?}"
            );
        }
    }

    /// docs/upstreams.md, "Passive health": an ejected endpoint is "probed back in: after
    /// 0.5 s, then twice as long after each failed probe, up to 30 s". Nine probes fail, the
    /// tenth restores it.
    #[tokio::test]
    async fn an_ejected_endpoint_is_probed_after_half_a_second_then_twice_as_long_up_to_30_s() {
        let probes = Arc::new(Probes::default());
        let (endpoint, gauges) = endpoint(&probes).await;
        tokio::time::pause();
        probes.failing.store(9, Ordering::SeqCst);
        let gaps = ejection(&endpoint, &probes).await;
        assert_gaps(
            &gaps,
            &[
                500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000,
            ],
        );
        assert!(!endpoint.is_ejected());
        assert_eq!((gauges.healthy.get(), gauges.ejected.get()), (1, 0));
    }

    /// The backoff's start: each ejection in a row (no call succeeding between them) starts
    /// twice as long as the one before, up to 30 s; a call that succeeds starts it over at
    /// 0.5 s (`Endpoint::eject`, `Endpoint::succeeded`).
    #[tokio::test]
    async fn ejections_in_a_row_start_the_backoff_higher_until_a_call_succeeds() {
        let probes = Arc::new(Probes::default());
        let (endpoint, _) = endpoint(&probes).await;
        tokio::time::pause();
        // Each probe restores at once: only the first wait of each ejection.
        let firsts: Vec<Duration> = {
            let mut firsts = Vec::new();
            for _ in 0..8 {
                firsts.extend(ejection(&endpoint, &probes).await);
            }
            firsts
        };
        assert_gaps(&firsts, &[500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        endpoint.succeeded();
        assert_gaps(&ejection(&endpoint, &probes).await, &[500]);
        // A failed probe doubles from where the ejection started.
        probes.failing.store(1, Ordering::SeqCst);
        assert_gaps(&ejection(&endpoint, &probes).await, &[1000, 2000]);
    }
}

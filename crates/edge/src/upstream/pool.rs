//! One upstream: its endpoints (every address its URLs resolve to, refreshed every
//! `dns_refresh`), the balancer's choice among them, and their health. Unary calls and
//! streams both take their endpoint here.
//!
//! Balancing is power-of-two-choices on outstanding calls (linkerd's and tower's p2c): two
//! endpoints drawn at random among the healthy ones, the one with fewer calls in flight
//! taken. It needs no shared counter beyond each endpoint's own and no lock; a slow endpoint
//! collects outstanding calls and is picked less. Ejected endpoints are left out while any
//! other is healthy; when none is, every endpoint is a candidate again (a call that might
//! work beats one refused outright, as Envoy's panic threshold does). Calls that arrive
//! together share one endpoint's writes, a batch at a time ([`Pool::keep`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use http::uri::Authority;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use tonic::Status;

use super::endpoint::{Endpoint, InFlight, Place, StateGauges};
use super::exchange::Failure;
use super::health::Check;
use super::resolve::Resolve;
use super::{Target, UpstreamOptions};
use crate::error::SetupError;

/// Calls in a row that join one endpoint's waiting frames at most ([`Pool::keep`]): a write
/// carrying this many calls' frames costs each a sixteenth of a system call, and a burst
/// of requests one read brings is spread in shares of this size.
const BATCH: usize = 16;

/// The shortest `dns_refresh` and `health_interval` taken (shorter ones are raised to it).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// A configured URL of the upstream.
struct Addressed {
    authority: Authority,
    tls: Option<super::UpstreamTls>,
    host: String,
    port: u16,
    /// The host when it is an IP address: one endpoint, never resolved.
    literal: Option<IpAddr>,
}

pub(crate) struct Pool {
    /// The upstream as configured (its URLs, comma-separated): its name in messages and
    /// in metric labels (bounded: it comes from the configuration).
    pub(super) name: Arc<str>,
    /// The URLs as configured, and the services health-checked (a reload keeps a pool
    /// configured as before).
    configured: Vec<Target>,
    health_services: Vec<String>,
    targets: Vec<Addressed>,
    endpoints: ArcSwap<Vec<Arc<Endpoint>>>,
    /// True once the first resolution has finished.
    resolved: watch::Sender<bool>,
    /// The same, read without the watch channel's lock on every call.
    resolved_once: std::sync::atomic::AtomicBool,
    /// Why the last resolution found nothing for some URL, if it did not.
    resolve_error: Mutex<Option<String>>,
    pub(super) options: UpstreamOptions,
    pub(super) max_response_bytes: usize,
    check: Option<Check>,
    gauges: StateGauges,
    /// Calls sent to this upstream (`protogate_upstream_requests_total{upstream}`).
    pub(super) calls: Counter,
    /// Retries of its calls' policies, within `retry_budget`.
    pub(super) budget: super::retry::Budget,
    /// `max_concurrent_requests_per_upstream`'s count of calls in flight, with its maximum:
    /// kept with the pool, so the snapshots of a reload count against one limit.
    limit: Mutex<Option<(usize, Arc<crate::admission::Limit>)>>,
    resolver: Arc<dyn Resolve>,
    /// The last call's endpoint, and how many calls in a row it took while its frames
    /// waited (the affinity of [`Pool::keep`]).
    last: Mutex<(Weak<Endpoint>, usize)>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("endpoints", &self.endpoints.load())
            .finish_non_exhaustive()
    }
}

/// The settings one pool is built from, beside its URLs.
pub(super) struct PoolSettings {
    pub(super) options: UpstreamOptions,
    pub(super) max_response_bytes: usize,
    /// The services checked with `grpc.health.v1.Health/Check` (none: no active check).
    pub(super) health_services: Vec<String>,
    pub(super) gauges: StateGauges,
    pub(super) calls: Counter,
    pub(super) budget: super::retry::Budget,
    pub(super) resolver: Arc<dyn Resolve>,
}

impl Pool {
    /// The pool of `targets`; endpoints of IP addresses exist at once, host names are
    /// resolved in a task that refreshes them every `dns_refresh`. Must run inside a Tokio
    /// runtime.
    pub(super) fn new(targets: &[Target], settings: PoolSettings) -> Result<Arc<Pool>, SetupError> {
        let name = name(targets);
        let configured = targets.to_vec();
        let health_services = settings.health_services.clone();
        let targets = targets
            .iter()
            .map(addressed)
            .collect::<Result<Vec<_>, _>>()?;
        let options = usable(settings.options);
        let check = (!settings.health_services.is_empty()).then(|| Check {
            services: settings.health_services.into(),
            timeout: options.connect_timeout,
            max_response_bytes: settings.max_response_bytes,
        });
        let pool = Arc::new(Pool {
            name,
            configured,
            health_services,
            targets,
            endpoints: ArcSwap::from_pointee(Vec::new()),
            resolved: watch::Sender::new(false),
            resolved_once: std::sync::atomic::AtomicBool::new(false),
            resolve_error: Mutex::new(None),
            options,
            max_response_bytes: settings.max_response_bytes,
            check,
            gauges: settings.gauges,
            calls: settings.calls,
            budget: settings.budget,
            limit: Mutex::new(None),
            resolver: settings.resolver,
            last: Mutex::new((Weak::new(), 0)),
        });
        if pool.targets.iter().all(|t| t.literal.is_some()) {
            let endpoints = (0..pool.targets.len())
                .filter_map(|i| {
                    let t = &pool.targets[i];
                    t.literal
                        .map(|ip| pool.endpoint_at(i, SocketAddr::new(ip, t.port)))
                })
                .collect();
            pool.endpoints.store(Arc::new(endpoints));
            pool.mark_resolved();
        } else {
            tokio::spawn(refresh(Arc::downgrade(&pool), options.dns_refresh));
        }
        if pool.check.is_some() {
            tokio::spawn(check_health(Arc::downgrade(&pool), options.health_interval));
        }
        Ok(pool)
    }

    /// The limit of `max` calls in flight to this upstream (the one it has, when its maximum
    /// is `max`).
    pub(super) fn limit(&self, max: usize) -> Arc<crate::admission::Limit> {
        let mut limit = self.limit.lock().unwrap_or_else(PoisonError::into_inner);
        match &*limit {
            Some((m, l)) if *m == max => l.clone(),
            _ => {
                let l = Arc::new(crate::admission::Limit::new(Some(max)));
                *limit = Some((max, l.clone()));
                l
            }
        }
    }

    /// Whether this pool is what `targets`, `health_services`, `options` and
    /// `max_response_bytes` would build.
    pub(super) fn is_configured(
        &self,
        targets: &[Target],
        health_services: &[String],
        options: UpstreamOptions,
        max_response_bytes: usize,
    ) -> bool {
        self.configured == targets
            && self.health_services == health_services
            && self.options == usable(options)
            && self.max_response_bytes == max_response_bytes
    }

    fn endpoint_at(&self, target: usize, addr: SocketAddr) -> Arc<Endpoint> {
        let t = &self.targets[target];
        Endpoint::new(
            Place {
                target,
                addr,
                authority: t.authority.clone(),
                tls: t.tls.clone(),
            },
            self.options,
            self.gauges.clone(),
            self.check.as_ref().map(Check::probe),
        )
    }

    /// The endpoint of a call's next attempt, counted in flight on it: the balancer's choice,
    /// and for a retry (`failed`: the endpoint the call failed on, and how) another one. With
    /// no other, a refused call goes to the same endpoint again (it is up), and an unreachable
    /// one is not dialed twice: its failure is the answer.
    pub(super) async fn attempt_on(
        &self,
        failed: Option<(Arc<Endpoint>, Failure)>,
    ) -> Result<InFlight, Status> {
        match (self.take(failed.as_ref().map(|(e, _)| e)).await?, failed) {
            (Some(call), _) => Ok(call),
            (None, Some((endpoint, Failure::NotSent(_)))) => Ok(InFlight::new(&endpoint)),
            (None, Some((_, failure))) => Err(failure.into_status()),
            (None, None) => Err(super::unreached(format!(
                "upstream {} has no endpoint",
                self.name
            ))),
        }
    }

    /// The endpoint of a retry policy's next attempt after one `previous` answered: another
    /// when there is one, else `previous` again.
    pub(super) async fn attempt_after(&self, previous: &Arc<Endpoint>) -> Result<InFlight, Status> {
        Ok(self
            .take(Some(previous))
            .await?
            .unwrap_or_else(|| InFlight::new(previous)))
    }

    /// An endpoint for the next call, counted in flight on it: the balancer's choice, leaving
    /// out `avoid` (the endpoint a retried call failed on). None when there is no other.
    async fn take(&self, avoid: Option<&Arc<Endpoint>>) -> Result<Option<InFlight>, Status> {
        if !self
            .resolved_once
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let mut resolved = self.resolved.subscribe();
            let _ = resolved.wait_for(|done| *done).await;
        }
        let endpoints = self.endpoints.load();
        if endpoints.is_empty() {
            return Err(super::unreached(format!(
                "upstream {} has no address{}",
                self.name,
                self.why_unresolved()
            )));
        }
        let chosen = pick(&endpoints, avoid).map(|choice| self.keep(choice, &endpoints, avoid));
        Ok(chosen.map(|e| InFlight::new(&e)))
    }

    /// The balancer's `choice`, or the endpoint of the call picked just before while that
    /// call's frames still wait for their write (its connections have not run since), for
    /// up to [`BATCH`] calls in a row: calls that arrive together — the requests one read of
    /// a client connection brings — then share one upstream connection, whose writes and
    /// reads carry all their frames. Split over two connections they cost twice the system
    /// calls (BENCHMARKS.md, history of 2026-12-01 and 2026-12-02). Once the frames are written the next call
    /// is the balancer's again: a burst is placed by the balancer one batch at a time.
    fn keep(
        &self,
        choice: Arc<Endpoint>,
        endpoints: &[Arc<Endpoint>],
        avoid: Option<&Arc<Endpoint>>,
    ) -> Arc<Endpoint> {
        if endpoints.len() < 2 {
            return choice;
        }
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let (previous, joined) = &mut *last;
        // The last endpoint, if it is still one of the pool's (held weakly: a retired one
        // is not kept alive by this).
        let stay = endpoints
            .iter()
            .find(|e| std::ptr::eq(Arc::as_ptr(e), previous.as_ptr()))
            .filter(|previous| {
                *joined < BATCH
                    && previous.has_queued()
                    && !previous.is_ejected()
                    && !avoid.is_some_and(|a| Arc::ptr_eq(a, previous))
            });
        let chosen = match stay {
            Some(previous) => {
                *joined += 1;
                previous.clone()
            }
            None => {
                *joined = 1;
                choice
            }
        };
        chosen.queue();
        *previous = Arc::downgrade(&chosen);
        chosen
    }

    /// The first resolution is over: calls waiting for it go on.
    fn mark_resolved(&self) {
        self.resolved_once
            .store(true, std::sync::atomic::Ordering::Release);
        self.resolved.send_replace(true);
    }

    fn why_unresolved(&self) -> String {
        match &*self
            .resolve_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(error) => format!(": {error}"),
            None => String::new(),
        }
    }

    /// Ready when some endpoint has a connection up or can make one within `timeout` (tried
    /// in turn, healthy ones first); else why not.
    pub(super) async fn ready(&self, timeout: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        if !self
            .resolved_once
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let mut resolved = self.resolved.subscribe();
            let _ = tokio::time::timeout_at(deadline, resolved.wait_for(|done| *done)).await;
        }
        let endpoints = self.endpoints.load_full();
        if endpoints.is_empty() {
            return Err(format!(
                "{}: no address{}",
                self.name,
                self.why_unresolved()
            ));
        }
        if endpoints
            .iter()
            .any(|e| !e.is_ejected() && e.is_connected())
        {
            return Ok(());
        }
        let mut order: Vec<&Arc<Endpoint>> = endpoints.iter().collect();
        order.sort_by_key(|e| e.is_ejected());
        let mut last = String::new();
        for endpoint in order {
            let mut call = InFlight::new(endpoint);
            match tokio::time::timeout_at(deadline, endpoint.connection(&mut call)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(status)) => last = status.message().to_owned(),
                Err(_) => {
                    last = format!(
                        "{} ({}): connect timed out",
                        endpoint.authority, endpoint.addr
                    );
                    break;
                }
            }
        }
        Err(format!("{}: no healthy endpoint ({last})", self.name))
    }

    /// Resolves every URL and makes the endpoints what was found: new addresses added,
    /// vanished ones retired (calls in flight on them finish). A URL that does not resolve
    /// keeps the endpoints it had.
    async fn resolve(&self) {
        let current = self.endpoints.load_full();
        let mut found: Vec<(usize, SocketAddr)> = Vec::new();
        let mut errors = Vec::new();
        for (i, target) in self.targets.iter().enumerate() {
            if let Some(ip) = target.literal {
                found.push((i, SocketAddr::new(ip, target.port)));
                continue;
            }
            let lookup = self.resolver.resolve(&target.host, target.port);
            match tokio::time::timeout(self.options.connect_timeout, lookup).await {
                Ok(Ok(addrs)) if !addrs.is_empty() => {
                    found.extend(addrs.into_iter().map(|a| (i, a)));
                }
                outcome => {
                    let why = match outcome {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(_)) => "no address".to_owned(),
                        Err(_) => "resolution timed out".to_owned(),
                    };
                    errors.push(format!("{} does not resolve: {why}", target.host));
                    found.extend(
                        current
                            .iter()
                            .filter(|e| e.target == i)
                            .map(|e| (i, e.addr)),
                    );
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        let mut next = Vec::with_capacity(found.len());
        for (target, addr) in found {
            let kept = current
                .iter()
                .find(|e| e.target == target && e.addr == addr)
                .cloned();
            next.push(kept.unwrap_or_else(|| {
                tracing::info!(upstream = %self.name, %addr, "upstream endpoint added");
                self.endpoint_at(target, addr)
            }));
        }
        for gone in current
            .iter()
            .filter(|e| !next.iter().any(|n| Arc::ptr_eq(n, e)))
        {
            tracing::info!(upstream = %self.name, addr = %gone.addr, "upstream endpoint removed");
            gone.retire();
        }
        if let Some(error) = errors.first() {
            tracing::warn!(upstream = %self.name, %error, "upstream resolution failed; its endpoints are kept");
        }
        *self
            .resolve_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = errors.into_iter().next();
        self.endpoints.store(Arc::new(next));
        self.mark_resolved();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for endpoint in self.endpoints.load().iter() {
            endpoint.retire();
        }
    }
}

/// Resolves the pool's URLs now and every `every`, until the pool is dropped.
async fn refresh(pool: Weak<Pool>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(live) = pool.upgrade() else { return };
        live.resolve().await;
    }
}

/// Asks every healthy endpoint whether its services are SERVING every `every`; one that is
/// not, or does not answer, is ejected (and probed back with the same question).
async fn check_health(pool: Weak<Pool>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(live) = pool.upgrade() else { return };
        let (endpoints, Some(check)) = (live.endpoints.load_full(), live.check.clone()) else {
            return;
        };
        drop(live);
        let checks = endpoints
            .iter()
            .filter(|e| !e.is_ejected())
            .map(|endpoint| {
                let check = check.clone();
                async move {
                    let mut call = InFlight::new(endpoint);
                    let outcome = match endpoint.connection(&mut call).await {
                        Ok(conn) => check.run(endpoint, conn).await,
                        // The failed dial ejected it already.
                        Err(_) => Ok(()),
                    };
                    if let Err(why) = outcome {
                        endpoint.eject(&why);
                    }
                }
            });
        futures_util::future::join_all(checks).await;
    }
}

/// `options` as a pool runs them: a zero period would panic in tokio's interval, a tiny one
/// flood the resolver or the upstreams.
fn usable(mut options: UpstreamOptions) -> UpstreamOptions {
    options.dns_refresh = options.dns_refresh.max(MIN_INTERVAL);
    options.health_interval = options.health_interval.max(MIN_INTERVAL);
    options
}

/// Power of two choices among the endpoints that are not ejected (all of them when every one
/// is), `avoid` left out: the one with fewer calls in flight of two drawn at random.
fn pick(endpoints: &[Arc<Endpoint>], avoid: Option<&Arc<Endpoint>>) -> Option<Arc<Endpoint>> {
    let avoided = |e: &Arc<Endpoint>| avoid.is_some_and(|a| Arc::ptr_eq(a, e));
    let healthy = endpoints
        .iter()
        .filter(|e| !e.is_ejected() && !avoided(e))
        .count();
    let every = healthy == 0;
    let candidates = |e: &&Arc<Endpoint>| !avoided(e) && (every || !e.is_ejected());
    let count = if every {
        endpoints.iter().filter(candidates).count()
    } else {
        healthy
    };
    let nth = |n: usize| endpoints.iter().filter(candidates).nth(n).cloned();
    // An endpoint may be ejected between the count and the draw: then any candidate left,
    // else any endpoint not avoided (never none while there is one).
    let fallback = || {
        endpoints
            .iter()
            .find(candidates)
            .or_else(|| endpoints.iter().find(|e| !avoided(e)))
            .cloned()
    };
    match count {
        0 => fallback(),
        1 => nth(0).or_else(fallback),
        _ => {
            let first = super::random::below(count);
            let mut second = super::random::below(count - 1);
            if second >= first {
                second += 1;
            }
            let a = nth(first).or_else(fallback)?;
            let Some(b) = nth(second) else { return Some(a) };
            Some(if b.outstanding() < a.outstanding() {
                b
            } else {
                a
            })
        }
    }
}

/// The upstream's name: its URLs as configured, comma-separated.
pub(super) fn name(targets: &[Target]) -> Arc<str> {
    targets
        .iter()
        .map(|t| t.uri.as_str())
        .collect::<Vec<_>>()
        .join(",")
        .into()
}

/// A configured URL, checked: `http://` (h2c) without TLS settings, `https://` with them.
fn addressed(target: &Target) -> Result<Addressed, SetupError> {
    let uri = target.uri.as_str();
    let bad = |reason: String| SetupError::Upstream {
        uri: uri.to_owned(),
        reason,
    };
    let parsed: http::Uri = uri
        .parse()
        .map_err(|e| bad(format!("not a valid URI: {e}")))?;
    match (parsed.scheme_str(), &target.tls) {
        (Some("http"), None) | (Some("https"), Some(_)) => {}
        (Some("https"), None) => {
            return Err(bad("an https:// upstream needs its TLS settings".into()));
        }
        (Some("http"), Some(_)) => {
            return Err(bad("TLS settings given for an http:// upstream".into()));
        }
        _ => return Err(bad("expected http:// (h2c) or https:// (TLS)".into())),
    }
    let Some(authority) = parsed.authority().cloned() else {
        return Err(bad("no host".into()));
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = authority
        .port_u16()
        .unwrap_or(if target.tls.is_some() { 443 } else { 80 });
    Ok(Addressed {
        literal: host.parse().ok(),
        authority,
        tls: target.tls.clone(),
        host,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> [Target; 1] {
        [Target::plain("http://127.0.0.1:1")]
    }

    /// A pool of [`targets`] with `options`.
    fn pool(options: UpstreamOptions) -> Arc<Pool> {
        Pool::new(
            &targets(),
            PoolSettings {
                options,
                max_response_bytes: 1 << 20,
                health_services: Vec::new(),
                gauges: StateGauges::default(),
                calls: Counter::default(),
                budget: super::super::retry::Budget::new(
                    0.2,
                    crate::metrics::MethodName("u".into()),
                    &crate::metrics::UpstreamFamilies::default(),
                ),
                resolver: Arc::new(super::super::SystemResolver),
            },
        )
        .unwrap()
    }

    /// A pool and `n` endpoints of its own making (127.0.0.1, ports 1..=n).
    fn pool_and_endpoints(n: u16) -> (Arc<Pool>, Vec<Arc<Endpoint>>) {
        let endpoints = (1..=n)
            .map(|port| {
                let place = Place {
                    target: 0,
                    addr: ([127, 0, 0, 1], port).into(),
                    authority: Authority::from_static("127.0.0.1:1"),
                    tls: None,
                };
                Endpoint::new(place, UpstreamOptions::default(), Default::default(), None)
            })
            .collect();
        (pool(UpstreamOptions::default()), endpoints)
    }

    #[tokio::test]
    async fn calls_join_an_endpoints_waiting_frames_one_batch_at_most() {
        let (pool, e) = pool_and_endpoints(2);
        let keep = |choice: &Arc<Endpoint>, avoid: Option<&Arc<Endpoint>>| {
            pool.keep(choice.clone(), &e, avoid)
        };
        // The first call is the balancer's; the next ones join its frames while they wait.
        assert!(Arc::ptr_eq(&keep(&e[0], None), &e[0]));
        for _ in 1..BATCH {
            assert!(Arc::ptr_eq(&keep(&e[1], None), &e[0]));
        }
        // A batch is full: the balancer's choice, which starts the next one.
        assert!(Arc::ptr_eq(&keep(&e[1], None), &e[1]));
        assert!(Arc::ptr_eq(&keep(&e[0], None), &e[1]));
        // Once the connection has written them, the balancer chooses again.
        e[1].written();
        assert!(Arc::ptr_eq(&keep(&e[0], None), &e[0]));
        // Never onto the endpoint a retry avoids, nor onto an ejected one.
        assert!(Arc::ptr_eq(&keep(&e[1], Some(&e[0])), &e[1]));
        e[1].eject("test");
        assert!(Arc::ptr_eq(&keep(&e[0], None), &e[0]));
        // One endpoint: nothing to choose, nothing recorded.
        let (single, one) = pool_and_endpoints(1);
        assert!(Arc::ptr_eq(
            &single.keep(one[0].clone(), &one, None),
            &one[0]
        ));
        assert!(!one[0].has_queued());
    }

    #[tokio::test]
    async fn a_pool_is_what_its_settings_build_even_below_the_shortest_interval() {
        let options = UpstreamOptions {
            dns_refresh: Duration::ZERO,
            health_interval: Duration::from_millis(1),
            ..UpstreamOptions::default()
        };
        let pool = pool(options);
        // A reload with the same settings keeps the pool, though it runs them raised.
        assert!(pool.is_configured(&targets(), &[], options, 1 << 20));
        assert!(!pool.is_configured(&targets(), &[], options, 1 << 21));
    }

    /// docs/upstreams.md, "Passive health": ejected endpoints are left out while another is
    /// healthy, and "when every endpoint is ejected, all are tried again" — each of them,
    /// not the first alone, and by the pool's calls too.
    #[tokio::test]
    async fn with_every_endpoint_ejected_every_one_is_tried() {
        let index = |e: &[Arc<Endpoint>], chosen: &Arc<Endpoint>| {
            e.iter().position(|x| Arc::ptr_eq(x, chosen)).unwrap()
        };
        let (_, e) = pool_and_endpoints(3);
        e[0].eject("test");
        e[1].eject("test");
        for _ in 0..100 {
            assert_eq!(index(&e, &pick(&e, None).unwrap()), 2);
        }
        e[2].eject("test");
        let mut chosen = [0; 3];
        for _ in 0..300 {
            chosen[index(&e, &pick(&e, None).unwrap())] += 1;
        }
        assert!(chosen.iter().all(|&n| n > 0), "{chosen:?}");
        // A retry avoiding one of them: the other two.
        let mut chosen = [0; 3];
        for _ in 0..300 {
            chosen[index(&e, &pick(&e, Some(&e[0])).unwrap())] += 1;
        }
        assert!(
            chosen[0] == 0 && chosen[1] > 0 && chosen[2] > 0,
            "{chosen:?}"
        );

        // A pool whose one endpoint is ejected still sends the call there.
        let pool = pool(UpstreamOptions::default());
        let only = pool.endpoints.load_full();
        only[0].eject("test");
        let call = pool.attempt_on(None).await.unwrap();
        assert!(Arc::ptr_eq(call.endpoint(), &only[0]));
    }
}

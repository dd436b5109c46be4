//! Per-client rate limits (`[rate_limit]`): a budget of `per_client` requests a second with
//! bursts of `burst`, per verified identity (a client without one: per peer address, since a
//! name it gives itself could change at every request), per method rule. The bucket is GCRA
//! (the generic cell rate algorithm: one "theoretical arrival time" per key, the token bucket
//! in one number), kept in a bounded LRU here ([`Local`]) or, shared by every replica, in
//! Redis (`shared.rs`) with this one as the fallback when Redis does not answer.
//!
//! Over the limit: 429 with `Retry-After` and the IETF `RateLimit-Policy` / `RateLimit`
//! headers (draft-ietf-httpapi-ratelimit-headers), RESOURCE_EXHAUSTED in the protocol's form.

mod gcra;
mod shared;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

pub use gcra::Local;
pub use shared::{RedisConfig, Shared};

use crate::selector::{Selector, most_specific};

/// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Buckets kept by default (`max_clients`): ~100 bytes each.
pub const DEFAULT_MAX_CLIENTS: usize = 100_000;

/// The `[rate_limit]` settings.
#[derive(Debug, Clone)]
pub struct RateLimitConfig {
    /// The default limit (`per_client`, `burst`).
    pub default: Limit,
    /// Per-method limits, the most specific selector winning.
    pub rules: Vec<RateRule>,
    /// Buckets kept at most (least recently used out first).
    pub max_clients: usize,
    /// One budget per client for the fleet, in Redis (default: each replica its own).
    pub redis: Option<RedisConfig>,
}

/// A rate: `per_second` requests a second on average, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

impl Limit {
    /// Nanoseconds between two requests at the rate (GCRA's emission interval).
    pub fn interval_nanos(&self) -> u64 {
        (1e9 / self.per_second).round().max(1.0) as u64
    }
}

/// `[[rate_limit.rules]]`.
#[derive(Debug, Clone)]
pub struct RateRule {
    pub selector: Selector,
    pub limit: Limit,
}

/// Whose budget a request spends: a verified client's, else its peer address's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Who {
    Client(Arc<str>),
    Peer(IpAddr),
}

/// The budget a request spends: whose, under which policy (0: the default, i + 1: rule i).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub policy: u16,
    pub who: Who,
}

/// What the limiter said of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: Limit,
    /// Requests left in the burst after this one.
    pub remaining: u32,
    /// Refused: how long until one more would be allowed. Allowed: until the burst is whole.
    pub wait: Duration,
}

impl Decision {
    /// `Retry-After` in whole seconds, at least 1.
    pub fn retry_after(&self) -> u64 {
        ceil_secs(self.wait).max(1)
    }

    /// `RateLimit-Policy: "default";q=<burst>;w=<seconds a burst takes to come back>`.
    pub fn policy_header(&self) -> HeaderValue {
        // (A rate the configuration would not take could overflow a Duration: no panic.)
        let window = ceil_secs(
            Duration::try_from_secs_f64(f64::from(self.limit.burst) / self.limit.per_second)
                .unwrap_or(Duration::MAX),
        )
        .max(1);
        header(format!("\"default\";q={};w={window}", self.limit.burst))
    }

    /// `RateLimit: "default";r=<remaining>;t=<seconds>`.
    pub fn state_header(&self) -> HeaderValue {
        header(format!(
            "\"default\";r={};t={}",
            self.remaining,
            ceil_secs(self.wait)
        ))
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn header(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or(HeaderValue::from_static("\"default\""))
}

/// `[rate_limit]` in force.
pub struct RateLimiter {
    config: RateLimitConfig,
    local: Local,
    shared: Option<Shared>,
    /// When the last backend warning was logged (ms after `epoch`; 0: never).
    warned: std::sync::atomic::AtomicU64,
    /// Until when (ms after `epoch`) Redis is not asked, after a failure.
    skip_until: std::sync::atomic::AtomicU64,
    epoch: std::time::Instant,
}

/// At most one warning per this long that Redis did not decide.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// After Redis failed to decide, the local buckets decide alone this long before Redis is
/// asked again: in an outage a request waits `redis_timeout` at most twice a second, not
/// every time.
const SKIP_AFTER_FAILURE: Duration = Duration::from_millis(500);

impl RateLimiter {
    /// The limiter of `config`; a Redis URL that does not parse is an error (the connection
    /// itself is made on first use).
    pub fn new(config: RateLimitConfig) -> Result<RateLimiter, String> {
        let local = Local::new(config.max_clients);
        let shared = config.redis.as_ref().map(Shared::new).transpose()?;
        Ok(RateLimiter {
            config,
            local,
            shared,
            warned: std::sync::atomic::AtomicU64::new(0),
            skip_until: std::sync::atomic::AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        })
    }

    pub fn config(&self) -> &RateLimitConfig {
        &self.config
    }

    /// The limit and policy of a method.
    pub fn limit_of(&self, method: &str) -> (u16, Limit) {
        match most_specific(&self.config.rules, |r| &r.selector, method) {
            Some(rule) => {
                let i = self
                    .config
                    .rules
                    .iter()
                    .position(|r| std::ptr::eq(r, rule))
                    .unwrap_or(0);
                (u16::try_from(i + 1).unwrap_or(u16::MAX), rule.limit)
            }
            None => (0, self.config.default),
        }
    }

    /// Spends one request of `who`'s budget for `method`: in Redis when shared (an error
    /// when it did not decide in time: the local bucket decided instead), else here.
    pub async fn check(&self, method: &str, who: Who) -> (Decision, Option<String>) {
        let (policy, limit) = self.limit_of(method);
        let mut failure = None;
        if let Some(shared) = &self.shared {
            use std::sync::atomic::Ordering;
            let now = self.epoch.elapsed().as_millis() as u64;
            if now < self.skip_until.load(Ordering::Relaxed) {
                failure = Some("Redis failed a moment ago; not asked again yet".to_owned());
            } else {
                match shared.check(&self.redis_key(policy, &who), limit).await {
                    Ok(decision) => return (decision, None),
                    Err(e) => {
                        // Requests meanwhile do not wait for a Redis that just failed.
                        let until = self.epoch.elapsed().as_millis() as u64;
                        self.skip_until.store(
                            until + SKIP_AFTER_FAILURE.as_millis() as u64,
                            Ordering::Relaxed,
                        );
                        failure = Some(e);
                    }
                }
            }
        }
        let decision = self
            .local
            .check(Key { policy, who }, limit, tokio::time::Instant::now());
        (decision, failure)
    }

    /// Whether a backend failure should be logged now (at most once per [`WARN_EVERY`]).
    pub fn should_warn(&self) -> bool {
        use std::sync::atomic::Ordering;
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        let last = self.warned.load(Ordering::Relaxed);
        (last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64)
            && self
                .warned
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The bucket's key in Redis: the policy by its selector (the same on every replica
    /// with the same configuration), then whose.
    fn redis_key(&self, policy: u16, who: &Who) -> String {
        let rule = match policy {
            0 => "default",
            i => self
                .config
                .rules
                .get(usize::from(i) - 1)
                .map_or("default", |r| r.selector.pattern()),
        };
        match who {
            Who::Client(name) => format!("protogate:rl:{rule}:c:{name}"),
            Who::Peer(ip) => format!("protogate:rl:{rule}:ip:{ip}"),
        }
    }
}

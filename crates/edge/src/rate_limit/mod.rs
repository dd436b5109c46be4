//! Per-client rate limits (`[rate_limit]`): a budget of `per_client` requests a second with
//! bursts of `burst`, per verified identity (a client without one: per peer address, since a
//! name it gives itself could change at every request), per method rule. The bucket is GCRA
//! (the generic cell rate algorithm: one "theoretical arrival time" per key, the token bucket
//! in one number), kept in a bounded LRU here ([`Local`]) or, shared by every replica, in
//! Redis (`redis.rs`) with this one as the fallback when Redis does not answer.
//!
//! Over the limit: 429 with `Retry-After` and the IETF `RateLimit-Policy` / `RateLimit`
//! headers (draft-ietf-httpapi-ratelimit-headers), RESOURCE_EXHAUSTED in the protocol's form.

mod gcra;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

pub use gcra::Local;

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
        let window = ceil_secs(Duration::from_secs_f64(
            f64::from(self.limit.burst) / self.limit.per_second,
        ))
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
}

impl RateLimiter {
    pub fn new(config: RateLimitConfig) -> RateLimiter {
        let local = Local::new(config.max_clients);
        RateLimiter { config, local }
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

    /// Spends one request of `who`'s budget for `method`.
    pub fn check(&self, method: &str, who: Who) -> Decision {
        let (policy, limit) = self.limit_of(method);
        self.local
            .check(Key { policy, who }, limit, tokio::time::Instant::now())
    }
}

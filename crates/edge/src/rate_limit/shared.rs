//! One budget per client for the whole fleet: the same GCRA as `gcra.rs`, kept in Redis and
//! run there by one script per request (`EVALSHA`; the script loaded again after a Redis
//! restart), on one multiplexed connection that every request's script is pipelined on. The
//! clock is Redis's (`TIME`), so replicas whose clocks differ still share one budget.
//!
//! A limiter must not take the edge down: a check that does not answer within
//! `redis_timeout`, or fails, is decided by the replica's own bucket instead (counted, and
//! warned of once per interval); the connection is made again in the background.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Decision, Limit};

/// `[rate_limit] redis`, `redis_timeout`, and what a `rediss://` connection is checked with.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://host:port[/db]` or `rediss://…` (TLS).
    pub url: String,
    /// How long a check may take before the local bucket decides (default 20 ms).
    pub timeout: Duration,
    /// `rediss://`: the CA the server's certificate is checked against (PEM; default: the
    /// system's roots) and the gateway's client certificate and key (PEM), if any.
    pub root_cert: Option<Vec<u8>>,
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .field("root_cert", &self.root_cert.is_some())
            .field("client_cert", &self.client_cert.is_some())
            .finish()
    }
}

/// GCRA in Redis. KEYS[1]: the bucket; ARGV: the interval between requests and the burst's
/// length (µs). Returns {1, µs until the bucket is full again} when allowed, else {0, µs until
/// one more is}. The key lives as long as the bucket is not full.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local ahead = new_tat - now
if ahead > tau then return {0, ahead - tau} end
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.floor(ahead / 1000) + 1)
return {1, ahead}
";

/// The shared budgets.
pub struct Shared {
    conn: ConnectionManager,
    script: redis::Script,
    timeout: Duration,
}

impl Shared {
    /// A limiter on the Redis at `config.url`; the connection is made on first use (a
    /// Redis down at start is a Redis down: the local buckets decide meanwhile).
    pub fn new(config: &RedisConfig) -> Result<Shared, String> {
        // The connection manager starts a task of its own.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err("made outside a tokio runtime".into());
        }
        let client = if config.url.starts_with("rediss://") {
            redis::Client::build_with_tls(
                config.url.as_str(),
                redis::TlsCertificates {
                    client_tls: config.client_cert.as_ref().map(|(cert, key)| {
                        redis::ClientTlsConfig {
                            client_cert: cert.clone(),
                            client_key: key.clone(),
                        }
                    }),
                    root_cert: config.root_cert.clone(),
                },
            )
        } else {
            redis::Client::open(config.url.as_str())
        }
        .map_err(|e| format!("{e}"))?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(config.timeout.max(Duration::from_millis(1))))
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(usize::MAX);
        let conn =
            ConnectionManager::new_lazy_with_config(client, manager).map_err(|e| format!("{e}"))?;
        Ok(Shared {
            conn,
            script: redis::Script::new(SCRIPT),
            timeout: config.timeout,
        })
    }

    /// Spends one request of the bucket `key` under `limit`; an error when Redis did not
    /// decide within the timeout.
    pub async fn check(&self, key: &str, limit: Limit) -> Result<Decision, String> {
        let interval = limit.interval_nanos().div_ceil(1000).max(1);
        let tau = interval.saturating_mul(u64::from(limit.burst.max(1)));
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(interval).arg(tau);
        let answer: (i64, i64) =
            match tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn)).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err(format!("no answer within {:?}", self.timeout)),
            };
        let micros = u64::try_from(answer.1).unwrap_or(0);
        Ok(if answer.0 == 1 {
            Decision {
                allowed: true,
                limit,
                remaining: u32::try_from(tau.saturating_sub(micros) / interval).unwrap_or(u32::MAX),
                wait: Duration::from_micros(micros),
            }
        } else {
            Decision {
                allowed: false,
                limit,
                remaining: 0,
                wait: Duration::from_micros(micros),
            }
        })
    }
}

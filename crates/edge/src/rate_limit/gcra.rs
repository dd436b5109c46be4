//! GCRA on one process's memory: per key the time at which its bucket is full again (the
//! "theoretical arrival time", TAT). A request at `now` moves it to `max(TAT, now) + T` (T the
//! interval between requests at the rate) and is allowed when that is within `burst × T` of
//! `now`. The same arithmetic as the Redis script (`redis.rs`).

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lru::LruCache;
use tokio::time::Instant;

use super::{Decision, Key, Limit};

/// The buckets of one process, the least recently used forgotten first beyond `max`.
pub struct Local {
    buckets: Mutex<LruCache<Key, u64>>,
    epoch: Instant,
}

impl Local {
    pub fn new(max: usize) -> Local {
        Local {
            buckets: Mutex::new(LruCache::new(
                NonZeroUsize::new(max).unwrap_or(NonZeroUsize::MIN),
            )),
            epoch: Instant::now(),
        }
    }

    pub fn check(&self, key: Key, limit: Limit, now: Instant) -> Decision {
        let now = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let tat = buckets.get(&key).copied().unwrap_or(now);
        let (decision, new_tat) = gcra(tat, now, limit);
        if decision.allowed {
            buckets.put(key, new_tat);
        }
        decision
    }

    /// Buckets held now.
    pub fn len(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One request at `now` against a bucket whose TAT is `tat` (nanoseconds on one clock): the
/// decision and the TAT to keep when allowed.
pub fn gcra(tat: u64, now: u64, limit: Limit) -> (Decision, u64) {
    let t = limit.interval_nanos();
    let tau = t.saturating_mul(u64::from(limit.burst.max(1)));
    let new_tat = tat.max(now).saturating_add(t);
    let ahead = new_tat - now;
    if ahead > tau {
        let decision = Decision {
            allowed: false,
            limit,
            remaining: 0,
            wait: Duration::from_nanos(ahead - tau),
        };
        return (decision, tat);
    }
    let decision = Decision {
        allowed: true,
        limit,
        remaining: u32::try_from((tau - ahead) / t).unwrap_or(u32::MAX),
        wait: Duration::from_nanos(ahead),
    };
    (decision, new_tat)
}

#[cfg(test)]
mod tests {
    use super::super::Who;
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            policy: 0,
            who: Who::Client(name.into()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_rate_exactly() {
        let local = Local::new(10);
        let limit = Limit {
            per_second: 10.0,
            burst: 3,
        };
        let now = || Instant::now();
        let remaining: Vec<_> = (0..4)
            .map(|_| local.check(key("a"), limit, now()))
            .collect();
        assert_eq!(
            remaining
                .iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(true, 2), (true, 1), (true, 0), (false, 0)]
        );
        assert_eq!(remaining[3].wait, Duration::from_millis(100));
        assert_eq!(remaining[3].retry_after(), 1);
        assert!(
            local.check(key("b"), limit, now()).allowed,
            "another client's own budget"
        );
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(!local.check(key("a"), limit, now()).allowed, "1 ms early");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            local.check(key("a"), limit, now()).allowed,
            "one interval later: one more"
        );
        assert!(!local.check(key("a"), limit, now()).allowed);
        tokio::time::advance(Duration::from_secs(10)).await;
        let d = local.check(key("a"), limit, now());
        assert_eq!(
            (d.allowed, d.remaining),
            (true, 2),
            "a whole burst back, no more"
        );
        // 10 s at 10/s: 100 allowed, whatever the pace.
        let mut allowed = 0;
        for _ in 0..1000 {
            tokio::time::advance(Duration::from_millis(10)).await;
            allowed += u32::from(local.check(key("c"), limit, now()).allowed);
        }
        assert_eq!(
            allowed,
            100 + 2,
            "the rate, plus the burst less the first request's slot"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn buckets_are_bounded() {
        let local = Local::new(2);
        let limit = Limit {
            per_second: 1.0,
            burst: 1,
        };
        for name in ["a", "b", "c"] {
            assert!(local.check(key(name), limit, Instant::now()).allowed);
        }
        assert_eq!(local.len(), 2);
        assert!(
            local.check(key("a"), limit, Instant::now()).allowed,
            "a's bucket was forgotten: memory over exactness"
        );
    }

    #[test]
    fn headers_say_the_policy_and_the_state() {
        let (d, _) = gcra(
            0,
            0,
            Limit {
                per_second: 2.0,
                burst: 10,
            },
        );
        assert_eq!(d.policy_header(), "\"default\";q=10;w=5");
        assert_eq!(d.state_header(), "\"default\";r=9;t=1");
        let mut tat = 0;
        let mut last = d;
        for _ in 0..11 {
            let (d, t) = gcra(
                tat,
                0,
                Limit {
                    per_second: 2.0,
                    burst: 10,
                },
            );
            tat = t;
            last = d;
        }
        assert!(!last.allowed);
        assert_eq!(last.wait, Duration::from_millis(500));
        assert_eq!(last.state_header(), "\"default\";r=0;t=1");
    }
}

//! Retry policies (`[services."…"] retry`) and the retry budget (`retry_budget`) of unary
//! calls whose request is held whole.
//!
//! A policy is gRPC's `retryPolicy` (gRFC A6): an attempt answered with one of `codes` goes
//! again, up to `attempts` in all, after a backoff drawn at random below
//! `min(backoff × 2ⁿ⁻¹, max_backoff)` — or exactly the `grpc-retry-pushback-ms` the upstream
//! asked for; a negative or malformed pushback stops the retries. Each retry carries
//! `grpc-previous-rpc-attempts`. `per_try_timeout` bounds each attempt (Envoy's per-try
//! timeout); its expiry is DEADLINE_EXCEEDED, retried only when `codes` names it. A retry
//! whose backoff would outlast the call's deadline is not made.
//!
//! The budget is Finagle's and Envoy's: per upstream, retries may be at most `retry_budget`
//! of the calls that have a policy over the last ten seconds, and at least
//! [`MIN_RETRIES`] in that window so a quiet upstream can still retry. Each replica keeps its
//! own, so a fleet's retries stay within the same share of its calls without coordination.
//!
//! The single re-send of a call the upstream provably did not get (unary.rs, stream.rs) is
//! not a policy retry: it is neither counted here nor in the budget.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::HeaderValue;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::time::Instant;
use tonic::Status;

use crate::error::Code;
use crate::metrics::{MethodName, RetryLabels, UpstreamFamilies, UpstreamLabels};

/// The header a retry's attempt carries: how many attempts went before it.
pub(super) const PREVIOUS_ATTEMPTS: http::HeaderName =
    http::HeaderName::from_static("grpc-previous-rpc-attempts");
use super::exchange::PUSHBACK;

/// The budget's window.
const WINDOW_SECONDS: usize = 10;
/// Retries a window allows whatever the share (Envoy's `min_retry_concurrency` is 3 at once,
/// Finagle's floor 10 a second; a tenth of Finagle's keeps a failing quiet upstream from
/// doubling its load).
pub const MIN_RETRIES: u32 = 10;
/// The most attempts a policy makes (gRPC caps `maxAttempts` at 5; Envoy's `num_retries`
/// has no cap, which this bounds).
pub const MAX_ATTEMPTS: u32 = 10;

/// A set of gRPC status codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Codes(u32);

impl Codes {
    /// UNAVAILABLE alone: the code that says the call was not processed.
    pub const UNAVAILABLE: Codes = Codes(1 << Code::Unavailable as u32);

    /// The set of `names`, each a code as gRPC's service config (`UNAVAILABLE`), Envoy's
    /// `retry_on` (`resource-exhausted`) or grpc-go (`ResourceExhausted`) writes it, or its
    /// number; the name not understood, if one is not.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Codes, String> {
        let mut codes = Codes(0);
        for name in names {
            let code = code_named(name).ok_or_else(|| {
                format!("{name:?} is not a gRPC status code (UNAVAILABLE, RESOURCE_EXHAUSTED, …)")
            })?;
            codes.0 |= 1 << code as u32;
        }
        Ok(codes)
    }

    pub fn contains(self, code: Code) -> bool {
        self.0 & (1 << code as u32) != 0
    }
}

/// The code `name` writes, in any of the spellings [`Codes::parse`] takes.
fn code_named(name: &str) -> Option<Code> {
    if let Ok(n) = name.trim().parse::<i32>() {
        return (0..=16).contains(&n).then(|| Code::from_i32(n));
    }
    let squashed: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let squashed = if squashed == "cancelled" {
        "canceled"
    } else {
        &squashed
    };
    (0..=16)
        .map(Code::from_i32)
        .find(|code| code.name().eq_ignore_ascii_case(squashed))
}

/// One `retry` table as written: every key optional, a method's filling in from its
/// service's, then from the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetrySettings {
    pub codes: Option<Codes>,
    pub attempts: Option<u32>,
    pub backoff: Option<Duration>,
    pub max_backoff: Option<Duration>,
    pub per_try_timeout: Option<Duration>,
}

impl RetrySettings {
    /// Each key of `self`, else of `under`.
    pub fn or(self, under: RetrySettings) -> RetrySettings {
        RetrySettings {
            codes: self.codes.or(under.codes),
            attempts: self.attempts.or(under.attempts),
            backoff: self.backoff.or(under.backoff),
            max_backoff: self.max_backoff.or(under.max_backoff),
            per_try_timeout: self.per_try_timeout.or(under.per_try_timeout),
        }
    }

    /// The policy these settings make (the defaults where they say nothing), or none when it
    /// makes one attempt.
    pub fn policy(self) -> Option<RetryPolicy> {
        let attempts = self.attempts.unwrap_or(3).min(MAX_ATTEMPTS);
        let backoff = self.backoff.unwrap_or(Duration::from_millis(25));
        (attempts > 1).then(|| RetryPolicy {
            codes: self.codes.unwrap_or(Codes::UNAVAILABLE),
            attempts,
            backoff,
            max_backoff: self
                .max_backoff
                .unwrap_or(Duration::from_millis(250))
                .max(backoff),
            per_try_timeout: self.per_try_timeout,
        })
    }
}

/// A method's retry policy (gRPC's `retryPolicy`, with Envoy's per-try timeout).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// The codes retried.
    pub codes: Codes,
    /// Attempts in all, the first included (2..=[`MAX_ATTEMPTS`]).
    pub attempts: u32,
    /// The first retry's backoff cap, doubled for each further one up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Each attempt's own deadline (within the call's).
    pub per_try_timeout: Option<Duration>,
}

/// One upstream's retry budget and its counters.
#[derive(Debug)]
pub(super) struct Budget {
    /// The share of calls that may be retries (`retry_budget`).
    ratio: f64,
    window: Mutex<Window>,
    /// `protogate_upstream_retries_total{upstream,code}`.
    retries: Family<RetryLabels, Counter>,
    /// `protogate_upstream_retries_refused_total{upstream}`: retries the budget did not allow.
    refused: Counter,
    upstream: MethodName,
}

/// Calls and retries per second of the last [`WINDOW_SECONDS`].
#[derive(Debug)]
struct Window {
    start: Instant,
    /// The second (since `start`) each slot counts.
    second: [u64; WINDOW_SECONDS],
    calls: [u32; WINDOW_SECONDS],
    retries: [u32; WINDOW_SECONDS],
}

impl Window {
    /// The slot of `now`, emptied when it last counted an older second.
    fn slot(&mut self, now: Instant) -> usize {
        let second = now.saturating_duration_since(self.start).as_secs();
        let at = (second % WINDOW_SECONDS as u64) as usize;
        if self.second[at] != second {
            self.second[at] = second;
            self.calls[at] = 0;
            self.retries[at] = 0;
        }
        at
    }

    /// Calls and retries of the window ending at `now`.
    fn totals(&self, now: Instant) -> (u64, u64) {
        let second = now.saturating_duration_since(self.start).as_secs();
        let live = |at: usize| {
            second
                .checked_sub(self.second[at])
                .is_some_and(|age| age < WINDOW_SECONDS as u64)
        };
        (0..WINDOW_SECONDS)
            .filter(|&at| live(at))
            .fold((0, 0), |(c, r), at| {
                (
                    c + u64::from(self.calls[at]),
                    r + u64::from(self.retries[at]),
                )
            })
    }
}

impl Budget {
    pub(super) fn new(ratio: f64, upstream: MethodName, families: &UpstreamFamilies) -> Budget {
        let now = Instant::now();
        Budget {
            ratio,
            window: Mutex::new(Window {
                start: now,
                // No slot counts a second yet (u64::MAX is never one).
                second: [u64::MAX; WINDOW_SECONDS],
                calls: [0; WINDOW_SECONDS],
                retries: [0; WINDOW_SECONDS],
            }),
            retries: families.retries.clone(),
            refused: families
                .retries_refused
                .get_or_create(&UpstreamLabels {
                    upstream: upstream.clone(),
                })
                .clone(),
            upstream,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call with a policy begins.
    fn called(&self) {
        let now = Instant::now();
        let mut window = self.lock();
        let at = window.slot(now);
        window.calls[at] = window.calls[at].saturating_add(1);
    }

    /// Whether a retry may go now; if so it is counted, under `code`.
    fn spend(&self, code: Code) -> bool {
        let now = Instant::now();
        let mut window = self.lock();
        let (calls, retries) = window.totals(now);
        let allowed = (self.ratio * calls as f64).max(f64::from(MIN_RETRIES));
        if retries as f64 >= allowed {
            drop(window);
            self.refused.inc();
            return false;
        }
        let at = window.slot(now);
        window.retries[at] = window.retries[at].saturating_add(1);
        drop(window);
        self.retries
            .get_or_create(&RetryLabels {
                upstream: self.upstream.clone(),
                code: code.name(),
            })
            .inc();
        true
    }
}

/// One call's attempts under its policy.
pub(super) struct Attempts<'a> {
    policy: &'a RetryPolicy,
    budget: &'a Budget,
    /// The call's time, and its deadline.
    timeout: Duration,
    deadline: Instant,
    /// Attempts made so far.
    made: u32,
}

impl<'a> Attempts<'a> {
    /// The attempts of a call that must end within `timeout`.
    pub(super) fn new(policy: &'a RetryPolicy, budget: &'a Budget, timeout: Duration) -> Self {
        budget.called();
        Attempts {
            policy,
            budget,
            timeout,
            deadline: Instant::now() + timeout,
            made: 0,
        }
    }

    /// An attempt begins: its `grpc-previous-rpc-attempts` (none for the first) and its
    /// deadline (the per-try timeout within what is left of the call's).
    pub(super) fn begin(&mut self) -> (Option<HeaderValue>, Duration) {
        let previous = (self.made > 0).then(|| HeaderValue::from(self.made));
        // The first attempt has the whole deadline, read off no clock: the `grpc-timeout` of
        // a call without a policy, whose header value is made once (exchange.rs).
        let left = if self.made == 0 {
            self.timeout
        } else {
            self.deadline.saturating_duration_since(Instant::now())
        };
        self.made += 1;
        let limit = self.policy.per_try_timeout.map_or(left, |t| t.min(left));
        (previous, limit)
    }

    /// Whether the call goes again after an attempt answered `status` (a status the gateway
    /// made when the attempt's per-try timeout ran out: DEADLINE_EXCEEDED). When it does, the
    /// backoff has been waited out and the retry counted.
    pub(super) async fn again(&mut self, status: &Status) -> bool {
        let code = Code::from_i32(status.code() as i32);
        if self.made >= self.policy.attempts || !self.policy.codes.contains(code) {
            return false;
        }
        let wait = match status.metadata().get(PUSHBACK) {
            Some(pushback) => match pushback_of(pushback.as_bytes()) {
                Some(wait) => wait,
                // The upstream says: do not retry.
                None => return false,
            },
            None => self.backoff(),
        };
        if Instant::now() + wait >= self.deadline || !self.budget.spend(code) {
            return false;
        }
        tokio::time::sleep(wait).await;
        true
    }

    /// The wait before the next attempt: at random below the cap of this retry, the
    /// `n`th one's `min(backoff × 2ⁿ⁻¹, max_backoff)` (gRFC A6's full jitter).
    fn backoff(&self) -> Duration {
        let doublings = self.made.saturating_sub(1).min(31);
        let cap = self
            .policy
            .backoff
            .saturating_mul(1 << doublings)
            .min(self.policy.max_backoff);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(super::random::below(nanos as usize) as u64)
    }
}

/// The status of an attempt its `per_try_timeout` (`limit` here) ended.
pub(super) fn per_try_expired(limit: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "the upstream did not answer within the attempt's per_try_timeout ({limit:?})"
    ))
}

/// `grpc-retry-pushback-ms`'s wait, or none when it says not to retry (negative, or not a
/// number: gRFC A6).
fn pushback_of(value: &[u8]) -> Option<Duration> {
    let ms: i64 = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
    u64::try_from(ms).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_in_every_spelling() {
        for name in ["UNAVAILABLE", "unavailable", "Unavailable", "14", " 14 "] {
            assert_eq!(Codes::parse([name]), Ok(Codes::UNAVAILABLE), "{name}");
        }
        let codes = Codes::parse(["resource-exhausted", "DEADLINE_EXCEEDED", "CANCELLED"]).unwrap();
        assert!(codes.contains(Code::ResourceExhausted));
        assert!(codes.contains(Code::DeadlineExceeded));
        assert!(codes.contains(Code::Cancelled));
        assert!(!codes.contains(Code::Unavailable));
        for bad in ["17", "-1", "unavailabl", "", "5xx"] {
            let e = Codes::parse([bad]).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn settings_fill_in_and_one_attempt_is_no_policy() {
        let service = RetrySettings {
            attempts: Some(4),
            backoff: Some(Duration::from_millis(10)),
            ..RetrySettings::default()
        };
        let method = RetrySettings {
            per_try_timeout: Some(Duration::from_secs(1)),
            ..RetrySettings::default()
        };
        let policy = method.or(service).policy().unwrap();
        assert_eq!(
            policy,
            RetryPolicy {
                codes: Codes::UNAVAILABLE,
                attempts: 4,
                backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(250),
                per_try_timeout: Some(Duration::from_secs(1)),
            }
        );
        let off = RetrySettings {
            attempts: Some(1),
            ..RetrySettings::default()
        };
        assert_eq!(off.or(service).policy(), None);
        // A cap below the first backoff is raised to it; attempts are bounded.
        let odd = RetrySettings {
            attempts: Some(99),
            backoff: Some(Duration::from_secs(1)),
            max_backoff: Some(Duration::from_millis(1)),
            ..RetrySettings::default()
        };
        let policy = odd.policy().unwrap();
        assert_eq!(policy.attempts, MAX_ATTEMPTS);
        assert_eq!(policy.max_backoff, Duration::from_secs(1));
    }

    #[test]
    fn pushback() {
        assert_eq!(pushback_of(b"0"), Some(Duration::ZERO));
        assert_eq!(pushback_of(b"250"), Some(Duration::from_millis(250)));
        assert_eq!(pushback_of(b"-1"), None);
        assert_eq!(pushback_of(b"soon"), None);
    }

    fn budget(ratio: f64) -> (Budget, UpstreamFamilies) {
        let families = UpstreamFamilies::default();
        let budget = Budget::new(ratio, MethodName("u".into()), &families);
        (budget, families)
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_is_a_share_of_the_window_with_a_floor() {
        let (budget, families) = budget(0.2);
        // A quiet upstream still gets the floor.
        let spent = (0..50).filter(|_| budget.spend(Code::Unavailable)).count();
        assert_eq!(spent, MIN_RETRIES as usize);
        assert_eq!(
            families
                .retries_refused
                .get_or_create(&UpstreamLabels {
                    upstream: MethodName("u".into())
                })
                .get(),
            40
        );
        // Ten seconds on, the window is empty again; 200 calls allow 40 retries.
        tokio::time::advance(Duration::from_secs(10)).await;
        for _ in 0..200 {
            budget.called();
        }
        let spent = (0..100).filter(|_| budget.spend(Code::Internal)).count();
        assert_eq!(spent, 40);
        // 5 s later, 100 more calls: the window holds 300 calls and 40 retries, 20 more.
        tokio::time::advance(Duration::from_secs(5)).await;
        for _ in 0..100 {
            budget.called();
        }
        assert_eq!(
            (0..100).filter(|_| budget.spend(Code::Internal)).count(),
            20
        );
        // At 20 s the calls and retries of 10 s have left the window; those of 15 s (100
        // calls, 20 retries) allow no more.
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!((0..100).filter(|_| budget.spend(Code::Internal)).count(), 0);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            (0..100).filter(|_| budget.spend(Code::Internal)).count(),
            10
        );
        let internal = families
            .retries
            .get_or_create(&RetryLabels {
                upstream: MethodName("u".into()),
                code: "Internal",
            })
            .get();
        assert_eq!(internal, 70);
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_back_off_and_stop() {
        let (budget, _) = budget(1.0);
        let policy = RetrySettings {
            attempts: Some(3),
            backoff: Some(Duration::from_millis(100)),
            max_backoff: Some(Duration::from_millis(150)),
            ..RetrySettings::default()
        }
        .policy()
        .unwrap();
        let mut attempts = Attempts::new(&policy, &budget, Duration::from_secs(10));
        let unavailable = Status::unavailable("down");
        let (previous, limit) = attempts.begin();
        assert_eq!((previous, limit), (None, Duration::from_secs(10)));
        let before = Instant::now();
        assert!(attempts.again(&unavailable).await);
        assert!(before.elapsed() <= Duration::from_millis(100));
        let (previous, _) = attempts.begin();
        assert_eq!(previous.unwrap(), "1");
        let before = Instant::now();
        assert!(attempts.again(&unavailable).await);
        assert!(before.elapsed() <= Duration::from_millis(150));
        assert_eq!(attempts.begin().0.unwrap(), "2");
        // Three attempts made: no fourth.
        assert!(!attempts.again(&unavailable).await);
        // Another code is not retried.
        let mut other = Attempts::new(&policy, &budget, Duration::from_secs(10));
        other.begin();
        assert!(!other.again(&Status::internal("bug")).await);
    }

    #[tokio::test(start_paused = true)]
    async fn pushback_and_the_deadline_decide_the_wait() {
        let (budget, _) = budget(1.0);
        let policy = RetrySettings {
            per_try_timeout: Some(Duration::from_millis(300)),
            ..RetrySettings::default()
        }
        .policy()
        .unwrap();
        let pushed = |ms: &str| {
            let mut status = Status::unavailable("busy");
            status.metadata_mut().insert(PUSHBACK, ms.parse().unwrap());
            status
        };
        let mut attempts = Attempts::new(&policy, &budget, Duration::from_secs(1));
        assert_eq!(attempts.begin().1, Duration::from_millis(300));
        let before = Instant::now();
        assert!(attempts.again(&pushed("400")).await);
        assert_eq!(before.elapsed(), Duration::from_millis(400));
        // 600 ms left: the per-try timeout still bounds the attempt.
        assert_eq!(attempts.begin().1, Duration::from_millis(300));
        // A pushback past the deadline, or a negative one, ends the call.
        assert!(!attempts.again(&pushed("700")).await);
        assert!(!attempts.again(&pushed("-1")).await);
        let mut late = Attempts::new(&policy, &budget, Duration::from_millis(100));
        late.begin();
        tokio::time::advance(Duration::from_millis(90)).await;
        assert_eq!(late.begin().1, Duration::from_millis(10));
    }
}

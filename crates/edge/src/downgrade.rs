//! Downgrade warnings: a protobuf message rendered as JSON instead of travelling as protobuf,
//! or a rendering that dropped fields the schema does not know.
//!
//! Every occurrence is counted (by the caller, in `protogate_downgrades_total`); the log is
//! rate-limited per (method, reason, client): the first occurrence at once, then at most one
//! line per interval carrying the number of occurrences it stands for. The limiter remembers
//! a bounded number of keys (least recently used evicted first, its pending count logged).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;
use transcode::{Findings, Format};

/// Why a message was downgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The client asked for JSON (by Accept, or by sending JSON without an Accept).
    JsonRequested,
    /// Accept named nothing we serve; JSON was served.
    AcceptFallback,
    /// The JSON or MessagePack rendering dropped fields unknown to the schema.
    UnknownFields,
    /// A JSON answer on a method whose JSON is deprecated by a `json_sunset` rule (it carries
    /// the `Deprecation` header).
    JsonDeprecated,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::JsonRequested => "json_requested",
            Reason::AcceptFallback => "accept_fallback",
            Reason::UnknownFields => "unknown_fields",
            Reason::JsonDeprecated => "json_deprecated",
        }
    }
}

/// Who asked, as the logs name it: the User-Agent and the name the client declared
/// (`x-client-id`, the configured `client_id_header` or its certificate's verified identity:
/// [`crate::migration::ClientId::declared`], decided once per request by the edge's account).
/// Shared strings: the limiter's key and a stream's state take a reference, not a copy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Client {
    pub user_agent: Arc<str>,
    pub client_id: Option<Arc<str>>,
}

impl Client {
    /// Header values are cut to a bounded length so the limiter's memory stays bounded.
    pub fn new(user_agent: Option<&str>, client_id: Option<&str>) -> Client {
        fn cut(s: &str) -> Arc<str> {
            let mut end = s.len().min(200);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Arc::from(&s[..end])
        }
        Client {
            user_agent: cut(user_agent.unwrap_or("-")),
            client_id: client_id.map(cut),
        }
    }
}

/// One downgrade of one message.
pub struct Downgrade<'a> {
    pub method: &'a Arc<str>,
    pub reason: Reason,
    pub format: Format,
    pub client: &'a Client,
    /// For `UnknownFields`: what was dropped.
    pub findings: Option<&'a Findings>,
}

#[derive(Hash, PartialEq, Eq)]
struct Key {
    method: Arc<str>,
    reason: Reason,
    client: Client,
}

struct Entry {
    last_logged: Instant,
    /// Occurrences since the last line.
    pending: u64,
    format: Format,
    dropped: String,
}

/// The rate-limited logger.
pub struct DowngradeLog {
    interval: Duration,
    /// std Mutex: held for a map lookup only, never across an await.
    seen: Mutex<LruCache<Key, Entry>>,
    /// The cap on lines per interval over every key, and its count.
    max_lines: u64,
    budget: Mutex<Budget>,
}

/// Lines written in the current window (one interval long), and lines held back in it.
struct Budget {
    window_start: Instant,
    lines: u64,
    suppressed: u64,
}

/// How many (method, reason, client) keys the limiter remembers.
pub const DEFAULT_CAPACITY: usize = 10_000;

impl DowngradeLog {
    /// `interval` zero logs every occurrence.
    pub fn new(interval: Duration, capacity: usize) -> DowngradeLog {
        let cap = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        DowngradeLog {
            interval,
            seen: Mutex::new(LruCache::new(cap)),
            max_lines: u64::MAX,
            budget: Mutex::new(Budget {
                window_start: Instant::now(),
                lines: 0,
                suppressed: 0,
            }),
        }
    }

    /// At most `max` lines per interval in all (a client that sends a new `x-client-id` with
    /// every request would otherwise get a line per request); the rest are counted and said
    /// by one summary line.
    pub fn with_max_lines(mut self, max: u64) -> DowngradeLog {
        self.max_lines = max;
        self
    }

    /// Writes one line if the window's budget allows; a new window first reports what the
    /// last one held back.
    fn emit(&self, line: Line<'_>) {
        if !self.interval.is_zero() {
            let Ok(mut budget) = self.budget.lock() else {
                return;
            };
            self.roll(&mut budget);
            if budget.lines >= self.max_lines {
                budget.suppressed += 1;
                return;
            }
            budget.lines += 1;
        }
        emit(&line);
    }

    /// Starts a new window when the interval has passed, saying what the last one held back.
    fn roll(&self, budget: &mut Budget) {
        if budget.window_start.elapsed() < self.interval {
            return;
        }
        if budget.suppressed > 0 {
            tracing::warn!(
                target: "protogate::downgrade",
                suppressed = budget.suppressed,
                max_lines = self.max_lines,
                interval = ?self.interval,
                "downgrade lines suppressed: {} more than {} in {:?} (the counter protogate_downgrades_total has them all)",
                budget.suppressed,
                self.max_lines,
                self.interval,
            );
        }
        *budget = Budget {
            window_start: Instant::now(),
            lines: 0,
            suppressed: 0,
        };
    }

    /// Records one occurrence, logging now if the key's interval allows.
    pub fn record(&self, d: &Downgrade<'_>) {
        let dropped = d.findings.map(describe_dropped).unwrap_or_default();
        if self.interval.is_zero() {
            emit(&Line {
                method: d.method,
                reason: d.reason,
                format: d.format,
                client: d.client,
                dropped: &dropped,
                occurrences: 1,
            });
            return;
        }
        let now = Instant::now();
        let key = Key {
            method: Arc::clone(d.method),
            reason: d.reason,
            client: d.client.clone(),
        };
        let mut evicted = None;
        let occurrences = {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            match seen.get_mut(&key) {
                None => {
                    let entry = Entry {
                        last_logged: now,
                        pending: 0,
                        format: d.format,
                        dropped: dropped.clone(),
                    };
                    evicted = seen.push(key, entry).filter(|(_, e)| e.pending > 0);
                    Some(1)
                }
                Some(e) if now.duration_since(e.last_logged) >= self.interval => {
                    let n = e.pending + 1;
                    e.pending = 0;
                    e.last_logged = now;
                    Some(n)
                }
                Some(e) => {
                    e.pending += 1;
                    e.format = d.format;
                    e.dropped.clone_from(&dropped);
                    None
                }
            }
        };
        if let Some(n) = occurrences {
            self.emit(Line {
                method: d.method,
                reason: d.reason,
                format: d.format,
                client: d.client,
                dropped: &dropped,
                occurrences: n,
            });
        }
        if let Some((k, e)) = evicted {
            self.emit(Line {
                method: &k.method,
                reason: k.reason,
                format: e.format,
                client: &k.client,
                dropped: &e.dropped,
                occurrences: e.pending,
            });
        }
    }

    /// Logs the pending occurrences of every key whose interval has passed. Called
    /// periodically so that a burst followed by silence is still reported.
    pub fn flush(&self) {
        let now = Instant::now();
        let mut due = Vec::new();
        if let Ok(mut seen) = self.seen.lock() {
            for (k, e) in seen.iter_mut() {
                if e.pending > 0 && now.duration_since(e.last_logged) >= self.interval {
                    due.push((
                        k.method.clone(),
                        k.reason,
                        e.format,
                        k.client.clone(),
                        e.dropped.clone(),
                        e.pending,
                    ));
                    e.pending = 0;
                    e.last_logged = now;
                }
            }
        }
        for (method, reason, format, client, dropped, n) in due {
            self.emit(Line {
                method: &method,
                reason,
                format,
                client: &client,
                dropped: &dropped,
                occurrences: n,
            });
        }
        // A window that held lines back is reported even when nothing more comes.
        if !self.interval.is_zero()
            && let Ok(mut budget) = self.budget.lock()
        {
            self.roll(&mut budget);
        }
    }
}

/// `#7 at items[0]; #9 at (root); Any type.googleapis.com/x.Y at details[0]`.
pub fn describe_dropped(f: &Findings) -> String {
    let mut parts: Vec<String> = f
        .unknown_fields
        .iter()
        .map(|u| {
            format!(
                "#{} at {}",
                u.number,
                if u.path.is_empty() { "(root)" } else { &u.path }
            )
        })
        .collect();
    parts.extend(f.unresolved_any.iter().map(|a| {
        format!(
            "Any {} at {}",
            a.type_url,
            if a.path.is_empty() { "(root)" } else { &a.path }
        )
    }));
    parts.join("; ")
}

/// One downgrade line: what was downgraded for whom, and how many occurrences it stands for.
struct Line<'a> {
    method: &'a str,
    reason: Reason,
    format: Format,
    client: &'a Client,
    /// What was dropped (unknown fields), or empty.
    dropped: &'a str,
    occurrences: u64,
}

fn emit(line: &Line<'_>) {
    let Line {
        method,
        reason,
        format,
        client,
        dropped,
        occurrences,
    } = *line;
    let client_id = client.client_id.as_deref().unwrap_or("-");
    let unknown_fields = (!dropped.is_empty()).then_some(dropped);
    let detail = unknown_fields
        .map(|d| format!("; dropped {d}"))
        .unwrap_or_default();
    tracing::warn!(
        target: "protogate::downgrade",
        method,
        reason = reason.as_str(),
        format = format.as_str(),
        // The client's words quoted and escaped (as &str fields and `{:?}`): a User-Agent
        // cannot pass for fields of the line.
        user_agent = &*client.user_agent,
        client_id,
        occurrences,
        unknown_fields,
        "downgrade: {method} answered as {} ({}) for client {:?} / {client_id:?}{detail}",
        format.as_str(),
        reason.as_str(),
        client.user_agent,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occurrence(log: &DowngradeLog, client: &str) {
        let client = Client::new(Some(client), None);
        log.record(&Downgrade {
            method: &Arc::from("a.B/C"),
            reason: Reason::JsonRequested,
            format: Format::Json,
            client: &client,
            findings: None,
        });
    }

    #[test]
    fn the_limiter_remembers_a_bounded_number_of_keys() {
        let log = DowngradeLog::new(Duration::from_secs(3600), 3);
        for i in 0..100 {
            occurrence(&log, &format!("client-{i}"));
            occurrence(&log, &format!("client-{i}"));
        }
        let seen = log.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        // The survivors are the most recent keys, each with one pending occurrence.
        assert!(
            seen.iter()
                .all(|(k, e)| &*k.client.user_agent >= "client-97" && e.pending == 1)
        );
    }

    #[test]
    fn flush_reports_pending_occurrences_once_the_interval_passed() {
        let log = DowngradeLog::new(Duration::from_millis(1), 10);
        occurrence(&log, "c");
        occurrence(&log, "c");
        std::thread::sleep(Duration::from_millis(5));
        log.flush();
        assert!(log.seen.lock().unwrap().iter().all(|(_, e)| e.pending == 0));
    }

    #[test]
    fn client_strings_are_bounded() {
        let c = Client::new(Some(&"é".repeat(500)), Some(&"x".repeat(1000)));
        assert!(c.user_agent.len() <= 200 && c.client_id.unwrap().len() <= 200);
    }
}

//! The migration report's clients as Prometheus series, bounded: for each method the
//! `export_clients` clients with the largest Space-Saving estimates get series of their own,
//! every other request is summed under [`OTHER`]. Read from the tracker when `/metrics` is
//! scraped: nothing is added per request.
//!
//! A series is a counter, so what it shows must not go down while its client keeps its place:
//! - A client that enters the exported set with a row it already had at the previous
//!   collection starts from 0 (the row's earlier requests were, and stay, in `other`); a row
//!   new since then starts with its whole count (those requests were never shown anywhere).
//! - A client that leaves the set (out of the top, or its row given to another client) takes
//!   its count into `other`; if it comes back, its series starts again from 0 — a counter
//!   reset, which `rate()` reads as such.
//!
//! So `other` never goes down, and at every collection the method's series sum to its exact
//! request count. The price: in the window where a client leaves, `sum(rate(…))` over the
//! family counts that client's requests twice (in its last value and in `other`'s rise).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::tracker::{Counts, FORMATS, REASONS, Tracker};
use crate::metrics::{ClientDowngrades, ClientRequests};
use crate::protocol::Protocol;

/// The clients exported per method unless `[migration] export_clients` says otherwise.
pub const DEFAULT_EXPORT_CLIENTS: usize = 50;

/// The `client` label of every request not in an exported client's series (a client that
/// calls itself `other` counts there too).
pub const OTHER: &str = "other";

/// Which clients get series of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSettings {
    /// Per method (0: every request under [`OTHER`]).
    pub clients: usize,
    /// Whether a client that named itself (no certificate, token or API key) may have a
    /// series; if not, its requests count under [`OTHER`].
    pub unverified: bool,
}

impl Default for ExportSettings {
    fn default() -> ExportSettings {
        ExportSettings {
            clients: DEFAULT_EXPORT_CLIENTS,
            unverified: true,
        }
    }
}

/// One method's series at one collection.
#[derive(Debug, Clone)]
pub struct MethodSeries {
    /// The method as the tracker holds it (`pkg.Service/Method`).
    pub method: Arc<str>,
    /// The exported clients and what their series show, in no order.
    pub clients: Vec<(Arc<str>, Counts)>,
    /// Every other request of the method.
    pub other: Counts,
}

/// What the previous collections exported, so the next one keeps the series counters: one
/// per tracker, kept as long as it is (the edge keeps both across reloads).
#[derive(Debug, Default)]
pub struct Exporter {
    methods: Mutex<HashMap<Arc<str>, Exported>>,
}

#[derive(Debug, Default)]
struct Exported {
    /// The tracker table's last row sequence at the previous collection: a row after it is
    /// new since.
    last_seq: u64,
    /// Client → (its row's sequence, what its series does not show of the row's counts).
    clients: HashMap<Arc<str>, (u64, Counts)>,
}

impl Exporter {
    /// Every tracked method's series now, with `settings`.
    pub fn collect(&self, tracker: &Tracker, settings: ExportSettings) -> Vec<MethodSeries> {
        let mut state = self.methods.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        tracker.each_method(
            |_| true,
            |name, st| {
                let prev = state.entry(Arc::from(name)).or_default();
                let mut rows: Vec<_> = st
                    .table
                    .rows()
                    .iter()
                    .filter(|r| (settings.unverified || r.unverified == 0) && &*r.name != OTHER)
                    .collect();
                if rows.len() > settings.clients {
                    let by_estimate =
                        |a: &&super::table::Row<Counts>, b: &&super::table::Row<Counts>| {
                            b.estimate
                                .cmp(&a.estimate)
                                .then_with(|| a.name.cmp(&b.name))
                        };
                    if settings.clients > 0 {
                        rows.select_nth_unstable_by(settings.clients - 1, by_estimate);
                    }
                    rows.truncate(settings.clients);
                }
                let mut clients = Vec::with_capacity(rows.len());
                let mut kept = HashMap::with_capacity(rows.len());
                let mut other = st.totals;
                for row in rows {
                    let base = match prev.clients.get(&row.name) {
                        Some(&(seq, base)) if seq == row.seq => base,
                        _ if row.seq > prev.last_seq => Counts::default(),
                        _ => row.counts,
                    };
                    let shown = row.counts.minus(&base);
                    other = other.minus(&shown);
                    kept.insert(Arc::clone(&row.name), (row.seq, base));
                    clients.push((Arc::clone(&row.name), shown));
                }
                prev.clients = kept;
                prev.last_seq = st.table.last_seq();
                out.push(MethodSeries {
                    method: Arc::from(name),
                    clients,
                    other,
                });
            },
        );
        out
    }
}

/// The series' samples as `/metrics` writes them (zero series left out).
pub fn samples(methods: &[MethodSeries]) -> (Vec<ClientRequests>, Vec<ClientDowngrades>) {
    let mut requests = Vec::new();
    let mut downgrades = Vec::new();
    let other: Arc<str> = Arc::from(OTHER);
    for m in methods {
        let each = m
            .clients
            .iter()
            .map(|(c, n)| (c, n))
            .chain([(&other, &m.other)]);
        for (client, counts) in each {
            for (protocol, mix) in Protocol::LABELS.iter().zip(&counts.by_protocol) {
                for (req, row) in FORMATS.iter().zip(&mix.0) {
                    for (resp, &count) in FORMATS.iter().zip(row) {
                        if count > 0 {
                            requests.push(ClientRequests {
                                client: client.clone(),
                                method: m.method.clone(),
                                request_format: req.as_str(),
                                response_format: resp.as_str(),
                                protocol,
                                count,
                            });
                        }
                    }
                }
            }
            for (reason, &count) in REASONS.iter().zip(&counts.downgrades) {
                if count > 0 {
                    downgrades.push(ClientDowngrades {
                        client: client.clone(),
                        method: m.method.clone(),
                        reason: reason.as_str(),
                        count,
                    });
                }
            }
        }
    }
    (requests, downgrades)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use transcode::Format;

    use super::*;
    use crate::migration::{ClientId, Finished};
    use crate::protocol::Protocol;

    fn call(tracker: &Tracker, client: &str, response: Format) {
        let headers = http::HeaderMap::new();
        let id = ClientId::verified(client, crate::migration::Source::ApiKey, &headers);
        let mut f = Finished::new(Format::Protobuf, response);
        f.protocol = Protocol::Http;
        tracker.record(&Arc::from("p.S/M"), &id, &f, SystemTime::UNIX_EPOCH);
    }

    fn series(s: &[MethodSeries], client: &str) -> Option<u64> {
        if client == OTHER {
            return Some(s[0].other.requests());
        }
        s[0].clients
            .iter()
            .find(|(c, _)| &**c == client)
            .map(|(_, c)| c.requests())
    }

    fn sum(s: &[MethodSeries]) -> u64 {
        s[0].other.requests() + s[0].clients.iter().map(|c| c.1.requests()).sum::<u64>()
    }

    #[test]
    fn the_top_clients_are_exported_and_other_never_goes_down() {
        let tracker = Tracker::new(100);
        let exporter = Exporter::default();
        let two = ExportSettings {
            clients: 2,
            unverified: true,
        };
        for (client, n) in [("a", 5), ("b", 3), ("c", 1)] {
            for _ in 0..n {
                call(&tracker, client, Format::Json);
            }
        }
        let s = exporter.collect(&tracker, two);
        assert_eq!(series(&s, "a"), Some(5));
        assert_eq!(series(&s, "b"), Some(3));
        assert_eq!(series(&s, "c"), None);
        assert_eq!(series(&s, OTHER), Some(1));
        // c overtakes b: b's count moves to other, c starts from 0 (its earlier request was
        // shown in other already).
        for _ in 0..4 {
            call(&tracker, "c", Format::Protobuf);
        }
        let s = exporter.collect(&tracker, two);
        assert_eq!(series(&s, "a"), Some(5));
        assert_eq!(series(&s, "b"), None);
        assert_eq!(series(&s, "c"), Some(0));
        assert_eq!(series(&s, OTHER), Some(1 + 4 + 3));
        assert_eq!(sum(&s), 13);
        // Requests after that go to c's series.
        call(&tracker, "c", Format::Json);
        let s = exporter.collect(&tracker, two);
        assert_eq!(series(&s, "c"), Some(1));
        assert_eq!(
            s[0].clients
                .iter()
                .find(|c| &*c.0 == "c")
                .unwrap()
                .1
                .json_answers(),
            1
        );
        assert_eq!(series(&s, OTHER), Some(8));
        assert_eq!(sum(&s), 14);
        // A client new since the last collection shows every request of its row.
        let s = {
            let wide = ExportSettings { clients: 10, ..two };
            for _ in 0..2 {
                call(&tracker, "d", Format::Json);
            }
            exporter.collect(&tracker, wide)
        };
        assert_eq!(series(&s, "d"), Some(2));
        assert_eq!(
            series(&s, "b"),
            Some(0),
            "b was tracked, not new: starts at 0"
        );
        assert_eq!(series(&s, OTHER), Some(8));
        assert_eq!(sum(&s), 16);
    }

    #[test]
    fn unverified_clients_and_a_client_called_other_count_under_other() {
        let tracker = Tracker::new(100);
        for name in ["self-declared", "self-declared", OTHER] {
            let mut headers = http::HeaderMap::new();
            headers.insert(crate::migration::X_CLIENT_ID, name.parse().unwrap());
            let id = ClientId::from_request(&headers, None, None);
            let f = Finished::new(Format::Json, Format::Json);
            tracker.record(&Arc::from("p.S/M"), &id, &f, SystemTime::UNIX_EPOCH);
        }
        call(&tracker, "verified", Format::Json);
        let exporter = Exporter::default();
        let s = exporter.collect(
            &tracker,
            ExportSettings {
                clients: 50,
                unverified: false,
            },
        );
        assert_eq!(s[0].clients.len(), 1);
        assert_eq!(series(&s, "verified"), Some(1));
        assert_eq!(series(&s, OTHER), Some(3));
        let s = exporter.collect(&tracker, ExportSettings::default());
        assert_eq!(
            series(&s, "self-declared"),
            Some(0),
            "tracked before: from 0"
        );
        assert_eq!(series(&s, OTHER), Some(3));
        let none = exporter.collect(
            &tracker,
            ExportSettings {
                clients: 0,
                unverified: true,
            },
        );
        assert!(none[0].clients.is_empty());
        assert_eq!(series(&none, OTHER), Some(4));
    }

    #[test]
    fn ten_thousand_clients_stay_within_the_bound() {
        let tracker = Tracker::new(20_000);
        for i in 0..10_000 {
            call(&tracker, &format!("client-{i}"), Format::Json);
        }
        for _ in 0..3 {
            call(&tracker, "heavy", Format::Json);
        }
        let s = Exporter::default().collect(&tracker, ExportSettings::default());
        assert_eq!(s[0].clients.len(), DEFAULT_EXPORT_CLIENTS);
        assert_eq!(series(&s, "heavy"), Some(3));
        assert_eq!(sum(&s), 10_003);
    }
}

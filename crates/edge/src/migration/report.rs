//! The migration report: plain data copied out of the tracker (each method's lock held only
//! while its figures are copied), with the sunset policy's state per method. The page and
//! the JSON document render it (`page.rs`, `json.rs`); `protogate report` reads the JSON.

use std::time::{Duration, SystemTime};

use super::dates::Brownout;
use super::series::MINUTES;
use super::sunset::{Phase, SunsetPolicy, dotted, glob_match};
use super::tracker::{Cost, Counts, Tracker};

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct Report {
    pub generated_at: SystemTime,
    pub max_clients: usize,
    /// (method, client) rows in use, over every method.
    pub tracked_clients: usize,
    /// JSON-heavy first: by JSON answers, then requests, then name.
    pub methods: Vec<MethodReport>,
    /// Where the counts come from.
    pub origin: Origin,
}

/// Where a report's counts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// One gateway's own (its instance: the pod name or host name, when known).
    Instance(Option<String>),
    /// These replicas' reports, merged (`protogate report --admin-url` more than once).
    Replicas(Vec<String>),
    /// Prometheus's per-client series summed over the replicas: their current values, or
    /// their increase over `range` (extrapolated: about).
    Prometheus { url: String, range: Option<String> },
}

/// One method.
#[derive(Debug, Clone)]
pub struct MethodReport {
    /// `pkg.Service.Method`.
    pub method: String,
    /// Every request of the method (exact).
    pub totals: Counts,
    /// Tracked clients, by JSON answers, then requests, then name.
    pub clients: Vec<ClientReport>,
    /// Requests no row holds: clients never tracked, and rows given up.
    pub other: Counts,
    /// Rows this method gave up (to another client or method).
    pub evicted_clients: u64,
    /// Unknown-field drops, most frequent first.
    pub unknown_fields: Vec<FieldReport>,
    /// Drops not itemised (beyond the per-method bound).
    pub unknown_fields_other: u64,
    pub json_share: ShareSeries,
    pub cost: Cost,
    /// The rule that governs the method, if any.
    pub sunset: Option<SunsetReport>,
}

/// One tracked client of a method.
#[derive(Debug, Clone)]
pub struct ClientReport {
    pub name: String,
    /// Exact, since the client got its row.
    pub counts: Counts,
    /// Requests the row inherited when it replaced another (Space-Saving's error bound): the
    /// client may have sent up to this many more before it got the row.
    pub count_error: u64,
    /// When the client got its row (`None` where the source does not say: Prometheus).
    pub first_seen: Option<SystemTime>,
    pub last_seen: Option<SystemTime>,
    /// At most 5, most frequent first.
    pub versions: Vec<(String, u64)>,
    /// Requests whose name the client gave itself (not verified by a certificate, a token or
    /// an API key): the row is marked unverified when any.
    pub unverified: u64,
}

/// Drops of one unknown field (by path and number).
#[derive(Debug, Clone)]
pub struct FieldReport {
    /// The message that held it, indices elided (`items[]`; empty for the root).
    pub path: String,
    pub number: u32,
    pub drops: u64,
    pub last_seen: SystemTime,
    /// The clients that got answers without it (at most 3), most frequent first.
    pub clients: Vec<(String, u64)>,
}

/// Requests and JSON answers per minute over the last 24 h.
#[derive(Debug, Clone)]
pub struct ShareSeries {
    /// The start of the first minute.
    pub start: SystemTime,
    pub step: Duration,
    /// (requests, JSON answers), oldest first; 1,440 of them.
    pub points: Vec<(u32, u32)>,
}

/// The policy's state for one method.
#[derive(Debug, Clone)]
pub struct SunsetReport {
    pub selector: String,
    pub phase: Phase,
    pub deprecation: Option<SystemTime>,
    pub sunset: Option<SystemTime>,
    pub link: Option<String>,
    pub brownouts: Vec<Brownout>,
    /// The brownout in progress or the next one.
    pub next_brownout: Option<Brownout>,
    pub exempt_clients: Vec<String>,
}

impl ShareSeries {
    pub(super) fn empty(now: SystemTime) -> ShareSeries {
        ShareSeries {
            start: now,
            step: Duration::from_secs(60),
            points: vec![(0, 0); MINUTES],
        }
    }

    /// (requests, JSON answers) over the whole window.
    pub fn totals(&self) -> (u64, u64) {
        self.points.iter().fold((0, 0), |(r, j), &(pr, pj)| {
            (r + u64::from(pr), j + u64::from(pj))
        })
    }

    /// The JSON share of each group of `minutes` minutes, oldest first (`None` for a group
    /// without requests).
    pub fn shares(&self, minutes: usize) -> Vec<Option<f64>> {
        self.points
            .chunks(minutes.max(1))
            .map(|c| {
                let (r, j) = c.iter().fold((0u64, 0u64), |(r, j), &(pr, pj)| {
                    (r + u64::from(pr), j + u64::from(pj))
                });
                (r > 0).then(|| j as f64 / r as f64)
            })
            .collect()
    }
}

impl MethodReport {
    /// JSON answers per request, `None` before any request.
    pub fn json_share(&self) -> Option<f64> {
        let r = self.totals.requests();
        (r > 0).then(|| self.totals.json_answers() as f64 / r as f64)
    }
}

impl ClientReport {
    pub fn json_share(&self) -> Option<f64> {
        let r = self.counts.requests();
        (r > 0).then(|| self.counts.json_answers() as f64 / r as f64)
    }
}

impl Tracker {
    /// The report at `now` of every method (or those `method_glob` matches, a selector as in
    /// `json_sunset`), with `policy`'s state.
    pub fn report(
        &self,
        policy: &SunsetPolicy,
        method_glob: Option<&str>,
        now: SystemTime,
    ) -> Report {
        self.report_of(policy, method_glob, now, Origin::Instance(None))
    }

    /// [`Tracker::report`] naming where it comes from.
    pub fn report_of(
        &self,
        policy: &SunsetPolicy,
        method_glob: Option<&str>,
        now: SystemTime,
        origin: Origin,
    ) -> Report {
        let mut methods = Vec::new();
        let glob = method_glob.map(|g| g.replace('/', "."));
        self.each_method(
            |name| {
                glob.as_deref()
                    .is_none_or(|g| glob_match(g.as_bytes(), name.as_bytes()))
            },
            |name, st| {
                let mut clients: Vec<ClientReport> = st
                    .table
                    .rows()
                    .iter()
                    .map(|r| ClientReport {
                        name: r.name.to_string(),
                        counts: r.counts,
                        count_error: r.error,
                        first_seen: Some(r.first_seen),
                        last_seen: Some(r.last_seen),
                        versions: r.versions.sorted(),
                        unverified: r.unverified,
                    })
                    .collect();
                sort_clients(&mut clients);
                let mut unknown_fields: Vec<FieldReport> = st
                    .drops
                    .entries
                    .iter()
                    .map(|e| FieldReport {
                        path: e.path.to_string(),
                        number: e.number,
                        drops: e.drops,
                        last_seen: e.last_seen,
                        clients: e.clients.sorted(),
                    })
                    .collect();
                sort_fields(&mut unknown_fields);
                let json_share = match &st.series {
                    Some(s) => {
                        let (start, points) = s.window(now);
                        ShareSeries {
                            start,
                            step: Duration::from_secs(60),
                            points,
                        }
                    }
                    None => ShareSeries::empty(now),
                };
                let sunset = sunset_report(policy, name, now);
                methods.push(MethodReport {
                    method: dotted(name).into_owned(),
                    totals: st.totals,
                    clients,
                    other: st.other,
                    evicted_clients: st.evicted,
                    unknown_fields,
                    unknown_fields_other: st.drops.other,
                    json_share,
                    cost: st.cost,
                    sunset,
                });
            },
        );
        sort_methods(&mut methods);
        Report {
            generated_at: now,
            max_clients: self.max_clients(),
            tracked_clients: self.tracked_clients(),
            methods,
            origin,
        }
    }
}

/// Methods JSON-heavy first: by JSON answers, then requests, then name.
pub(super) fn sort_methods(methods: &mut [MethodReport]) {
    methods.sort_by(|a, b| {
        b.totals
            .json_answers()
            .cmp(&a.totals.json_answers())
            .then_with(|| b.totals.requests().cmp(&a.totals.requests()))
            .then_with(|| a.method.cmp(&b.method))
    });
}

/// Clients JSON-heavy first: by JSON answers, then requests, then name.
pub(super) fn sort_clients(clients: &mut [ClientReport]) {
    clients.sort_by(|a, b| {
        b.counts
            .json_answers()
            .cmp(&a.counts.json_answers())
            .then_with(|| b.counts.requests().cmp(&a.counts.requests()))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Unknown fields most dropped first, then by path and number.
pub(super) fn sort_fields(fields: &mut [FieldReport]) {
    fields.sort_by(|a, b| {
        b.drops
            .cmp(&a.drops)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.number.cmp(&b.number))
    });
}

/// The policy's state for `method` at `now`, if a rule governs it.
pub fn sunset_report(policy: &SunsetPolicy, method: &str, now: SystemTime) -> Option<SunsetReport> {
    policy.rule_for(method).map(|rule| {
        let spec = rule.spec();
        SunsetReport {
            selector: spec.selector.clone(),
            phase: rule.phase(now),
            deprecation: spec.deprecation,
            sunset: spec.sunset,
            link: spec.link.clone(),
            brownouts: spec.brownouts.clone(),
            next_brownout: rule.next_brownout(now).cloned(),
            exempt_clients: spec.exempt_clients.clone(),
        }
    })
}

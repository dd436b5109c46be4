//! Reports of several replicas as one ([`Report::merge`]): what `protogate report` prints for
//! a fleet. Counts add (each replica's are exact, so their sum is); the client tables are
//! Space-Saving summaries and merge as such (Agarwal et al., "Mergeable summaries", 2012): a
//! client's counts add over the replicas that track it, and for each replica that does not
//! but has untracked requests, the client may hide among them — up to that replica's smallest
//! tracked estimate (a client above it would have taken that row) — which is added to its
//! `count_error`; the 24 h series add minute by minute, aligned on time; first seen is the
//! earliest, last seen the latest; conversion costs add, so per-answer figures come out
//! weighted by each replica's answers; the sunset state is the newest report's.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::report::{
    ClientReport, FieldReport, MethodReport, Origin, Report, ShareSeries, sort_clients,
    sort_fields, sort_methods,
};
use super::tracker::{ConversionTotals, Cost, Counts};

impl Report {
    /// The fleet's report from its replicas' (none: an empty report at the epoch).
    /// `sources` name the replicas, for [`Origin::Replicas`].
    pub fn merge(reports: Vec<Report>, sources: Vec<String>) -> Report {
        let generated_at = reports
            .iter()
            .map(|r| r.generated_at)
            .max()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let max_clients = reports.iter().map(|r| r.max_clients).sum();
        let tracked_clients = reports.iter().map(|r| r.tracked_clients).sum();
        // The newest report first: its sunset state and series window win.
        let mut reports = reports;
        reports.sort_by_key(|r| std::cmp::Reverse(r.generated_at));
        let mut by_method: Vec<(String, Vec<MethodReport>)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for report in reports {
            for m in report.methods {
                let at = *index.entry(m.method.clone()).or_insert_with(|| {
                    by_method.push((m.method.clone(), Vec::new()));
                    by_method.len() - 1
                });
                by_method[at].1.push(m);
            }
        }
        let mut methods: Vec<MethodReport> = by_method
            .into_iter()
            .map(|(_, ms)| merge_method(ms))
            .collect();
        sort_methods(&mut methods);
        Report {
            generated_at,
            max_clients,
            tracked_clients,
            methods,
            origin: Origin::Replicas(sources),
        }
    }
}

/// One method's reports (newest first), as one.
fn merge_method(reports: Vec<MethodReport>) -> MethodReport {
    let mut totals = Counts::default();
    let mut other = Counts::default();
    let mut cost = Cost::default();
    let (mut evicted, mut fields_other) = (0, 0);
    for m in &reports {
        totals.merge(&m.totals);
        other.merge(&m.other);
        add_cost(&mut cost, &m.cost);
        evicted += m.evicted_clients;
        fields_other += m.unknown_fields_other;
    }
    let clients = merge_clients(&reports);
    let unknown_fields = merge_fields(&reports);
    let json_share = merge_series(&reports);
    let first = &reports[0];
    MethodReport {
        method: first.method.clone(),
        totals,
        clients,
        other,
        evicted_clients: evicted,
        unknown_fields,
        unknown_fields_other: fields_other,
        json_share,
        cost,
        sunset: first.sunset.clone(),
    }
}

fn merge_clients(reports: &[MethodReport]) -> Vec<ClientReport> {
    // What a client absent from a replica's table may have sent there: nothing if the
    // replica counted every request in a row, else up to its smallest tracked estimate (at
    // most its untracked requests).
    let hidden: Vec<u64> = reports
        .iter()
        .map(|m| {
            let untracked = m.other.requests();
            let smallest = m
                .clients
                .iter()
                .map(|c| c.counts.requests() + c.count_error)
                .min()
                .unwrap_or(untracked);
            smallest.min(untracked)
        })
        .collect();
    let mut merged: Vec<(ClientReport, Vec<bool>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, m) in reports.iter().enumerate() {
        for c in &m.clients {
            match index.get(c.name.as_str()) {
                Some(&at) => {
                    let (into, seen) = &mut merged[at];
                    seen[i] = true;
                    into.counts.merge(&c.counts);
                    into.count_error += c.count_error;
                    into.unverified += c.unverified;
                    into.first_seen = earliest(into.first_seen, c.first_seen);
                    into.last_seen = latest(into.last_seen, c.last_seen);
                    into.versions = top(&into.versions, &c.versions, 5);
                }
                None => {
                    let mut seen = vec![false; reports.len()];
                    seen[i] = true;
                    index.insert(&c.name, merged.len());
                    merged.push((c.clone(), seen));
                }
            }
        }
    }
    let mut clients: Vec<ClientReport> = merged
        .into_iter()
        .map(|(mut c, seen)| {
            c.count_error += seen
                .iter()
                .zip(&hidden)
                .filter(|(seen, _)| !**seen)
                .map(|(_, h)| h)
                .sum::<u64>();
            c
        })
        .collect();
    sort_clients(&mut clients);
    clients
}

fn merge_fields(reports: &[MethodReport]) -> Vec<FieldReport> {
    let mut out: Vec<FieldReport> = Vec::new();
    for f in reports.iter().flat_map(|m| &m.unknown_fields) {
        match out
            .iter_mut()
            .find(|o| o.path == f.path && o.number == f.number)
        {
            Some(o) => {
                o.drops += f.drops;
                o.last_seen = o.last_seen.max(f.last_seen);
                o.clients = top(&o.clients, &f.clients, 3);
            }
            None => out.push(f.clone()),
        }
    }
    sort_fields(&mut out);
    out
}

/// The series added minute by minute over the newest report's window (minutes outside it
/// are left out).
fn merge_series(reports: &[MethodReport]) -> ShareSeries {
    let window = &reports[0].json_share;
    let mut points = vec![(0u32, 0u32); window.points.len()];
    let step = window.step.as_secs().max(1);
    for m in reports {
        let s = &m.json_share;
        if s.step != window.step {
            continue;
        }
        for (i, &(r, j)) in s.points.iter().enumerate() {
            let at = s.start + Duration::from_secs(step * i as u64);
            let Ok(from_start) = at.duration_since(window.start) else {
                continue;
            };
            if let Some(p) = points.get_mut((from_start.as_secs() / step) as usize) {
                p.0 = p.0.saturating_add(r);
                p.1 = p.1.saturating_add(j);
            }
        }
    }
    ShareSeries {
        start: window.start,
        step: window.step,
        points,
    }
}

fn add_cost(into: &mut Cost, c: &Cost) {
    let add = |a: &mut ConversionTotals, b: &ConversionTotals| {
        a.count += b.count;
        a.protobuf_bytes += b.protobuf_bytes;
        a.format_bytes += b.format_bytes;
        a.nanos += b.nanos;
    };
    for (a, b) in into.answers.iter_mut().zip(&c.answers) {
        add(a, b);
    }
    for (a, b) in into.requests.iter_mut().zip(&c.requests) {
        add(a, b);
    }
}

/// Two top lists as one: counts of a key add, the `k` largest kept (largest first, then by
/// key).
fn top(a: &[(String, u64)], b: &[(String, u64)], k: usize) -> Vec<(String, u64)> {
    let mut all: Vec<(String, u64)> = a.to_vec();
    for (key, n) in b {
        match all.iter_mut().find(|(k, _)| k == key) {
            Some(item) => item.1 += n,
            None => all.push((key.clone(), *n)),
        }
    }
    all.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    all.truncate(k);
    all
}

fn earliest(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn latest(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    a.max(b)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use transcode::Format;

    use super::*;
    use crate::migration::fixture::{scripted, t};
    use crate::migration::{ClientId, Finished, Source, SunsetPolicy, Tracker};

    fn record(tracker: &Tracker, client: &str, response: Format, at: &str) {
        let headers = http::HeaderMap::new();
        let id = ClientId::verified(client, Source::ApiKey, &headers);
        tracker.record(
            &Arc::from("p.S/M"),
            &id,
            &Finished::new(Format::Protobuf, response),
            t(at),
        );
    }

    #[test]
    fn counts_add_and_times_span_the_replicas() {
        let (a, policy) = scripted();
        let (b, _) = scripted();
        let now = t("2027-03-01T20:00:00Z");
        let one = a.report(&policy, None, now);
        let merged = Report::merge(vec![one.clone(), b.report(&policy, None, now)], Vec::new());
        assert_eq!(merged.methods.len(), one.methods.len());
        for (m, single) in merged.methods.iter().zip(&one.methods) {
            assert_eq!(m.method, single.method);
            assert_eq!(m.totals.requests(), 2 * single.totals.requests());
            assert_eq!(m.totals.json_answers(), 2 * single.totals.json_answers());
            assert_eq!(m.json_share(), single.json_share(), "the same mix twice");
            assert_eq!(m.json_share.totals().0, 2 * single.json_share.totals().0);
            assert_eq!(m.clients.len(), single.clients.len());
            for (c, s) in m.clients.iter().zip(&single.clients) {
                assert_eq!(
                    (&*c.name, c.counts.requests()),
                    (&*s.name, 2 * s.counts.requests())
                );
                assert_eq!(c.count_error, 0, "both replicas track every client");
            }
            let ratio = |m: &MethodReport| m.cost.answers(Format::Json).micros_each();
            assert_eq!(ratio(m), ratio(single), "weighted: the same cost each");
        }
    }

    #[test]
    fn a_client_one_replica_did_not_track_may_hide_in_its_other() {
        // Replica a keeps one row: x's (5 requests).
        let a = Tracker::new(1);
        for _ in 0..5 {
            record(&a, "x", Format::Json, "2027-03-01T10:00:00Z");
        }
        let b = Tracker::new(10);
        for _ in 0..2 {
            record(&b, "y", Format::Protobuf, "2027-03-01T11:00:00Z");
        }
        record(&b, "x", Format::Json, "2027-03-01T09:00:00Z");
        let now = t("2027-03-01T12:00:00Z");
        let policy = SunsetPolicy::default();
        let merged = Report::merge(
            vec![a.report(&policy, None, now), b.report(&policy, None, now)],
            Vec::new(),
        );
        let m = &merged.methods[0];
        let x = m.clients.iter().find(|c| c.name == "x").unwrap();
        assert_eq!(x.counts.requests(), 6);
        assert_eq!(x.first_seen, Some(t("2027-03-01T09:00:00Z")));
        assert_eq!(x.last_seen, Some(t("2027-03-01T10:00:00Z")));
        let y = m.clients.iter().find(|c| c.name == "y").unwrap();
        assert_eq!(
            y.count_error, 0,
            "a counted every request in a row: y sent none there"
        );
        assert_eq!(m.totals.requests(), 8);
        // w takes x's row on a (Space-Saving: estimate 6, error 5) and x's 5 requests go to
        // a's other: y may hide there, up to min(a's smallest estimate 6, a's untracked 5).
        record(&a, "w", Format::Json, "2027-03-01T10:30:00Z");
        let merged = Report::merge(
            vec![a.report(&policy, None, now), b.report(&policy, None, now)],
            Vec::new(),
        );
        let m = &merged.methods[0];
        let y = m.clients.iter().find(|c| c.name == "y").unwrap();
        assert_eq!(y.count_error, 5);
        let w = m.clients.iter().find(|c| c.name == "w").unwrap();
        assert_eq!(
            (w.counts.requests(), w.count_error),
            (1, 5),
            "b tracked every request"
        );
        assert_eq!(m.totals.requests(), 9);
        assert_eq!(m.other.requests(), 5);
    }
}

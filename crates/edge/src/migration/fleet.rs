//! The fleet's report from Prometheus: the per-client series every replica exports
//! (`export.rs`), summed over the replicas by Prometheus's HTTP API, read into a [`Report`]
//! that the page, the JSON document and `protogate report` render as they render one
//! gateway's. Pure: the caller asks the [`queries`] (`/api/v1/query`) and hands the answers
//! to [`parse_vector`] and [`from_prometheus`].
//!
//! Without a range the queries sum the counters' current values: each replica's counts
//! since it started, exact, as its own page counts (a replica restarted has lost its share,
//! as its page has). With a range (`24h`) they sum `increase()` over it, which Prometheus
//! extrapolates to the window's edges: figures are about, not exact, and rounded.
//!
//! What Prometheus does not hold is not made up: clients' first and last times, versions,
//! unknown-field drops, conversion costs and the 24 h share series are empty, and a
//! client's JSON refusals are counted per method only.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use serde_json::Value;

use super::export::OTHER;
use super::report::{
    ClientReport, MethodReport, Origin, Report, ShareSeries, sort_clients, sort_methods,
};
use super::sunset::{RefusalReason, dotted};
use super::tracker::{Counts, FORMATS, REASONS, format_index};
use crate::protocol::Protocol;

/// One series of an instant vector: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The three PromQL queries, in the order [`from_prometheus`] takes their answers: requests,
/// downgrades, JSON refusals; over `range` (a PromQL duration such as `24h`) when given.
pub fn queries(range: Option<&str>) -> [String; 3] {
    let of = |metric: &str, by: &str| match range {
        Some(r) => format!("sum by ({by}) (increase({metric}[{r}]))"),
        None => format!("sum by ({by}) ({metric})"),
    };
    [
        of(
            "protogate_client_requests_total",
            "method, client, request_format, response_format, protocol",
        ),
        of(
            "protogate_client_downgrades_total",
            "method, client, reason",
        ),
        of("protogate_json_refused_total", "method, reason"),
    ]
}

/// Whether `range` is a PromQL duration (`90s`, `24h`, `1h30m`, `7d`): digits and units.
pub fn is_range(range: &str) -> bool {
    let mut rest = range;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h", "d", "w", "y"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

/// An `/api/v1/query` answer's instant vector.
pub fn parse_vector(body: &[u8]) -> Result<Vec<Sample>, String> {
    let doc: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    if doc.get("status").and_then(Value::as_str) != Some("success") {
        let why = doc
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no \"status\": \"success\"");
        return Err(format!("the query failed: {why}"));
    }
    let data = doc.get("data").ok_or("no \"data\"")?;
    match data.get("resultType").and_then(Value::as_str) {
        Some("vector") => {}
        other => return Err(format!("expected a vector, got {other:?}")),
    }
    let result = data
        .get("result")
        .and_then(Value::as_array)
        .ok_or("no \"result\" list")?;
    result
        .iter()
        .map(|s| {
            let labels = s
                .get("metric")
                .and_then(Value::as_object)
                .ok_or("a sample without \"metric\"")?
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect();
            let value = s
                .get("value")
                .and_then(|v| v.get(1))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or("a sample without a number")?;
            Ok(Sample { labels, value })
        })
        .collect()
}

/// The report of the samples of [`queries`]' three answers, at `now`, from `origin`.
pub fn from_prometheus(
    requests: &[Sample],
    downgrades: &[Sample],
    refused: &[Sample],
    now: SystemTime,
    origin: Origin,
) -> Report {
    #[derive(Default)]
    struct Method {
        clients: HashMap<String, Counts>,
        other: Counts,
        refused: [u64; 2],
    }
    let mut methods: BTreeMap<String, Method> = BTreeMap::new();
    let label = |s: &Sample, key: &str| s.labels.get(key).cloned().unwrap_or_default();
    let count = |s: &Sample| s.value.round() as u64;
    fn counts_of<'m>(methods: &'m mut BTreeMap<String, Method>, s: &Sample) -> &'m mut Counts {
        let label = |key: &str| s.labels.get(key).cloned().unwrap_or_default();
        let m = methods
            .entry(dotted(&label("method")).into_owned())
            .or_default();
        match label("client") {
            c if c == OTHER => &mut m.other,
            c => m.clients.entry(c).or_default(),
        }
    }
    for s in requests {
        let (Some(p), Some(req), Some(resp)) = (
            Protocol::LABELS
                .iter()
                .position(|p| **p == label(s, "protocol")),
            format_named(&label(s, "request_format")),
            format_named(&label(s, "response_format")),
        ) else {
            continue;
        };
        counts_of(&mut methods, s).by_protocol[p].0[req][resp] += count(s);
    }
    for s in downgrades {
        if let Some(r) = REASONS
            .iter()
            .position(|r| r.as_str() == label(s, "reason"))
        {
            counts_of(&mut methods, s).downgrades[r] += count(s);
        }
    }
    for s in refused {
        let name = dotted(&label(s, "method")).into_owned();
        if let Some(r) = RefusalReason::ALL
            .iter()
            .position(|r| r.as_str() == label(s, "reason"))
            && let Some(m) = methods.get_mut(&name)
        {
            m.refused[r] += count(s);
        }
    }
    let mut tracked = 0;
    let mut reports: Vec<MethodReport> = methods
        .into_iter()
        .map(|(name, m)| {
            let mut totals = m.other;
            let mut clients: Vec<ClientReport> = m
                .clients
                .into_iter()
                .map(|(name, counts)| {
                    totals.merge(&counts);
                    ClientReport {
                        name,
                        counts,
                        count_error: 0,
                        first_seen: None,
                        last_seen: None,
                        versions: Vec::new(),
                        unverified: 0,
                    }
                })
                .collect();
            totals.refused = m.refused;
            tracked += clients.len();
            sort_clients(&mut clients);
            MethodReport {
                method: name,
                totals,
                clients,
                other: m.other,
                evicted_clients: 0,
                unknown_fields: Vec::new(),
                unknown_fields_other: 0,
                json_share: ShareSeries::empty(now),
                cost: Default::default(),
                sunset: None,
            }
        })
        .collect();
    sort_methods(&mut reports);
    Report {
        generated_at: now,
        max_clients: 0,
        tracked_clients: tracked,
        methods: reports,
        origin,
    }
}

fn format_named(name: &str) -> Option<usize> {
    FORMATS
        .iter()
        .find(|f| f.as_str() == name)
        .map(|&f| format_index(f))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use transcode::Format;

    use super::*;
    use crate::migration::fixture::t;
    use crate::migration::{ClientId, ExportSettings, Finished, Source, Tracker};

    /// The samples Prometheus would give for `series`, summed as the query sums them.
    fn vector(text: &str, metric: &str) -> Vec<Sample> {
        let mut out: Vec<Sample> = Vec::new();
        for line in text.lines().filter(|l| l.starts_with(metric)) {
            let (head, value) = line.rsplit_once(' ').unwrap();
            let inner = &head[head.find('{').unwrap() + 1..head.len() - 1];
            let labels = inner
                .split("\",")
                .map(|kv| {
                    let (k, v) = kv.split_once("=\"").unwrap();
                    (k.to_owned(), v.trim_end_matches('"').to_owned())
                })
                .collect();
            out.push(Sample {
                labels,
                value: value.parse().unwrap(),
            });
        }
        out
    }

    #[test]
    fn the_exported_series_read_back_as_the_report() {
        let tracker = Tracker::new(100);
        let headers = http::HeaderMap::new();
        let m: Arc<str> = Arc::from("p.S/M");
        for (client, req, resp, n) in [
            ("web", Format::Json, Format::Json, 5),
            ("ios", Format::Protobuf, Format::Protobuf, 3),
            ("ios", Format::Protobuf, Format::Json, 1),
        ] {
            let id = ClientId::verified(client, Source::ApiKey, &headers);
            for _ in 0..n {
                tracker.record(
                    &m,
                    &id,
                    &Finished::new(req, resp),
                    t("2027-03-01T10:00:00Z"),
                );
            }
        }
        let export = crate::migration::Exporter::default().collect(
            &tracker,
            ExportSettings {
                clients: 1,
                unverified: true,
            },
        );
        let (client_requests, client_downgrades) = crate::migration::samples(&export);
        let text = crate::metrics::Metrics::new().render_with(&crate::metrics::Scraped {
            client_requests: &client_requests,
            client_downgrades: &client_downgrades,
            ..Default::default()
        });
        let report = from_prometheus(
            &vector(&text, "protogate_client_requests_total{"),
            &vector(&text, "protogate_client_downgrades_total{"),
            &[],
            t("2027-03-01T12:00:00Z"),
            Origin::Prometheus {
                url: "http://p".into(),
                range: None,
            },
        );
        let local = tracker.report(&Default::default(), None, t("2027-03-01T12:00:00Z"));
        assert_eq!(report.methods.len(), 1);
        let (fleet, local) = (&report.methods[0], &local.methods[0]);
        assert_eq!(fleet.method, "p.S.M");
        assert_eq!(fleet.totals.mix(), local.totals.mix());
        assert_eq!(fleet.totals.protocols(), local.totals.protocols());
        assert_eq!(fleet.clients.len(), 1, "export_clients = 1: web");
        assert_eq!(fleet.clients[0].name, "web");
        assert_eq!(fleet.clients[0].counts.requests(), 5);
        assert_eq!(fleet.other.requests(), 4, "ios under other");
        assert_eq!(fleet.json_share(), local.json_share());
    }

    #[test]
    fn answers_and_ranges_are_checked() {
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"method":"p.S/M","client":"a"},"value":[1700000000.1,"12"]}]}}"#;
        let v = parse_vector(ok).unwrap();
        assert_eq!(v[0].value, 12.0);
        assert_eq!(v[0].labels["client"], "a");
        let failed = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            parse_vector(failed).unwrap_err(),
            "the query failed: parse error"
        );
        assert!(parse_vector(b"<html>").unwrap_err().contains("not JSON"));
        for good in ["24h", "90s", "1h30m", "7d"] {
            assert!(is_range(good), "{good}");
        }
        for bad in ["", "24", "h", "1x", "5m]"] {
            assert!(!is_range(bad), "{bad}");
        }
        assert_eq!(
            queries(Some("24h"))[0],
            "sum by (method, client, request_format, response_format, protocol) \
             (increase(protogate_client_requests_total[24h]))"
        );
    }
}

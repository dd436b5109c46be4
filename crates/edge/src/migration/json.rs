//! The report as a JSON document: [`render_json`] for `GET /admin/migration.json` and
//! `protogate report`.
//!
//! # The JSON document (`version` 1)
//! Field names are stable; numbers are numbers; times are RFC 3339 strings in UTC; a share
//! or ratio with nothing to divide by is `null`. Object keys come out sorted.
//! ```text
//! { "version": 1, "generated_at", "max_clients", "tracked_clients",
//!   "source": { "instance": "pod-7" | null } | { "replicas": [URL, …] }
//!             | { "prometheus": URL, "range": "24h" | null },
//!   "methods": [ {                                  // JSON-heavy first
//!     "method": "demo.shop.v1.Shop.GetOrder",
//!     "requests", "json_answers", "json_share",     // exact, since the gateway started
//!     "format_mix": { "<request format>": { "<response format>": n } },   // json, msgpack, protobuf
//!     "format_mix_by_protocol": { "<protocol>": { same as format_mix } },  // per client protocol
//!     "downgrades": { "json_requested", "accept_fallback", "unknown_fields", "json_deprecated" },
//!     "json_refused": { "sunset", "brownout" }, "exempt",
//!     "protocols": { "http", "grpc", "grpc-web", "connect" },   // requests by client protocol
//!     "clients": [ { "name", "versions": [ { "version", "requests" } ],
//!                    "requests", "json_answers", "json_share", "format_mix", "downgrades",
//!                    "json_refused", "exempt", "protocols", "first_seen", "last_seen",   // null: unknown
//!                    "count_error", "verified", "unverified_requests" } ],
//!     "other": { "requests", "json_answers", "json_share", "format_mix", "downgrades",
//!                "json_refused", "exempt", "protocols", "evicted_clients" },
//!     "unknown_fields": [ { "path", "number", "drops", "last_seen",
//!                           "clients": [ { "name", "drops" } ] } ],
//!     "unknown_fields_other",
//!     "json_share_24h": { "start", "step_seconds": 60, "requests": [1440 numbers],
//!                         "json_answers": [1440 numbers] },
//!     "cost": { "answers": { "<format>": { "count", "protobuf_bytes", "bytes", "transcode_ns",
//!                                          "bytes_ratio", "us_each" } },
//!               "requests": { same }, "summary": "JSON answers on this method are …" },
//!     "sunset": null or { "selector", "phase": "before|deprecated|brownout|sunset",
//!                         "deprecation", "sunset", "link", "brownouts": [ { "start", "end" } ],
//!                         "next_brownout", "exempt_clients" } } ] }
//! ```

use serde_json::{Map, Value, json};
use transcode::Format;

use super::dates::rfc3339;
use super::report::{ClientReport, MethodReport, Origin, Report, SunsetReport};
use super::sunset::RefusalReason;
use super::tracker::{ConversionTotals, Cost, Counts, FORMATS, FormatMix, REASONS};
use crate::protocol::Protocol;

/// The report as the JSON document described above.
pub fn render_json(report: &Report) -> String {
    let methods: Vec<Value> = report.methods.iter().map(method_json).collect();
    let source = match &report.origin {
        Origin::Instance(name) => json!({ "instance": name }),
        Origin::Replicas(urls) => json!({ "replicas": urls }),
        Origin::Prometheus { url, range } => json!({ "prometheus": url, "range": range }),
    };
    let doc = json!({
        "version": 1,
        "source": source,
        "generated_at": rfc3339(report.generated_at),
        "max_clients": report.max_clients,
        "tracked_clients": report.tracked_clients,
        "methods": methods,
    });
    doc.to_string()
}

fn method_json(m: &MethodReport) -> Value {
    let mut v = counts_json(&m.totals);
    let clients: Vec<Value> = m.clients.iter().map(client_json).collect();
    let mut other = counts_json(&m.other);
    other.insert("evicted_clients".into(), json!(m.evicted_clients));
    let fields: Vec<Value> = m
        .unknown_fields
        .iter()
        .map(|f| {
            json!({
                "path": f.path,
                "number": f.number,
                "drops": f.drops,
                "last_seen": rfc3339(f.last_seen),
                "clients": f.clients.iter().map(|(name, n)| json!({"name": name, "drops": n})).collect::<Vec<_>>(),
            })
        })
        .collect();
    v.insert("method".into(), json!(m.method));
    v.insert("clients".into(), Value::Array(clients));
    v.insert("other".into(), Value::Object(other));
    v.insert("unknown_fields".into(), Value::Array(fields));
    v.insert("unknown_fields_other".into(), json!(m.unknown_fields_other));
    v.insert(
        "json_share_24h".into(),
        json!({
            "start": rfc3339(m.json_share.start),
            "step_seconds": m.json_share.step.as_secs(),
            "requests": m.json_share.points.iter().map(|p| p.0).collect::<Vec<_>>(),
            "json_answers": m.json_share.points.iter().map(|p| p.1).collect::<Vec<_>>(),
        }),
    );
    v.insert("cost".into(), cost_json(&m.cost));
    v.insert(
        "sunset".into(),
        m.sunset.as_ref().map_or(Value::Null, sunset_json),
    );
    Value::Object(v)
}

fn client_json(c: &ClientReport) -> Value {
    let mut v = counts_json(&c.counts);
    v.insert("name".into(), json!(c.name));
    v.insert(
        "versions".into(),
        c.versions
            .iter()
            .map(|(version, n)| json!({"version": version, "requests": n}))
            .collect(),
    );
    v.insert("first_seen".into(), json!(c.first_seen.map(rfc3339)));
    v.insert("last_seen".into(), json!(c.last_seen.map(rfc3339)));
    v.insert("count_error".into(), json!(c.count_error));
    v.insert("verified".into(), json!(c.unverified == 0));
    v.insert("unverified_requests".into(), json!(c.unverified));
    Value::Object(v)
}

fn mix_json(mix: &FormatMix) -> Value {
    FORMATS
        .iter()
        .map(|&req| {
            let row: Map<String, Value> = FORMATS
                .iter()
                .map(|&resp| (resp.as_str().to_string(), json!(mix.get(req, resp))))
                .collect();
            (req.as_str().to_string(), Value::Object(row))
        })
        .collect::<Map<String, Value>>()
        .into()
}

fn counts_json(c: &Counts) -> Map<String, Value> {
    let by_protocol: Map<String, Value> = Protocol::LABELS
        .iter()
        .zip(&c.by_protocol)
        .map(|(name, mix)| ((*name).to_string(), mix_json(mix)))
        .collect();
    let downgrades: Map<String, Value> = REASONS
        .iter()
        .map(|&r| (r.as_str().to_string(), json!(c.downgrades(r))))
        .collect();
    let refused: Map<String, Value> = RefusalReason::ALL
        .iter()
        .map(|&r| (r.as_str().to_string(), json!(c.refused(r))))
        .collect();
    let requests = c.requests();
    let mut m = Map::new();
    m.insert("requests".into(), json!(requests));
    m.insert("json_answers".into(), json!(c.json_answers()));
    m.insert(
        "json_share".into(),
        json!((requests > 0).then(|| c.json_answers() as f64 / requests as f64)),
    );
    m.insert("format_mix".into(), mix_json(&c.mix()));
    m.insert("format_mix_by_protocol".into(), Value::Object(by_protocol));
    m.insert("downgrades".into(), Value::Object(downgrades));
    m.insert("json_refused".into(), Value::Object(refused));
    m.insert("exempt".into(), json!(c.exempt));
    let protocols: Map<String, Value> = Protocol::LABELS
        .iter()
        .zip(c.protocols())
        .map(|(name, n)| ((*name).to_string(), json!(n)))
        .collect();
    m.insert("protocols".into(), Value::Object(protocols));
    m
}

fn cost_json(cost: &Cost) -> Value {
    let side = |get: &dyn Fn(Format) -> ConversionTotals| -> Value {
        FORMATS
            .iter()
            .map(|&f| {
                let t = get(f);
                (
                    f.as_str().to_string(),
                    json!({
                        "count": t.count,
                        "protobuf_bytes": t.protobuf_bytes,
                        "bytes": t.format_bytes,
                        "transcode_ns": t.nanos,
                        "bytes_ratio": t.bytes_ratio(),
                        "us_each": t.micros_each(),
                    }),
                )
            })
            .collect::<Map<String, Value>>()
            .into()
    };
    json!({
        "answers": side(&|f| *cost.answers(f)),
        "requests": side(&|f| *cost.requests(f)),
        "summary": cost.summary(),
    })
}

fn sunset_json(s: &SunsetReport) -> Value {
    let window =
        |b: &super::dates::Brownout| json!({"start": rfc3339(b.start), "end": rfc3339(b.end())});
    json!({
        "selector": s.selector,
        "phase": s.phase.as_str(),
        "deprecation": s.deprecation.map(rfc3339),
        "sunset": s.sunset.map(rfc3339),
        "link": s.link,
        "brownouts": s.brownouts.iter().map(window).collect::<Vec<_>>(),
        "next_brownout": s.next_brownout.as_ref().map(window),
        "exempt_clients": s.exempt_clients,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migration::fixture::{scripted, t};
    use crate::migration::{SunsetPolicy, Tracker};

    #[test]
    fn the_json_document_has_its_documented_shape() {
        let (tracker, policy) = scripted();
        let now = t("2027-03-01T20:00:00Z");
        let doc: Value =
            serde_json::from_str(&render_json(&tracker.report(&policy, None, now))).unwrap();
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["generated_at"], "2027-03-01T20:00:00Z");
        assert_eq!(doc["max_clients"], 100);
        assert_eq!(doc["tracked_clients"], 4);
        let m = &doc["methods"][0];
        assert_eq!(m["method"], "demo.shop.v1.Shop.GetOrder");
        assert_eq!(m["requests"], 300);
        assert_eq!(m["json_answers"], 150);
        assert_eq!(m["json_share"], 0.5);
        assert_eq!(m["format_mix"]["json"]["json"], 150);
        assert_eq!(m["format_mix"]["json"]["protobuf"], 50);
        assert_eq!(m["format_mix"]["protobuf"]["protobuf"], 100);
        assert_eq!(m["downgrades"]["json_deprecated"], 0);
        assert_eq!(m["json_refused"]["sunset"], 0);
        let clients = m["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 3);
        assert_eq!(clients[0]["name"], "<script>alert(1)</script>");
        assert_eq!(clients[0]["versions"][0]["version"], "1.0\"><b>");
        assert_eq!(clients[0]["versions"][0]["requests"], 100);
        assert_eq!(clients[0]["first_seen"], "2027-03-01T00:00:00Z");
        assert_eq!(clients[0]["last_seen"], "2027-03-01T19:48:00Z");
        assert_eq!(clients[0]["count_error"], 0);
        assert_eq!(clients[1]["name"], "web");
        assert_eq!(clients[1]["json_answers"], 50);
        assert_eq!(clients[2]["json_share"], 0.0);
        assert_eq!(m["other"]["requests"], 0);
        assert_eq!(m["other"]["evicted_clients"], 0);
        assert_eq!(m["unknown_fields"][0]["path"], "items[]");
        assert_eq!(m["unknown_fields"][0]["number"], 7);
        assert_eq!(m["unknown_fields"][0]["drops"], 150);
        assert_eq!(
            m["unknown_fields"][0]["clients"][0]["name"],
            "<script>alert(1)</script>"
        );
        let series = &m["json_share_24h"];
        assert_eq!(series["step_seconds"], 60);
        assert_eq!(series["requests"].as_array().unwrap().len(), 1440);
        let sum = |k: &str| {
            series[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>()
        };
        assert_eq!((sum("requests"), sum("json_answers")), (300, 150));
        assert_eq!(series["start"], "2027-02-28T20:01:00Z");
        let cost = &m["cost"]["answers"]["json"];
        assert_eq!(cost["count"], 150);
        assert_eq!(cost["bytes_ratio"], 2.5);
        assert_eq!(cost["us_each"], 12.0);
        assert_eq!(m["cost"]["answers"]["msgpack"]["bytes_ratio"], Value::Null);
        assert!(
            m["cost"]["summary"]
                .as_str()
                .unwrap()
                .starts_with("JSON answers on this method are 2.5×")
        );
        let s = &m["sunset"];
        assert_eq!(s["phase"], "deprecated");
        assert_eq!(s["deprecation"], "2027-01-01T00:00:00Z");
        assert_eq!(s["brownouts"][0]["end"], "2027-05-01T11:00:00Z");
        assert_eq!(s["next_brownout"]["start"], "2027-05-01T10:00:00Z");
        assert_eq!(s["exempt_clients"][0], "legacy-billing");
        let list = &doc["methods"][1];
        assert_eq!(list["method"], "demo.shop.v1.Shop.ListOrders");
        assert_eq!(list["sunset"], Value::Null);
        assert_eq!(list["json_share"], 0.0);
        // The glob filter.
        let only: Value = serde_json::from_str(&render_json(&tracker.report(
            &policy,
            Some("*.ListOrders"),
            now,
        )))
        .unwrap();
        assert_eq!(only["methods"].as_array().unwrap().len(), 1);
        assert_eq!(only["methods"][0]["method"], "demo.shop.v1.Shop.ListOrders");
    }

    #[test]
    fn an_empty_report_renders() {
        let tracker = Tracker::new(10);
        let report = tracker.report(&SunsetPolicy::default(), None, t("2027-03-01T20:00:00Z"));
        let doc: Value = serde_json::from_str(&render_json(&report)).unwrap();
        assert_eq!(doc["methods"], json!([]));
    }
}

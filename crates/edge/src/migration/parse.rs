//! The JSON document read back into a [`Report`]: [`parse_json`], the inverse of
//! [`render_json`](super::render_json), so reports from several replicas can be merged
//! (`merge.rs`) and rendered again by the same code. Every field the renderer writes is read;
//! a document from an older gateway without `format_mix_by_protocol` counts its format mix
//! under `http` (its protocol split is then only what `protocols` says). An error names the
//! field at fault.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::dates::{Brownout, parse_time};
use super::report::{
    ClientReport, FieldReport, MethodReport, Origin, Report, ShareSeries, SunsetReport,
};
use super::sunset::{Phase, RefusalReason};
use super::tracker::{ConversionTotals, Cost, Counts, FORMATS, FormatMix, REASONS, format_index};
use crate::protocol::Protocol;

/// A migration report from its JSON document (`version` 1).
pub fn parse_json(text: &[u8]) -> Result<Report, String> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    match doc.get("version").and_then(Value::as_u64) {
        Some(1) => {}
        Some(v) => return Err(format!("version {v}; this protogate reads version 1")),
        None => return Err("not a migration report (no \"version\": 1)".into()),
    }
    let methods = array(&doc, "methods")?
        .iter()
        .map(method)
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Report {
        generated_at: time(&doc, "generated_at")?,
        max_clients: u(&doc, "max_clients")? as usize,
        tracked_clients: u(&doc, "tracked_clients")? as usize,
        methods,
        origin: origin(doc.get("source")),
    })
}

/// Where the document says its counts come from (a document without: one gateway's).
fn origin(v: Option<&Value>) -> Origin {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    match v {
        Some(v) if v.get("replicas").is_some() => Origin::Replicas(
            v["replicas"]
                .as_array()
                .map(|a| a.iter().filter_map(text).collect())
                .unwrap_or_default(),
        ),
        Some(v) if v.get("prometheus").is_some() => Origin::Prometheus {
            url: text(&v["prometheus"]).unwrap_or_default(),
            range: v.get("range").and_then(text),
        },
        Some(v) => Origin::Instance(v.get("instance").and_then(text)),
        None => Origin::Instance(None),
    }
}

fn method(v: &Value) -> Result<MethodReport, String> {
    let name = str_of(v, "method")?;
    let within = |e: String| format!("method {name}: {e}");
    let other = v
        .get("other")
        .ok_or("no \"other\"")
        .map_err(|e| within(e.into()))?;
    Ok(MethodReport {
        method: name.to_owned(),
        totals: counts(v).map_err(within)?,
        clients: array(v, "clients")
            .and_then(|cs| cs.iter().map(client).collect())
            .map_err(within)?,
        other: counts(other).map_err(|e| within(format!("other: {e}")))?,
        evicted_clients: u(other, "evicted_clients").map_err(within)?,
        unknown_fields: array(v, "unknown_fields")
            .and_then(|fs| fs.iter().map(field).collect())
            .map_err(within)?,
        unknown_fields_other: u(v, "unknown_fields_other").map_err(within)?,
        json_share: series(get(v, "json_share_24h").map_err(within)?).map_err(within)?,
        cost: cost(get(v, "cost").map_err(within)?).map_err(within)?,
        sunset: match v.get("sunset") {
            None | Some(Value::Null) => None,
            Some(s) => Some(sunset(s).map_err(within)?),
        },
    })
}

fn client(v: &Value) -> Result<ClientReport, String> {
    let name = str_of(v, "name")?;
    let within = |e: String| format!("client {name:?}: {e}");
    let versions = array(v, "versions")
        .and_then(|vs| {
            vs.iter()
                .map(|x| Ok((str_of(x, "version")?.to_owned(), u(x, "requests")?)))
                .collect()
        })
        .map_err(within)?;
    Ok(ClientReport {
        name: name.to_owned(),
        counts: counts(v).map_err(within)?,
        count_error: u(v, "count_error").map_err(within)?,
        first_seen: optional_time(v, "first_seen").map_err(within)?,
        last_seen: optional_time(v, "last_seen").map_err(within)?,
        versions,
        unverified: v
            .get("unverified_requests")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

fn counts(v: &Value) -> Result<Counts, String> {
    let mut c = Counts::default();
    match v.get("format_mix_by_protocol") {
        Some(by) => {
            for (i, name) in Protocol::LABELS.iter().enumerate() {
                c.by_protocol[i] = mix(get(by, name)?)
                    .map_err(|e| format!("format_mix_by_protocol.{name}: {e}"))?;
            }
        }
        None => c.by_protocol[Protocol::Http.index()] = mix(get(v, "format_mix")?)?,
    }
    let downgrades = get(v, "downgrades")?;
    for (i, r) in REASONS.iter().enumerate() {
        c.downgrades[i] = u(downgrades, r.as_str()).map_err(|e| format!("downgrades: {e}"))?;
    }
    let refused = get(v, "json_refused")?;
    for (i, r) in RefusalReason::ALL.iter().enumerate() {
        c.refused[i] = u(refused, r.as_str()).map_err(|e| format!("json_refused: {e}"))?;
    }
    c.exempt = u(v, "exempt")?;
    Ok(c)
}

fn mix(v: &Value) -> Result<FormatMix, String> {
    let mut m = FormatMix::default();
    for req in FORMATS {
        let row = get(v, req.as_str())?;
        for resp in FORMATS {
            m.0[format_index(req)][format_index(resp)] =
                u(row, resp.as_str()).map_err(|e| format!("{}: {e}", req.as_str()))?;
        }
    }
    Ok(m)
}

fn field(v: &Value) -> Result<FieldReport, String> {
    Ok(FieldReport {
        path: str_of(v, "path")?.to_owned(),
        number: u(v, "number")? as u32,
        drops: u(v, "drops")?,
        last_seen: time(v, "last_seen")?,
        clients: array(v, "clients")?
            .iter()
            .map(|c| Ok((str_of(c, "name")?.to_owned(), u(c, "drops")?)))
            .collect::<Result<_, String>>()?,
    })
}

fn series(v: &Value) -> Result<ShareSeries, String> {
    let numbers = |key: &str| -> Result<Vec<u32>, String> {
        array(v, key)?
            .iter()
            .map(|n| {
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("json_share_24h.{key}: not a count"))
            })
            .collect()
    };
    let requests = numbers("requests")?;
    let json = numbers("json_answers")?;
    if requests.len() != json.len() {
        return Err("json_share_24h: requests and json_answers differ in length".into());
    }
    Ok(ShareSeries {
        start: time(v, "start")?,
        step: Duration::from_secs(u(v, "step_seconds")?.max(1)),
        points: requests.into_iter().zip(json).collect(),
    })
}

fn cost(v: &Value) -> Result<Cost, String> {
    let side = |key: &str| -> Result<[ConversionTotals; 3], String> {
        let s = get(v, key)?;
        let mut out = [ConversionTotals::default(); 3];
        for f in FORMATS {
            let t = get(s, f.as_str()).map_err(|e| format!("cost.{key}: {e}"))?;
            out[format_index(f)] = ConversionTotals {
                count: u(t, "count")?,
                protobuf_bytes: u(t, "protobuf_bytes")?,
                format_bytes: u(t, "bytes")?,
                nanos: u(t, "transcode_ns")?,
            };
        }
        Ok(out)
    };
    Ok(Cost {
        answers: side("answers")?,
        requests: side("requests")?,
    })
}

fn sunset(v: &Value) -> Result<SunsetReport, String> {
    let window = |w: &Value| -> Result<Brownout, String> {
        let start = time(w, "start")?;
        let end = time(w, "end")?;
        Ok(Brownout {
            start,
            length: end.duration_since(start).unwrap_or_default(),
        })
    };
    let next_brownout = match v.get("next_brownout") {
        None | Some(Value::Null) => None,
        Some(w) => Some(window(w)?),
    };
    let phase = match str_of(v, "phase")? {
        "before" => Phase::Before,
        "deprecated" => Phase::Deprecated,
        "brownout" => Phase::Brownout {
            until: next_brownout
                .as_ref()
                .map_or(SystemTime::UNIX_EPOCH, Brownout::end),
        },
        "sunset" => Phase::Sunset,
        other => return Err(format!("sunset.phase {other:?} is not a phase")),
    };
    Ok(SunsetReport {
        selector: str_of(v, "selector")?.to_owned(),
        phase,
        deprecation: optional_time(v, "deprecation")?,
        sunset: optional_time(v, "sunset")?,
        link: v.get("link").and_then(Value::as_str).map(str::to_owned),
        brownouts: array(v, "brownouts")?
            .iter()
            .map(window)
            .collect::<Result<_, _>>()?,
        next_brownout,
        exempt_clients: array(v, "exempt_clients")?
            .iter()
            .map(|c| {
                c.as_str()
                    .map(str::to_owned)
                    .ok_or("exempt_clients: not a name".into())
            })
            .collect::<Result<_, String>>()?,
    })
}

fn get<'v>(v: &'v Value, key: &str) -> Result<&'v Value, String> {
    v.get(key).ok_or_else(|| format!("no {key:?}"))
}

fn u(v: &Value, key: &str) -> Result<u64, String> {
    get(v, key)?
        .as_u64()
        .ok_or_else(|| format!("{key:?} is not a count"))
}

fn str_of<'v>(v: &'v Value, key: &str) -> Result<&'v str, String> {
    get(v, key)?
        .as_str()
        .ok_or_else(|| format!("{key:?} is not a string"))
}

fn array<'v>(v: &'v Value, key: &str) -> Result<&'v Vec<Value>, String> {
    get(v, key)?
        .as_array()
        .ok_or_else(|| format!("{key:?} is not a list"))
}

fn time(v: &Value, key: &str) -> Result<SystemTime, String> {
    parse_time(str_of(v, key)?).map_err(|e| format!("{key}: {e}"))
}

fn optional_time(v: &Value, key: &str) -> Result<Option<SystemTime>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => time(v, key).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migration::fixture::{scripted, t};
    use crate::migration::render_json;

    #[test]
    fn a_rendered_report_reads_back_as_itself() {
        let (tracker, policy) = scripted();
        for now in [t("2027-03-01T20:00:00Z"), t("2027-05-01T10:30:00Z")] {
            let report = tracker.report(&policy, None, now);
            let text = render_json(&report);
            let back = parse_json(text.as_bytes()).unwrap();
            assert_eq!(render_json(&back), text, "a round trip changes nothing");
            assert_eq!(back.methods[0].totals, report.methods[0].totals);
        }
    }

    #[test]
    fn errors_name_the_field() {
        assert!(parse_json(b"{").unwrap_err().starts_with("not JSON"));
        assert_eq!(
            parse_json(br#"{"version": 2}"#).unwrap_err(),
            "version 2; this protogate reads version 1"
        );
        let (tracker, policy) = scripted();
        let text = render_json(&tracker.report(&policy, None, t("2027-03-01T20:00:00Z")));
        let broken = text.replacen("\"count_error\":0", "\"count_error\":-1", 1);
        let e = parse_json(broken.as_bytes()).unwrap_err();
        assert!(
            e.starts_with("method demo.shop.v1.Shop.GetOrder: client ")
                && e.contains("count_error"),
            "{e}"
        );
    }
}

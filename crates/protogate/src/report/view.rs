//! `--format table`: the report as plain text — an overview of every method, then per method
//! its JSON share (and by hour over the last 24 h), format mix, downgrades, top JSON clients,
//! the fields clients do not receive, the cost of JSON and the sunset policy.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::SystemTime;

use edge::migration::{percent, thousands};

use super::clean;
use super::document::{Client, Cost, Document, Method, Series, Sunset};
use super::table::{Align, Table};

/// JSON clients listed per method (`--format json` has them all).
const TOP_CLIENTS: usize = 10;

/// Appends formatted text to a `String` (which cannot fail).
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

const FORMATS: [(&str, &str); 3] = [
    ("json", "JSON"),
    ("msgpack", "MessagePack"),
    ("protobuf", "Protobuf"),
];

pub(super) fn table_report(doc: &Document, url: &str, glob: Option<&str>) -> String {
    let now = doc
        .generated_at
        .as_deref()
        .and_then(|t| edge::migration::parse_time(t).ok());
    let mut out = String::new();
    let mut head = format!("Migration report from {}", clean(url));
    if let Some(t) = &doc.generated_at {
        let _ = write!(head, ", generated {}", timestamp(t));
    }
    match (doc.tracked_clients, doc.max_clients) {
        // From Prometheus: no rows, only the clients with series of their own.
        (Some(tracked), Some(0)) => {
            let _ = write!(head, "; {} clients with series", thousands(tracked));
        }
        (Some(tracked), Some(max)) => {
            let _ = write!(
                head,
                "; {} of {} client rows in use",
                thousands(tracked),
                thousands(max)
            );
        }
        _ => {}
    }
    w!(out, "{head}");
    if doc.methods.is_empty() {
        match glob {
            Some(g) => w!(out, "\nNo method matching {} has had a request.", clean(g)),
            None => w!(out, "\nNo requests yet."),
        }
        return finish(out);
    }
    out.push('\n');
    let mut overview = Table::new(&[
        ("method", Align::Left),
        ("requests", Align::Right),
        ("JSON", Align::Right),
        ("share", Align::Right),
        ("sunset", Align::Left),
    ]);
    for m in &doc.methods {
        overview.row(vec![
            clean(&m.method),
            thousands(m.requests),
            thousands(m.json_answers),
            percent(share(m.json_share, m.json_answers, m.requests)),
            phase_word(m.sunset.as_ref()).to_string(),
        ]);
    }
    overview.render(&mut out, 0);
    for m in &doc.methods {
        out.push('\n');
        method(&mut out, m, now);
    }
    finish(out)
}

fn method(out: &mut String, m: &Method, now: Option<SystemTime>) {
    let mut head = format!(
        "{}: {} request{}, {} JSON",
        clean(&m.method),
        thousands(m.requests),
        if m.requests == 1 { "" } else { "s" },
        percent(share(m.json_share, m.json_answers, m.requests)),
    );
    let day = m.json_share_24h.as_ref().map(|s| {
        (
            s.requests.iter().sum::<u64>(),
            s.json_answers.iter().sum::<u64>(),
        )
    });
    if let Some((r, j)) = day
        && r > 0
    {
        let _ = write!(head, " ({} over the last 24 h)", percent(share(None, j, r)));
    }
    w!(out, "{head}");
    if let Some(line) = m.json_share_24h.as_ref().and_then(sparkline) {
        w!(
            out,
            "  JSON share by hour, last 24 h: {line} (now at the right)"
        );
    }

    w!(
        out,
        "  Format mix (requests by the format sent and answered):"
    );
    let mut mix = Table::new(&[
        ("sent \\ answered", Align::Left),
        ("JSON", Align::Right),
        ("MessagePack", Align::Right),
        ("Protobuf", Align::Right),
        ("all", Align::Right),
    ]);
    let get = |req: &str, resp: &str| {
        m.format_mix
            .get(req)
            .and_then(|row| row.get(resp))
            .copied()
            .unwrap_or(0)
    };
    for (req, label) in FORMATS {
        let mut row = vec![label.to_string()];
        row.extend(FORMATS.iter().map(|(resp, _)| thousands(get(req, resp))));
        row.push(thousands(
            FORMATS.iter().map(|(resp, _)| get(req, resp)).sum(),
        ));
        mix.row(row);
    }
    let mut all = vec!["all".to_string()];
    all.extend(
        FORMATS
            .iter()
            .map(|(resp, _)| thousands(FORMATS.iter().map(|(req, _)| get(req, resp)).sum())),
    );
    all.push(thousands(m.requests));
    mix.row(all);
    mix.render(out, 4);

    let downgrades: Vec<String> = m
        .downgrades
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{} {}", clean(r), thousands(*n)))
        .collect();
    if !downgrades.is_empty() {
        w!(out, "  Downgrades: {}", downgrades.join(", "));
    }
    let protocols: Vec<String> = m
        .protocols
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(p, n)| format!("{} {}", clean(p), thousands(*n)))
        .collect();
    if !protocols.is_empty() {
        w!(out, "  Protocols: {}", protocols.join(", "));
    }

    clients(out, m, now);
    unknown_fields(out, m, now);

    match cost_sentence(m.cost.as_ref()) {
        Some(s) => w!(out, "  Cost: {}", clean(&s)),
        None => w!(out, "  Cost: no JSON answer measured yet."),
    }
    sunset(out, m, now);
}

fn clients(out: &mut String, m: &Method, now: Option<SystemTime>) {
    let json: Vec<&Client> = m.clients.iter().filter(|c| c.json_answers > 0).collect();
    let rest = m.clients.len() - json.len();
    let mut title = format!(
        "  Top JSON clients ({} of {} tracked clients got JSON",
        thousands(json.len() as u64),
        thousands(m.clients.len() as u64)
    );
    if json.len() > TOP_CLIENTS {
        let _ = write!(
            title,
            "; the first {TOP_CLIENTS} here, all with --format json"
        );
    }
    title.push_str("):");
    w!(out, "{title}");
    let mut table = Table::new(&[
        ("client", Align::Left),
        ("versions", Align::Left),
        ("requests", Align::Right),
        ("JSON", Align::Right),
        ("share", Align::Right),
        ("last seen", Align::Left),
    ]);
    for c in json.iter().take(TOP_CLIENTS) {
        let versions: Vec<String> = c.versions.iter().map(|v| clean(&v.version)).collect();
        table.row(vec![
            clean(&c.name),
            if versions.is_empty() {
                "-".into()
            } else {
                versions.join(", ")
            },
            thousands(c.requests),
            thousands(c.json_answers),
            percent(share(c.json_share, c.json_answers, c.requests)),
            c.last_seen
                .as_deref()
                .map_or(String::new(), |t| when(t, now)),
        ]);
    }
    if let Some(o) = &m.other {
        table.row(vec![
            "(other)".into(),
            String::new(),
            thousands(o.requests),
            thousands(o.json_answers),
            percent(share(o.json_share, o.json_answers, o.requests)),
            String::new(),
        ]);
    }
    table.render(out, 4);
    if let Some(o) = m.other.as_ref().filter(|o| o.requests > 0) {
        let mut note = "    (other) counts the clients without a row".to_string();
        if o.evicted_clients > 0 {
            let _ = write!(note, "; {} rows given up", thousands(o.evicted_clients));
        }
        w!(out, "{note}.");
    }
    if rest > 0 {
        w!(
            out,
            "    {} more tracked {} got no JSON.",
            thousands(rest as u64),
            if rest == 1 { "client" } else { "clients" }
        );
    }
}

fn unknown_fields(out: &mut String, m: &Method, now: Option<SystemTime>) {
    if m.unknown_fields.is_empty() && m.unknown_fields_other == 0 {
        w!(
            out,
            "  Fields clients do not receive: none (JSON and MessagePack answers carried everything)."
        );
        return;
    }
    w!(
        out,
        "  Fields JSON and MessagePack clients do not receive (unknown to the gateway's schema):"
    );
    let mut table = Table::new(&[
        ("field", Align::Left),
        ("in message", Align::Left),
        ("drops", Align::Right),
        ("clients", Align::Left),
        ("last seen", Align::Left),
    ]);
    for f in &m.unknown_fields {
        let clients: Vec<String> = f
            .clients
            .iter()
            .map(|c| format!("{} ({})", clean(&c.name), thousands(c.drops)))
            .collect();
        table.row(vec![
            format!("#{}", f.number),
            if f.path.is_empty() {
                "(root)".into()
            } else {
                clean(&f.path)
            },
            thousands(f.drops),
            clients.join(", "),
            f.last_seen
                .as_deref()
                .map_or(String::new(), |t| when(t, now)),
        ]);
    }
    if m.unknown_fields_other > 0 {
        table.row(vec![
            String::new(),
            "(other fields)".into(),
            thousands(m.unknown_fields_other),
            String::new(),
            String::new(),
        ]);
    }
    table.render(out, 4);
}

/// The document's sentence (the gateway words it: `Cost::summary`).
fn cost_sentence(cost: Option<&Cost>) -> Option<String> {
    cost?.summary.clone()
}

fn sunset(out: &mut String, m: &Method, now: Option<SystemTime>) {
    let Some(s) = &m.sunset else {
        w!(
            out,
            "  Sunset: none (no json_sunset rule: JSON is served as always)."
        );
        return;
    };
    let date = |t: &Option<String>| t.as_deref().map(|t| when(t, now));
    let state = match (s.phase.as_str(), date(&s.deprecation), date(&s.sunset)) {
        ("before", Some(d), Some(e)) => {
            format!("scheduled: JSON is deprecated from {d}; it ends on {e}.")
        }
        ("before", Some(d), None) => format!("scheduled: JSON is deprecated from {d}."),
        ("before", None, Some(e)) => format!("scheduled: JSON ends on {e}."),
        ("deprecated", Some(d), Some(e)) => format!(
            "deprecated since {d}: JSON answers carry Deprecation, Sunset and Link; JSON ends on {e}."
        ),
        ("deprecated", Some(d), None) => {
            format!("deprecated since {d}: JSON answers carry Deprecation; no sunset date.")
        }
        ("brownout", _, e) => {
            let until = s
                .next_brownout
                .as_ref()
                .map_or(String::new(), |b| format!(" until {}", when(&b.end, now)));
            let ends = e.map_or(String::new(), |e| format!(" JSON ends on {e}."));
            format!("BROWNOUT{until}: JSON is refused.{ends}")
        }
        ("sunset", _, Some(e)) => format!("SUNSET on {e}: JSON is refused."),
        (phase, _, _) => clean(phase),
    };
    w!(out, "  Sunset: {state}");
    let mut facts = Table::new(&[("", Align::Left), ("", Align::Left)]);
    facts.row(vec!["rule".into(), clean(&s.selector)]);
    if let Some(b) = &s.next_brownout {
        facts.row(vec![
            "next brownout".into(),
            format!("{} to {}", when(&b.start, now), timestamp(&b.end)),
        ]);
    }
    if s.brownouts.len() > 1 {
        facts.row(vec![
            "brownouts".into(),
            format!("{} scheduled", s.brownouts.len()),
        ]);
    }
    if let Some(link) = &s.link {
        facts.row(vec!["link".into(), clean(link)]);
    }
    if !s.exempt_clients.is_empty() {
        let names: Vec<String> = s.exempt_clients.iter().map(|c| clean(c)).collect();
        facts.row(vec!["exempt".into(), names.join(", ")]);
    }
    let count = |map: &BTreeMap<String, u64>, key: &str| map.get(key).copied().unwrap_or(0);
    facts.row(vec![
        "so far".into(),
        format!(
            "{} deprecated JSON answers, {} refused at sunset, {} in brownouts, {} served to exempt clients",
            thousands(count(&m.downgrades, "json_deprecated")),
            thousands(count(&m.json_refused, "sunset")),
            thousands(count(&m.json_refused, "brownout")),
            thousands(m.exempt),
        ),
    ]);
    facts.render_headless(out, 4);
}

/// The overview's word for a method's policy.
fn phase_word(s: Option<&Sunset>) -> &str {
    match s.map(|s| s.phase.as_str()) {
        None => "none",
        Some("before") => "scheduled",
        Some(p) if p.chars().all(|c| c.is_ascii_lowercase()) => p,
        Some(_) => "?",
    }
}

/// One character per hour, oldest first: `·` for an hour without requests, else a block as
/// high as the JSON share. `None` for a day without requests.
fn sparkline(s: &Series) -> Option<String> {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let step = s
        .step_seconds
        .filter(|&s| s > 0 && 3600 % s == 0)
        .unwrap_or(60);
    let per_hour = usize::try_from(3600 / step).unwrap_or(60);
    if s.requests.iter().all(|&r| r == 0) {
        return None;
    }
    let line = s
        .requests
        .chunks(per_hour)
        .zip(s.json_answers.chunks(per_hour))
        .map(|(r, j)| {
            let (r, j) = (r.iter().sum::<u64>(), j.iter().sum::<u64>());
            if r == 0 {
                '·'
            } else {
                let share = (j as f64 / r as f64).clamp(0.0, 1.0);
                BLOCKS[((share * 7.0).round() as usize).min(7)]
            }
        })
        .collect();
    Some(line)
}

fn share(given: Option<f64>, json: u64, requests: u64) -> Option<f64> {
    given.or_else(|| (requests > 0).then(|| json as f64 / requests as f64))
}

/// `2027-03-01T19:48:00Z` as `2027-03-01 19:48:00Z`.
fn timestamp(t: &str) -> String {
    clean(&t.replacen('T', " ", 1))
}

/// A time with how long before (or after) the report it was: `2027-03-01 19:48:00Z (12 min
/// ago)`. The report's own time is the reference, so the two machines' clocks need not agree.
fn when(t: &str, now: Option<SystemTime>) -> String {
    let shown = timestamp(t);
    let (Some(now), Ok(t)) = (now, edge::migration::parse_time(t)) else {
        return shown;
    };
    let ago = match now.duration_since(t) {
        Ok(d) if d.as_secs() < 60 => "just now".to_string(),
        Ok(d) if d.as_secs() < 3600 => format!("{} min ago", d.as_secs() / 60),
        Ok(d) if d.as_secs() < 2 * 86_400 => format!("{} h ago", d.as_secs() / 3600),
        Ok(d) => format!("{} days ago", d.as_secs() / 86_400),
        Err(e) if e.duration().as_secs() >= 2 * 86_400 => {
            format!("in {} days", e.duration().as_secs() / 86_400)
        }
        Err(e) if e.duration().as_secs() >= 3600 => {
            format!("in {} h", e.duration().as_secs() / 3600)
        }
        Err(e) => format!("in {} min", e.duration().as_secs().div_ceil(60)),
    };
    format!("{shown} ({ago})")
}

/// The report with no trailing space on any line.
fn finish(out: String) -> String {
    let mut s = String::with_capacity(out.len());
    for line in out.lines() {
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

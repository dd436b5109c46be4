//! The report rendered as HTML: [`render_html`] for `GET /admin/migration`, one
//! self-contained page (inline CSS and SVG, no script, no external asset). The JSON document
//! is `json.rs`'s.
//!
//! # The page
//! Hooks for tests and scripts: each method is a `<section class="method"
//! data-method="pkg.Service.Method">`; client names are `class="client"` (rows
//! `tr.client-row`, the other row `tr.other`); the trend is an `<svg class="json-share-chart"
//! role="img" aria-label="…">`; the format mix `table.mix`, drops `table.unknown-fields`, the
//! cost `p.cost`, the policy `div.sunset[data-phase]`. Every word that came with a request
//! (client names, versions, paths) is HTML-escaped.

use crate::protocol::Protocol;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::SystemTime;

use transcode::Format;

use super::dates::rfc3339;
use super::figures::{percent, thousands};
use super::report::{MethodReport, Origin, Report, ShareSeries, SunsetReport};
use super::sunset::{Phase, RefusalReason};
use super::tracker::{Counts, FORMATS, REASONS};

/// Clients listed per method on the page (the JSON document has them all).
const PAGE_CLIENTS: usize = 25;

/// Minutes per point of the page's chart (144 points over 24 h).
const CHART_MINUTES: usize = 10;

/// Appends formatted text to a `String` (which cannot fail).
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
    }};
}

/// The page: one HTML5 document, usable offline and without JavaScript.
/// Which other view of the same gateway the page links to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Views {
    /// None: no fleet view is configured.
    #[default]
    Alone,
    /// This is the gateway's own view; the fleet's is at `migration` (or, with `error`,
    /// could not be had just now and this view stands in).
    Local { error: Option<String> },
    /// This is the fleet's view; the gateway's own is at `migration?view=local`.
    Fleet,
}

/// The page of `report`, linking to the other view as `views` says.
pub fn render_html(report: &Report, views: &Views) -> String {
    let now = report.generated_at;
    let mut out = String::with_capacity(16 * 1024 + report.methods.len() * 16 * 1024);
    out.push_str(concat!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        "<title>protogate — migration</title>\n<style>",
    ));
    out.push_str(CSS);
    out.push_str("</style>\n</head>\n<body>\n<header>\n<h1>protogate — migration</h1>\n");
    let source = match &report.origin {
        Origin::Instance(Some(name)) => format!("Instance <code>{}</code> · ", esc(name)),
        Origin::Instance(None) => String::new(),
        Origin::Replicas(urls) => format!(
            "Merged from {} replicas ({}) · ",
            urls.len(),
            urls.iter().map(|u| esc(u)).collect::<Vec<_>>().join(", ")
        ),
        Origin::Prometheus { url, range: None } => format!(
            "<strong>The fleet</strong>, every replica's counts since it started, summed by \
             Prometheus (<code>{}</code>) · ",
            esc(url)
        ),
        Origin::Prometheus {
            url,
            range: Some(range),
        } => format!(
            "<strong>The fleet</strong>, about the last {} (Prometheus <code>{}</code>, \
             extrapolated) · ",
            esc(range),
            esc(url)
        ),
    };
    let rows = match report.origin {
        Origin::Prometheus { .. } => format!(
            "{} clients with series of their own",
            thousands(report.tracked_clients as u64)
        ),
        _ => format!(
            "{} of {} client rows in use",
            thousands(report.tracked_clients as u64),
            thousands(report.max_clients as u64),
        ),
    };
    let (json, other) = match views {
        Views::Alone => ("migration.json", String::new()),
        Views::Local { .. } => (
            "migration.json",
            " · <a class=\"view\" href=\"migration\">the fleet's view</a>".to_owned(),
        ),
        Views::Fleet => (
            "migration.json?view=fleet",
            " · <a class=\"view\" href=\"migration?view=local\">this instance's own view</a>"
                .to_owned(),
        ),
    };
    w!(
        out,
        "<p class=\"meta\">Who still speaks JSON, what it costs, and when it ends. {source}Generated {} · \
         {rows} · <a href=\"{json}\">JSON</a>{other}</p>\n",
        time(report.generated_at, now),
    );
    if let Views::Local { error: Some(e) } = views {
        w!(
            out,
            "<p class=\"fleet-error\">The fleet's view is not available ({}): this is this \
             instance's own.</p>\n",
            esc(e)
        );
    }
    out.push_str("</header>\n<main>\n");
    if report.methods.is_empty() {
        out.push_str("<p class=\"empty\">No requests yet.</p>\n");
    } else {
        overview(&mut out, report);
        for m in &report.methods {
            method(&mut out, m, now);
        }
    }
    out.push_str(
        "</main>\n<footer>Counts are exact per method since the gateway started; a client's \
         row counts from when it got the row. Rows are bounded: clients beyond them count \
         under <em>other</em>.</footer>\n</body>\n</html>\n",
    );
    out
}

fn overview(out: &mut String, report: &Report) {
    out.push_str(
        "<section class=\"overview\">\n<h2>Methods</h2>\n<table class=\"methods\">\n<thead><tr>\
         <th>Method</th><th class=\"n\">Requests</th><th class=\"n\">JSON answers</th>\
         <th>JSON share</th><th>Sunset</th></tr></thead>\n<tbody>\n",
    );
    for m in &report.methods {
        let phase = phase_word(m.sunset.as_ref().map(|s| s.phase));
        w!(
            out,
            "<tr data-method=\"{m}\"><td><a href=\"#{id}\"><code>{m}</code></a></td>\
             <td class=\"n\">{req}</td><td class=\"n\">{json}</td><td>{bar}</td>\
             <td><span class=\"badge phase-{phase}\">{phase}</span></td></tr>\n",
            m = esc(&m.method),
            id = anchor(&m.method),
            req = thousands(m.totals.requests()),
            json = thousands(m.totals.json_answers()),
            bar = share_bar(m.json_share()),
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

fn method(out: &mut String, m: &MethodReport, now: SystemTime) {
    let name = esc(&m.method);
    let phase = phase_word(m.sunset.as_ref().map(|s| s.phase));
    w!(
        out,
        "<section class=\"method\" id=\"{id}\" data-method=\"{name}\">\n\
         <h2><code>{name}</code> <span class=\"badge phase-{phase}\">{phase}</span></h2>\n",
        id = anchor(&m.method),
    );
    let (day_requests, day_json) = m.json_share.totals();
    w!(
        out,
        "<p class=\"lead\"><strong>{}</strong> of {} answers were JSON",
        percent(m.json_share()),
        thousands(m.totals.requests()),
    );
    if day_requests > 0 {
        w!(
            out,
            " ({} over the last 24 h)",
            percent(Some(day_json as f64 / day_requests as f64))
        );
    }
    out.push_str(".</p>\n");
    match m.cost.summary() {
        Some(s) => w!(out, "<p class=\"cost\">{}</p>\n", esc(&s)),
        None => out.push_str("<p class=\"cost none\">No JSON answer measured yet.</p>\n"),
    }
    out.push_str("<div class=\"grid\">\n<figure class=\"trend\">\n");
    chart(out, &m.json_share);
    out.push_str("<figcaption>JSON share of answers, 10-minute steps over the last 24 h</figcaption>\n</figure>\n");
    mix_table(out, &m.totals);
    out.push_str("</div>\n");
    w!(
        out,
        "<p class=\"protocols\">Requests by client protocol: {}</p>\n",
        protocols(&m.totals)
    );
    clients(out, m, now);
    unknown_fields(out, m, now);
    sunset(out, m.sunset.as_ref(), &m.totals, now);
    out.push_str("</section>\n");
}

fn mix_table(out: &mut String, totals: &Counts) {
    out.push_str(
        "<table class=\"mix\">\n<caption>Format mix: requests by the format sent (rows) and \
         answered (columns)</caption>\n<thead><tr><th>sent \\ answered</th>",
    );
    for f in FORMATS {
        w!(out, "<th class=\"n\">{}</th>", format_name(f));
    }
    out.push_str("<th class=\"n\">all</th></tr></thead>\n<tbody>\n");
    for req in FORMATS {
        w!(out, "<tr><th>{}</th>", format_name(req));
        for resp in FORMATS {
            let n = totals.mix().get(req, resp);
            let class = match (resp, n) {
                (_, 0) => "n zero",
                (Format::Json, _) => "n json",
                _ => "n",
            };
            w!(out, "<td class=\"{class}\">{}</td>", thousands(n));
        }
        w!(
            out,
            "<td class=\"n\">{}</td></tr>\n",
            thousands(totals.mix().sent(req))
        );
    }
    out.push_str("<tr class=\"total\"><th>all</th>");
    for resp in FORMATS {
        w!(
            out,
            "<td class=\"n\">{}</td>",
            thousands(totals.mix().answered(resp))
        );
    }
    w!(
        out,
        "<td class=\"n\">{}</td></tr>\n</tbody>\n</table>\n",
        thousands(totals.requests())
    );
}

fn clients(out: &mut String, m: &MethodReport, now: SystemTime) {
    out.push_str(
        "<h3>Clients</h3>\n<table class=\"clients\">\n<thead><tr><th>Client</th>\
         <th>Versions</th><th>Protocols</th><th class=\"n\">Requests</th><th class=\"n\">JSON answers</th>\
         <th>JSON share</th><th>Downgrades</th><th>Sunset</th><th>Last seen</th></tr></thead>\n<tbody>\n",
    );
    for c in m.clients.iter().take(PAGE_CLIENTS) {
        let versions = c
            .versions
            .iter()
            .map(|(v, n)| {
                format!(
                    "<span class=\"version\" title=\"{n} requests\">{}</span>",
                    esc(v)
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        let error = if c.count_error > 0 {
            format!(
                " <span class=\"muted\" title=\"may have sent up to {e} more before it was tracked\">+≤{e}</span>",
                e = thousands(c.count_error)
            )
        } else {
            String::new()
        };
        let unverified = if c.unverified > 0 {
            format!(
                " <span class=\"unverified\" title=\"{n} requests named this client by its own word (x-client-id, User-Agent), not by a certificate, token or API key\">unverified</span>",
                n = thousands(c.unverified)
            )
        } else {
            String::new()
        };
        w!(
            out,
            "<tr class=\"client-row\" data-client=\"{name}\"><td class=\"client\">{name}{unverified}</td>\
             <td class=\"versions\">{versions}</td><td class=\"protocols\">{protocols}</td>\
             <td class=\"n\">{req}{error}</td>\
             <td class=\"n\">{json}</td><td>{bar}</td><td>{down}</td><td>{policy}</td>\
             <td>{last}<br><span class=\"muted\">first {first}</span></td></tr>\n",
            name = esc(&c.name),
            protocols = protocols(&c.counts),
            req = thousands(c.counts.requests()),
            json = thousands(c.counts.json_answers()),
            bar = share_bar(c.json_share()),
            down = downgrades(&c.counts),
            policy = policy_counts(&c.counts),
            last = c.last_seen.map_or_else(|| "—".to_owned(), |t| time(t, now)),
            first = c
                .first_seen
                .map_or_else(|| "—".to_owned(), |t| time(t, now)),
        );
    }
    if m.clients.len() > PAGE_CLIENTS {
        w!(
            out,
            "<tr class=\"more\"><td colspan=\"9\">… and {} more tracked clients \
             (<a href=\"migration.json\">all in the JSON</a>)</td></tr>\n",
            thousands((m.clients.len() - PAGE_CLIENTS) as u64)
        );
    }
    let o = &m.other;
    let note = if m.evicted_clients > 0 {
        format!(
            "clients without a row; {} rows given up",
            thousands(m.evicted_clients)
        )
    } else {
        "clients without a row".to_string()
    };
    w!(
        out,
        "<tr class=\"other\"><td><em>other</em><br><span class=\"muted\">{note}</span></td>\
         <td></td><td class=\"protocols\">{protocols}</td><td class=\"n\">{req}</td>\
         <td class=\"n\">{json}</td><td>{bar}</td>\
         <td>{down}</td><td>{policy}</td><td></td></tr>\n</tbody>\n</table>\n",
        protocols = protocols(o),
        req = thousands(o.requests()),
        json = thousands(o.json_answers()),
        bar = share_bar((o.requests() > 0).then(|| o.json_answers() as f64 / o.requests() as f64)),
        down = downgrades(o),
        policy = policy_counts(o),
    );
}

fn unknown_fields(out: &mut String, m: &MethodReport, now: SystemTime) {
    out.push_str("<h3>Fields these clients do not receive</h3>\n");
    if m.unknown_fields.is_empty() {
        out.push_str(
            "<p class=\"none\">No unknown field dropped: JSON and MessagePack answers carried \
             everything the upstream sent.</p>\n",
        );
        return;
    }
    out.push_str(
        "<p class=\"note\">Fields the upstream sent that the gateway's schema does not know: \
         protobuf clients get them, JSON and MessagePack clients do not.</p>\n\
         <table class=\"unknown-fields\">\n<thead><tr><th>Field</th><th>In message</th>\
         <th class=\"n\">Drops</th><th>Clients</th><th>Last seen</th></tr></thead>\n<tbody>\n",
    );
    for f in &m.unknown_fields {
        let clients = f
            .clients
            .iter()
            .map(|(c, n)| {
                format!(
                    "<span class=\"client\">{}</span> <span class=\"muted\">({})</span>",
                    esc(c),
                    thousands(*n)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        w!(
            out,
            "<tr><td class=\"n\">#{}</td><td><code>{}</code></td><td class=\"n\">{}</td>\
             <td>{clients}</td><td>{}</td></tr>\n",
            f.number,
            if f.path.is_empty() {
                Cow::Borrowed("(root)")
            } else {
                esc(&f.path)
            },
            thousands(f.drops),
            time(f.last_seen, now),
        );
    }
    if m.unknown_fields_other > 0 {
        w!(
            out,
            "<tr class=\"other\"><td colspan=\"2\"><em>other fields</em></td>\
             <td class=\"n\">{}</td><td></td><td></td></tr>\n",
            thousands(m.unknown_fields_other)
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

fn sunset(out: &mut String, s: Option<&SunsetReport>, totals: &Counts, now: SystemTime) {
    out.push_str("<h3>Sunset</h3>\n");
    let Some(s) = s else {
        out.push_str(
            "<div class=\"sunset\" data-phase=\"none\"><p>No <code>json_sunset</code> rule: JSON \
             is served as always.</p></div>\n",
        );
        return;
    };
    w!(
        out,
        "<div class=\"sunset\" data-phase=\"{}\">\n<p>",
        s.phase.as_str()
    );
    let date = |t: Option<SystemTime>| t.map(|t| time(t, now));
    match (s.phase, date(s.deprecation), date(s.sunset)) {
        (Phase::Before, Some(d), Some(e)) => {
            w!(out, "JSON is deprecated from {d}; it ends on {e}.")
        }
        (Phase::Before, Some(d), None) => w!(out, "JSON is deprecated from {d}."),
        (Phase::Before, None, Some(e)) => w!(out, "JSON ends on {e}."),
        (Phase::Deprecated, Some(d), Some(e)) => w!(
            out,
            "Deprecated since {d}: JSON answers carry <code>Deprecation</code>, \
             <code>Sunset</code> and <code>Link</code>. JSON ends on {e}."
        ),
        (Phase::Deprecated, Some(d), None) => w!(
            out,
            "Deprecated since {d}: JSON answers carry <code>Deprecation</code>. No sunset date."
        ),
        (Phase::Brownout { until }, _, e) => {
            w!(
                out,
                "<strong>Brownout until {}</strong>: JSON is refused.",
                time(until, now)
            );
            if let Some(e) = e {
                w!(out, " JSON ends on {e}.");
            }
        }
        (Phase::Sunset, _, Some(e)) => {
            w!(out, "<strong>Sunset on {e}</strong>: JSON is refused.")
        }
        _ => {}
    }
    out.push_str("</p>\n<dl>\n");
    w!(
        out,
        "<dt>Rule</dt><dd><code>{}</code></dd>\n",
        esc(&s.selector)
    );
    if let Some(b) = &s.next_brownout {
        w!(
            out,
            "<dt>Next brownout</dt><dd>{} to {}</dd>\n",
            time(b.start, now),
            time(b.end(), now)
        );
    }
    if s.brownouts.len() > 1 {
        w!(
            out,
            "<dt>Brownouts</dt><dd>{} scheduled</dd>\n",
            s.brownouts.len()
        );
    }
    if let Some(link) = &s.link {
        w!(
            out,
            "<dt>Link</dt><dd><a href=\"{l}\" rel=\"noreferrer\">{l}</a></dd>\n",
            l = esc(link)
        );
    }
    if !s.exempt_clients.is_empty() {
        let names = s
            .exempt_clients
            .iter()
            .map(|c| format!("<span class=\"client\">{}</span>", esc(c)))
            .collect::<Vec<_>>()
            .join(", ");
        w!(out, "<dt>Exempt</dt><dd>{names}</dd>\n");
    }
    w!(
        out,
        "<dt>So far</dt><dd>{} deprecated JSON answers, {} refused at sunset, {} in brownouts, \
         {} served to exempt clients</dd>\n</dl>\n</div>\n",
        thousands(totals.downgrades(crate::downgrade::Reason::JsonDeprecated)),
        thousands(totals.refused(RefusalReason::Sunset)),
        thousands(totals.refused(RefusalReason::Brownout)),
        thousands(totals.exempt),
    );
}

/// The trend: an area and line per run of 10-minute steps that had requests (a gap where
/// none came), gridlines at 0, 50 and 100 %.
fn chart(out: &mut String, series: &ShareSeries) {
    const W: f64 = 480.0;
    const TOP: f64 = 12.0;
    const BASE: f64 = 82.0;
    let shares = series.shares(CHART_MINUTES);
    let n = shares.len().max(2);
    let x = |i: usize| i as f64 * W / (n - 1) as f64;
    let y = |s: f64| BASE - s * (BASE - TOP);
    let (requests, json) = series.totals();
    let last = shares.iter().rev().find_map(|s| *s);
    let label = if requests == 0 {
        "JSON share over the last 24 hours: no requests".to_string()
    } else {
        format!(
            "JSON share over the last 24 hours: {} overall, {} in the latest 10 minutes with requests",
            percent(Some(json as f64 / requests as f64)),
            percent(last)
        )
    };
    w!(
        out,
        "<svg class=\"json-share-chart\" role=\"img\" aria-label=\"{label}\" viewBox=\"0 0 480 100\" \
         width=\"480\" height=\"100\" xmlns=\"http://www.w3.org/2000/svg\">\
         <title>{label}</title>\n"
    );
    for (share, text) in [(1.0, "100 %"), (0.5, "50 %"), (0.0, "0 %")] {
        w!(
            out,
            "<line class=\"grid\" x1=\"0\" x2=\"480\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"axis\" x=\"478\" y=\"{ty:.1}\" text-anchor=\"end\">{text}</text>\n",
            y = y(share),
            ty = y(share) - 2.0,
        );
    }
    let mut i = 0;
    while i < shares.len() {
        if shares[i].is_none() {
            i += 1;
            continue;
        }
        let start = i;
        while i < shares.len() && shares[i].is_some() {
            i += 1;
        }
        let run: Vec<(f64, f64)> = (start..i)
            .filter_map(|k| shares[k].map(|s| (x(k), y(s))))
            .collect();
        if let [(px, py)] = run[..] {
            w!(
                out,
                "<circle class=\"point\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"2.5\"/>\n"
            );
            continue;
        }
        let line: String = run
            .iter()
            .enumerate()
            .map(|(k, (px, py))| format!("{}{px:.1},{py:.1}", if k == 0 { "M" } else { " L" }))
            .collect();
        let (x0, x1) = (run[0].0, run[run.len() - 1].0);
        w!(
            out,
            "<path class=\"area\" d=\"{line} L{x1:.1},{BASE:.1} L{x0:.1},{BASE:.1} Z\"/>\
             <path class=\"line\" d=\"{line}\"/>\n"
        );
    }
    out.push_str(
        "<text class=\"axis\" x=\"0\" y=\"96\">−24 h</text>\
         <text class=\"axis\" x=\"240\" y=\"96\" text-anchor=\"middle\">−12 h</text>\
         <text class=\"axis\" x=\"480\" y=\"96\" text-anchor=\"end\">now</text>\n</svg>\n",
    );
}

fn downgrades(c: &Counts) -> String {
    let parts: Vec<String> = REASONS
        .iter()
        .filter(|&&r| c.downgrades(r) > 0)
        .map(|&r| {
            format!(
                "<span class=\"reason\">{}</span> {}",
                r.as_str(),
                thousands(c.downgrades(r))
            )
        })
        .collect();
    if parts.is_empty() {
        "<span class=\"muted\">none</span>".into()
    } else {
        parts.join("<br>")
    }
}

/// The requests by client protocol (those with any): a client that moved from REST/JSON to
/// a generated gRPC or Connect client shows both, and its format mix says what it sends now.
fn protocols(c: &Counts) -> String {
    let parts: Vec<String> = Protocol::LABELS
        .iter()
        .zip(c.protocols())
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("<span class=\"protocol\">{name}</span> {}", thousands(n)))
        .collect();
    if parts.is_empty() {
        "<span class=\"muted\">none</span>".into()
    } else {
        parts.join("<br>")
    }
}

fn policy_counts(c: &Counts) -> String {
    let mut parts = Vec::new();
    for r in RefusalReason::ALL {
        if c.refused(r) > 0 {
            parts.push(format!(
                "<span class=\"refused\">refused ({})</span> {}",
                r.as_str(),
                thousands(c.refused(r))
            ));
        }
    }
    if c.exempt > 0 {
        parts.push(format!("exempt {}", thousands(c.exempt)));
    }
    parts.join("<br>")
}

fn share_bar(share: Option<f64>) -> String {
    match share {
        None => "<span class=\"muted\">–</span>".into(),
        Some(s) => format!(
            "<span class=\"share\"><span class=\"bar\"><span style=\"width:{:.1}%\"></span></span> {}</span>",
            s * 100.0,
            percent(Some(s))
        ),
    }
}

fn phase_word(phase: Option<Phase>) -> &'static str {
    match phase {
        None => "none",
        Some(Phase::Before) => "scheduled",
        Some(p) => p.as_str(),
    }
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Json => "JSON",
        Format::Msgpack => "MessagePack",
        Format::Protobuf => "Protobuf",
    }
}

/// `<time datetime="…">2027-01-01 10:00:00Z</time>` with how long ago.
fn time(t: SystemTime, now: SystemTime) -> String {
    let iso = rfc3339(t);
    let ago = match now.duration_since(t) {
        Ok(d) if d.as_secs() < 60 => " (just now)".to_string(),
        Ok(d) if d.as_secs() < 3600 => format!(" ({} min ago)", d.as_secs() / 60),
        Ok(d) if d.as_secs() < 2 * 86_400 => format!(" ({} h ago)", d.as_secs() / 3600),
        Ok(d) => format!(" ({} days ago)", d.as_secs() / 86_400),
        Err(e) if e.duration().as_secs() >= 86_400 => {
            format!(" (in {} days)", e.duration().as_secs() / 86_400)
        }
        Err(e) if e.duration().as_secs() >= 3600 => {
            format!(" (in {} h)", e.duration().as_secs() / 3600)
        }
        Err(_) => " (soon)".to_string(),
    };
    format!(
        "<time datetime=\"{iso}\">{}</time><span class=\"ago\">{ago}</span>",
        iso.replace('T', " ")
    )
}

/// An `id` for a method's section: `m-` and the name, characters other than
/// `[A-Za-z0-9._-]` as `_`.
fn anchor(method: &str) -> String {
    let mut s = String::with_capacity(method.len() + 2);
    s.push_str("m-");
    s.extend(method.chars().map(|c| {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            c
        } else {
            '_'
        }
    }));
    s
}

/// Text escaped for HTML content and double- or single-quoted attribute values.
pub fn esc(s: &str) -> Cow<'_, str> {
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

const CSS: &str = r#"
:root{--fg:#1f2328;--muted:#656d76;--bg:#fff;--panel:#f6f8fa;--line:#d0d7de;--json:#d1242f;--json-soft:#ffebe9;--ok:#1a7f37;--accent:#0969da;--warn:#9a6700;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#8d96a0;--bg:#0d1117;--panel:#161b22;--line:#30363d;--json:#ff7b72;--json-soft:#3d1d1c;--ok:#3fb950;--accent:#4493f8;--warn:#d29922}}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header,main,footer{max-width:1180px;margin:0 auto;padding:0 20px}
header{padding-top:20px;border-bottom:1px solid var(--line)}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:0 0 8px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
h2 code{font-size:16px}
h3{font-size:14px;margin:18px 0 6px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
a{color:var(--accent)}
.meta,.muted,.note,figcaption,footer{color:var(--muted)}
.unverified{font-size:.75em;border:1px solid var(--muted);border-radius:3px;padding:0 .25em;color:var(--muted)}
.meta{margin:0 0 14px}
footer{font-size:12px;padding:16px 20px 28px}
section{margin:22px 0;padding:18px 20px;background:var(--panel);border:1px solid var(--line);border-radius:10px}
table{border-collapse:collapse;width:100%;background:var(--bg);border:1px solid var(--line);border-radius:6px}
th,td{padding:5px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{font-size:12px;color:var(--muted);font-weight:600;background:var(--panel)}
caption{caption-side:top;text-align:left;color:var(--muted);font-size:12px;padding:0 0 4px}
.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.zero{color:var(--muted)}
td.json{color:var(--json);font-weight:600;background:var(--json-soft)}
tr.total td,tr.total th{font-weight:600}
tr.other td{background:var(--panel)}
.client{font-weight:600;word-break:break-all}
.version{display:inline-block;font:11.5px ui-monospace,monospace;padding:0 5px;margin:1px 0;border:1px solid var(--line);border-radius:4px;word-break:break-all}
.reason{font:11.5px ui-monospace,monospace}
.refused{color:var(--json);font-weight:600}
.ago{color:var(--muted);font-size:12px}
.lead{font-size:15px;margin:0 0 4px}
.lead strong{color:var(--json)}
.cost{margin:0 0 12px}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px;align-items:start}
@media (max-width:860px){.grid{grid-template-columns:1fr}}
figure{margin:0;background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:8px}
figcaption{font-size:12px}
.json-share-chart{width:100%;height:auto;display:block}
.json-share-chart .grid{stroke:var(--line);stroke-width:1}
.json-share-chart .axis{fill:var(--muted);font-size:9px}
.json-share-chart .area{fill:var(--json);opacity:.15}
.json-share-chart .line{fill:none;stroke:var(--json);stroke-width:1.6;vector-effect:non-scaling-stroke}
.json-share-chart .point{fill:var(--json)}
.share{white-space:nowrap}
.bar{display:inline-block;width:70px;height:8px;background:var(--line);border-radius:4px;overflow:hidden;vertical-align:middle}
.bar span{display:block;height:100%;background:var(--json)}
.badge{font-size:11.5px;font-weight:600;padding:1px 8px;border-radius:10px;border:1px solid var(--line);background:var(--bg);color:var(--muted)}
.phase-scheduled{color:var(--accent);border-color:var(--accent)}
.phase-deprecated{color:var(--warn);border-color:var(--warn)}
.phase-brownout,.phase-sunset{color:#fff;background:var(--json);border-color:var(--json)}
.sunset{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:4px 12px}
.sunset dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
.sunset dt{color:var(--muted)}
.sunset dd{margin:0}
.empty{padding:30px 0;color:var(--muted)}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migration::fixture::{scripted, t};
    use crate::migration::{ClientId, Finished, SunsetPolicy, Tracker};
    use std::sync::Arc;

    #[test]
    fn the_page_escapes_what_clients_sent() {
        let (tracker, policy) = scripted();
        let now = t("2027-03-01T20:00:00Z");
        let html = render_html(&tracker.report(&policy, None, now), &Views::Alone);
        assert!(html.starts_with("<!doctype html>\n<html lang=\"en\">"));
        assert!(html.contains("<meta charset=\"utf-8\">"));
        assert!(html.contains("<title>protogate — migration</title>"));
        assert!(!html.contains("<script"), "no script, and none injected");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<b>"));
        assert!(html.contains("1.0&quot;&gt;&lt;b&gt;"));
        assert!(html.contains("https://wiki.example/migrate?a=1&amp;b=2"));
        assert!(!html.contains("http://") || html.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(!html.contains("src="), "no external asset");
        // Hooks.
        assert!(html.contains("<section class=\"method\" id=\"m-demo.shop.v1.Shop.GetOrder\" data-method=\"demo.shop.v1.Shop.GetOrder\">"));
        assert!(html.contains("data-method=\"demo.shop.v1.Shop.ListOrders\""));
        // Every fixture client named itself: each is marked unverified.
        assert!(html.contains("<td class=\"client\">ios <span class=\"unverified\" title=\""));
        assert!(html.contains("<svg class=\"json-share-chart\" role=\"img\" aria-label=\"JSON share over the last 24 hours: "));
        assert!(html.contains("<div class=\"sunset\" data-phase=\"deprecated\">"));
        assert!(html.contains("<p class=\"cost\">JSON answers on this method are 2.5× the protobuf bytes and cost 12 µs of gateway CPU each.</p>"));
        assert!(html.contains("class=\"unknown-fields\""));
        assert!(html.contains("<code>items[]</code>"));
        // JSON-heavy first.
        let get = html
            .find("data-method=\"demo.shop.v1.Shop.GetOrder\"")
            .unwrap();
        let list = html
            .find("data-method=\"demo.shop.v1.Shop.ListOrders\"")
            .unwrap();
        assert!(get < list);
        // Balanced sections and tables (a cheap well-formedness check).
        for tag in ["section", "table", "svg", "tr", "td", "p", "dl", "figure"] {
            let open = html.matches(&format!("<{tag}>")).count()
                + html.matches(&format!("<{tag} ")).count();
            let close = html.matches(&format!("</{tag}>")).count();
            assert_eq!(open, close, "<{tag}>");
        }
    }

    #[test]
    fn an_empty_report_renders() {
        let tracker = Tracker::new(10);
        let report = tracker.report(&SunsetPolicy::default(), None, t("2027-03-01T20:00:00Z"));
        let html = render_html(&report, &Views::Alone);
        assert!(html.contains("No requests yet."));
    }

    #[test]
    fn helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(anchor("a.B/C <x>"), "m-a.B_C__x_");
        assert_eq!(percent(Some(0.5)), "50 %");
        assert_eq!(percent(Some(0.123)), "12 %");
        assert_eq!(percent(Some(0.05)), "5.0 %");
    }

    /// Prints the scripted page for a human to look at: `cargo test -p protogate-edge --lib
    /// migration::page::tests::print -- --ignored --nocapture > page.html` (then drop the
    /// test harness's lines around it).
    #[test]
    #[ignore]
    fn print_the_page_for_a_human() {
        let (tracker, policy) = scripted();
        // A day of traffic on a third method, JSON falling as clients move to protobuf.
        let m: Arc<str> = Arc::from("demo.pay.v1.Payments/Charge");
        let start = t("2027-02-28T20:00:00Z");
        for i in 0..24 * 60u64 {
            let now = start + std::time::Duration::from_secs(i * 60);
            for k in 0..(3 + i % 4) {
                let json = (k * 97 + i * 13) % 1440 < 1440 - i;
                let client = ["android", "ios", "partner-api", "legacy-billing"][(k % 4) as usize];
                let resp = if json { Format::Json } else { Format::Protobuf };
                let mut f = Finished::new(resp, resp);
                if json {
                    f.answer_conversion = Some(crate::migration::Conversion {
                        format: Format::Json,
                        protobuf_bytes: 800,
                        format_bytes: 2900,
                        elapsed: std::time::Duration::from_micros(38),
                    });
                }
                tracker.record(&m, &ClientId::new(client, Some("3.4.1")), &f, now);
            }
        }
        println!(
            "{}",
            render_html(
                &tracker.report(&policy, None, t("2027-03-01T20:00:00Z")),
                &Views::Alone,
            )
        );
    }
}

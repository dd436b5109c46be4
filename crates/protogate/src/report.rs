//! `protogate report`: a running gateway's migration report in a terminal.
//!
//! One HTTP/1.1 `GET {URL}/admin/migration.json[?method=GLOB]` (plain http, a current-thread
//! runtime, everything under `--timeout`), the document `edge::migration::render_json` writes
//! (`version` 1; its fields are listed in crates/edge/src/migration/page.rs), checked and
//! printed: `--format json` as received, pretty-printed; `--format table` as plain text with
//! aligned columns and no trailing spaces. The glob is also applied here, so a gateway that
//! ignores `?method=` still gives the right answer. Every failure is one line naming the URL
//! (exit 1).
//!
//! What a client sent (names, versions, field paths) is printed with control characters as
//! `?`, so a report cannot move the terminal's cursor whatever the server says.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::SystemTime;

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use edge::migration::{percent, thousands};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::{Request, StatusCode, header};
use serde::Deserialize;
use serde_json::Value;

use crate::cli::{AdminUrl, ReportArgs, ReportFormat};

/// The largest document read (a gateway's full report is a few MiB at most).
const MAX_BODY_BYTES: usize = 64 << 20;

/// JSON clients listed per method (`--format json` has them all).
const TOP_CLIENTS: usize = 10;

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let glob = args.method.as_deref().filter(|g| !g.is_empty());
    let target = match glob {
        Some(g) => format!("{}?method={}", args.admin_url.path, query_encode(g)),
        None => args.admin_url.path.clone(),
    };
    let url = format!("http://{}{target}", args.admin_url.authority);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let answer = runtime.block_on(async {
        tokio::time::timeout(args.timeout, fetch(&args.admin_url, &target)).await
    });
    let (status, content_type, body) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Err(anyhow!("{url}: {e:#}")),
        Err(_) => bail!("{url}: no answer within {:?}", args.timeout),
    };
    if status != StatusCode::OK {
        bail!("{url}: answered {}{}", status_text(status), detail(&body));
    }
    let mut doc: Value = serde_json::from_slice(&body).map_err(|e| {
        let sent = content_type.map_or(String::new(), |t| format!(", content-type {t}"));
        anyhow!("{url}: the answer is not JSON ({e}{sent})")
    })?;
    let version = doc.get("version").and_then(Value::as_u64);
    match version {
        Some(1) => {}
        Some(v) => bail!(
            "{url}: the migration report is version {v}; this protogate reads version 1 \
             (use --format json, or a protogate as new as the gateway)"
        ),
        None => bail!("{url}: not a migration report (no \"version\": 1)"),
    }
    if let Some(glob) = glob
        && let Some(Value::Array(methods)) = doc.get_mut("methods")
    {
        methods.retain(|m| {
            m.get("method")
                .and_then(Value::as_str)
                .is_none_or(|name| edge::migration::glob_match(glob.as_bytes(), name.as_bytes()))
        });
    }
    let report =
        Document::deserialize(&doc).map_err(|e| anyhow!("{url}: not a migration report ({e})"))?;
    let mut out = match args.format {
        ReportFormat::Json => {
            serde_json::to_string_pretty(&doc).context("rendering the document")?
        }
        ReportFormat::Table => table_report(&report, &url, glob),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        // `protogate report | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing stdout"),
    }
}

// === HTTP ===

/// The status, content type and body of one GET of `target`.
async fn fetch(
    url: &AdminUrl,
    target: &str,
) -> anyhow::Result<(StatusCode, Option<String>, Bytes)> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((url.host.as_str(), url.port))
        .await
        .with_context(|| format!("cannot resolve {}", url.host))?
        .collect();
    let mut stream = None;
    let mut failure = None;
    for addr in &addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => failure = Some(anyhow!("cannot connect to {addr}: {e}")),
        }
    }
    let Some(stream) = stream else {
        return Err(failure.unwrap_or_else(|| anyhow!("{} resolves to no address", url.host)));
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .context("starting HTTP/1.1")?;
    // Its errors reach the request's future; it ends with the runtime.
    let conn = tokio::spawn(conn);
    let request = Request::get(target)
        .header(header::HOST, &url.authority)
        .header(header::ACCEPT, "application/json")
        .header(
            header::USER_AGENT,
            concat!("protogate-report/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .context("building the request")?;
    let response = sender.send_request(request).await.context("no answer")?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(clean);
    let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                anyhow!("the answer is larger than {} MiB", MAX_BODY_BYTES >> 20)
            } else {
                anyhow!("reading the answer: {e}")
            }
        })?
        .to_bytes();
    conn.abort();
    Ok((status, content_type, body))
}

/// A query parameter's value: RFC 3986's unreserved characters and `*` as they are, every
/// other byte percent-encoded (`+` too, which a form decoder reads as a space).
fn query_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'*') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// What an error answer says, as `: …` on the same line: a google.rpc.Status's message, or
/// the first line of a short text; nothing for anything else.
fn detail(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(v) => match v.get("message").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None => return String::new(),
        },
        Err(_) => match std::str::from_utf8(body) {
            Ok(t) if !t.trim_start().starts_with('<') => t
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .into(),
            _ => return String::new(),
        },
    };
    let text = clean(text.trim());
    if text.is_empty() {
        return String::new();
    }
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!(": {cut}")
}

/// Text from the server with control characters as `?`.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

// === The document (`version` 1) ===
// Lenient: fields a gateway may add are ignored; fields this view can do without default.

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    generated_at: Option<String>,
    #[serde(default)]
    max_clients: Option<u64>,
    #[serde(default)]
    tracked_clients: Option<u64>,
    methods: Vec<Method>,
}

type Mix = BTreeMap<String, BTreeMap<String, u64>>;

#[derive(Deserialize)]
struct Method {
    method: String,
    requests: u64,
    json_answers: u64,
    #[serde(default)]
    json_share: Option<f64>,
    #[serde(default)]
    format_mix: Mix,
    #[serde(default)]
    downgrades: BTreeMap<String, u64>,
    #[serde(default)]
    json_refused: BTreeMap<String, u64>,
    #[serde(default)]
    exempt: u64,
    #[serde(default)]
    clients: Vec<Client>,
    #[serde(default)]
    other: Option<Other>,
    #[serde(default)]
    unknown_fields: Vec<Field>,
    #[serde(default)]
    unknown_fields_other: u64,
    #[serde(default)]
    json_share_24h: Option<Series>,
    #[serde(default)]
    cost: Option<Cost>,
    #[serde(default)]
    sunset: Option<Sunset>,
}

#[derive(Deserialize)]
struct Client {
    name: String,
    #[serde(default)]
    versions: Vec<Version>,
    requests: u64,
    json_answers: u64,
    #[serde(default)]
    json_share: Option<f64>,
    #[serde(default)]
    last_seen: Option<String>,
}

#[derive(Deserialize)]
struct Version {
    version: String,
}

#[derive(Deserialize)]
struct Other {
    requests: u64,
    json_answers: u64,
    #[serde(default)]
    json_share: Option<f64>,
    #[serde(default)]
    evicted_clients: u64,
}

#[derive(Deserialize)]
struct Field {
    #[serde(default)]
    path: String,
    number: u64,
    drops: u64,
    #[serde(default)]
    last_seen: Option<String>,
    #[serde(default)]
    clients: Vec<FieldClient>,
}

#[derive(Deserialize)]
struct FieldClient {
    name: String,
    drops: u64,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    step_seconds: Option<u64>,
    requests: Vec<u64>,
    json_answers: Vec<u64>,
}

#[derive(Deserialize)]
struct Cost {
    #[serde(default)]
    summary: Option<String>,
}

#[derive(Deserialize)]
struct Sunset {
    #[serde(default)]
    selector: String,
    phase: String,
    #[serde(default)]
    deprecation: Option<String>,
    #[serde(default)]
    sunset: Option<String>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    brownouts: Vec<Window>,
    #[serde(default)]
    next_brownout: Option<Window>,
    #[serde(default)]
    exempt_clients: Vec<String>,
}

#[derive(Deserialize)]
struct Window {
    start: String,
    end: String,
}

// === The table view ===

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

fn table_report(doc: &Document, url: &str, glob: Option<&str>) -> String {
    let now = doc
        .generated_at
        .as_deref()
        .and_then(|t| edge::migration::parse_time(t).ok());
    let mut out = String::new();
    let mut head = format!("Migration report from {}", clean(url));
    if let Some(t) = &doc.generated_at {
        let _ = write!(head, ", generated {}", timestamp(t));
    }
    if let (Some(tracked), Some(max)) = (doc.tracked_clients, doc.max_clients) {
        let _ = write!(
            head,
            "; {} of {} client rows in use",
            thousands(tracked),
            thousands(max)
        );
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

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// Columns padded to their widest cell (in characters), two spaces apart.
struct Table {
    head: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[(&str, Align)]) -> Table {
        Table {
            head: head.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    fn render(&self, out: &mut String, indent: usize) {
        let head: Vec<String> = self.head.iter().map(|(h, _)| h.clone()).collect();
        self.lines(out, indent, std::iter::once(&head).chain(&self.rows));
    }

    fn render_headless(&self, out: &mut String, indent: usize) {
        self.lines(out, indent, self.rows.iter());
    }

    fn lines<'a>(
        &self,
        out: &mut String,
        indent: usize,
        rows: impl Iterator<Item = &'a Vec<String>> + Clone,
    ) {
        let width = |s: &str| s.chars().count();
        let mut widths = vec![0; self.head.len()];
        for row in rows.clone() {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        for row in rows {
            let mut line = " ".repeat(indent);
            for (i, ((cell, w), (_, align))) in row.iter().zip(&widths).zip(&self.head).enumerate()
            {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(w - width(cell));
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(query_encode("demo.shop.v1.Shop.*"), "demo.shop.v1.Shop.*");
        assert_eq!(query_encode("a/b c+d&e=é"), "a%2Fb%20c%2Bd%26e%3D%C3%A9");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(percent(Some(0.5)), "50 %");
        assert_eq!(percent(Some(0.05)), "5.0 %");
        assert_eq!(percent(Some(0.0)), "0 %");
        assert_eq!(percent(None), "–");
        assert_eq!(clean("a\x1b[2Jb\n"), "a?[2Jb?");
        assert_eq!(detail(br#"{"code":5,"message":"no route"}"#), ": no route");
        assert_eq!(detail(b"<html>404</html>"), "");
        assert_eq!(detail(b"\nnot here\nat all"), ": not here");
    }

    #[test]
    fn tables_are_aligned_without_trailing_spaces() {
        let mut t = Table::new(&[("a", Align::Left), ("bb", Align::Right), ("c", Align::Left)]);
        t.row(vec!["xyz".into(), "1".into(), String::new()]);
        t.row(vec!["é".into(), "1,000".into(), "z".into()]);
        let mut out = String::new();
        t.render(&mut out, 2);
        assert_eq!(out, "  a       bb  c\n  xyz      1\n  é    1,000  z\n");
    }
}

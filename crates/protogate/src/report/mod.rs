//! `protogate report`: a running gateway's migration report in a terminal.
//!
//! One HTTP/1.1 `GET {URL}/admin/migration.json[?method=GLOB]` (plain http, a current-thread
//! runtime, everything under `--timeout`), the document `edge::migration::render_json` writes
//! (`version` 1; its fields are listed in crates/edge/src/migration/json.rs), checked and
//! printed: `--format json` as received, pretty-printed; `--format table` as plain text with
//! aligned columns and no trailing spaces. The glob is also applied here, so a gateway that
//! ignores `?method=` still gives the right answer. Every failure is one line naming the URL
//! (exit 1).
//!
//! What a client sent (names, versions, field paths) is printed with control characters as
//! `?`, so a report cannot move the terminal's cursor whatever the server says.

mod document;
mod http;
mod table;
mod view;

use std::io::Write as _;

use anyhow::{Context as _, anyhow, bail};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::{AdminUrl, ReportArgs, ReportFormat};
use document::Document;
use edge::fetch::query_encode;
use http::{detail, status_text};
use view::table_report;

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let glob = args.method.as_deref().filter(|g| !g.is_empty());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (mut doc, url) = runtime.block_on(async {
        match (&args.prometheus, args.admin_url.as_slice()) {
            (Some(prometheus), _) => {
                from_prometheus(prometheus, args.range.as_deref(), args.timeout).await
            }
            (None, [one]) => {
                let (url, doc) = document(one, glob, args.timeout).await?;
                Ok((doc, url))
            }
            (None, many) => merged(many, glob, args.timeout).await,
        }
    })?;
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

/// One gateway's document, checked: its URL as asked and the document.
async fn document(
    admin: &AdminUrl,
    glob: Option<&str>,
    timeout: std::time::Duration,
) -> anyhow::Result<(String, Value)> {
    let target = match glob {
        Some(g) => format!("{}?method={}", admin.path, query_encode(g)),
        None => admin.path.clone(),
    };
    let url = format!("http://{}{target}", admin.authority);
    let answer = edge::fetch::get(admin, &target, AGENT, timeout)
        .await
        .map_err(|e| anyhow!("{url}: {e}"))?;
    if answer.status != StatusCode::OK {
        bail!(
            "{url}: answered {}{}",
            status_text(answer.status),
            detail(&answer.body)
        );
    }
    let doc: Value = serde_json::from_slice(&answer.body).map_err(|e| {
        let sent = answer
            .content_type
            .map_or(String::new(), |t| format!(", content-type {}", clean(&t)));
        anyhow!("{url}: the answer is not JSON ({e}{sent})")
    })?;
    match doc.get("version").and_then(Value::as_u64) {
        Some(1) => Ok((url, doc)),
        Some(v) => bail!(
            "{url}: the migration report is version {v}; this protogate reads version 1 \
             (use --format json, or a protogate as new as the gateway)"
        ),
        None => bail!("{url}: not a migration report (no \"version\": 1)"),
    }
}

/// The replicas' documents, fetched together and merged (edge's `Report::merge`).
async fn merged(
    admins: &[AdminUrl],
    glob: Option<&str>,
    timeout: std::time::Duration,
) -> anyhow::Result<(Value, String)> {
    let fetched =
        futures_util::future::join_all(admins.iter().map(|a| document(a, glob, timeout))).await;
    let mut reports = Vec::with_capacity(fetched.len());
    let mut urls = Vec::with_capacity(fetched.len());
    for answer in fetched {
        let (url, doc) = answer?;
        let report = edge::migration::parse_json(doc.to_string().as_bytes())
            .map_err(|e| anyhow!("{url}: not a migration report ({e})"))?;
        reports.push(report);
        urls.push(url);
    }
    let source = format!("{} replicas ({})", urls.len(), urls.join(", "));
    let merged = edge::migration::Report::merge(reports, urls);
    let doc = serde_json::from_str(&edge::migration::render_json(&merged))
        .context("rendering the merged document")?;
    Ok((doc, source))
}

/// The fleet's document from Prometheus's per-client series.
async fn from_prometheus(
    prometheus: &edge::fetch::HttpUrl,
    range: Option<&str>,
    timeout: std::time::Duration,
) -> anyhow::Result<(Value, String)> {
    let url = &prometheus.text;
    let report = edge::fetch::fleet_report(prometheus, range, AGENT, timeout)
        .await
        .map_err(|e| anyhow!("{url}: {e}"))?;
    let source = match range {
        Some(r) => format!("Prometheus {url}, about the last {r}"),
        None => format!("Prometheus {url}, every replica's counts since it started"),
    };
    let doc = serde_json::from_str(&edge::migration::render_json(&report))
        .context("rendering the document")?;
    Ok((doc, source))
}

/// The User-Agent of the report's requests.
const AGENT: &str = concat!("protogate-report/", env!("CARGO_PKG_VERSION"));

/// Text from the server with control characters as `?`.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use edge::migration::{percent, thousands};

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
}

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

use crate::cli::{ReportArgs, ReportFormat};
use document::Document;
use http::{detail, fetch, query_encode, status_text};
use view::table_report;

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

//! The one HTTP/1.1 GET of the report (plain http, the address resolved, the first address
//! that accepts a connection) and the words for an answer that is not the report.

use std::fmt::Write as _;
use std::net::SocketAddr;

use anyhow::{Context as _, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::{Request, StatusCode, header};
use serde_json::Value;

use super::clean;
use crate::cli::AdminUrl;

/// The largest document read (a gateway's full report is a few MiB at most).
const MAX_BODY_BYTES: usize = 64 << 20;

/// The status, content type and body of one GET of `target`.
pub(super) async fn fetch(
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
pub(super) fn query_encode(value: &str) -> String {
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

pub(super) fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// What an error answer says, as `: …` on the same line: a google.rpc.Status's message, or
/// the first line of a short text; nothing for anything else.
pub(super) fn detail(body: &[u8]) -> String {
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

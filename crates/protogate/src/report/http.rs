//! The words for an answer that is not the report (the GET itself is edge's `fetch`).

use hyper::StatusCode;
use serde_json::Value;

use super::clean;

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

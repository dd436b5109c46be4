//! One HTTP/1.1 GET over plain http: what `protogate report` asks a gateway's admin
//! listener or Prometheus, and what the migration page asks Prometheus for the fleet view
//! (`[migration] fleet_prometheus`). The address resolved, the first address that accepts a
//! connection, the body read under a bound, everything under one timeout.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Limited};

/// The largest answer read (a fleet's full report or a Prometheus vector of a few thousand
/// series is a few MiB at most).
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// An `http://HOST[:PORT][/PATH]` URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// The URL as written.
    pub text: String,
    /// The host as written, for `Host` (`127.0.0.1:9090`, `[::1]:9090`).
    pub authority: String,
    /// The host to resolve, without brackets.
    pub host: String,
    pub port: u16,
    /// The path, without its trailing `/` (`""` for none).
    pub path: String,
}

impl HttpUrl {
    /// Reads `http://HOST[:PORT][/PATH]`: plain http, no user, no query.
    pub fn parse(text: &str) -> Result<HttpUrl, String> {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| format!("not a URL ({e}); expected http://HOST[:PORT]"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err("https is not supported: plain http:// only".into()),
            _ => return Err("expected http://HOST[:PORT]".into()),
        }
        let parsed = uri.authority().ok_or("expected http://HOST[:PORT]")?;
        if parsed.as_str().contains('@') {
            return Err("a user name or password in the URL is not supported".into());
        }
        if uri.query().is_some() {
            return Err("no query in the URL".into());
        }
        let host = parsed.host().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("no host: expected http://HOST[:PORT]".into());
        }
        Ok(HttpUrl {
            text: text.to_owned(),
            authority: parsed.as_str().to_owned(),
            host: host.to_owned(),
            port: parsed.port_u16().unwrap_or(80),
            path: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

/// An answer: its status, content type and body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// `GET {target}` (a path and query) of `url`'s host, within `timeout`; `agent` is the
/// User-Agent. An error says what failed, without the URL (the caller names it).
pub async fn get(
    url: &HttpUrl,
    target: &str,
    agent: &str,
    timeout: Duration,
) -> Result<Answer, String> {
    match tokio::time::timeout(timeout, get_now(url, target, agent)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

async fn get_now(url: &HttpUrl, target: &str, agent: &str) -> Result<Answer, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((url.host.as_str(), url.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
        .collect();
    let mut stream = None;
    let mut failure = None;
    for addr in &addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => failure = Some(format!("cannot connect to {addr}: {e}")),
        }
    }
    let Some(stream) = stream else {
        return Err(failure.unwrap_or_else(|| format!("{} resolves to no address", url.host)));
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("starting HTTP/1.1: {e}"))?;
    // Its errors reach the request's future; it is ended below.
    let conn = tokio::spawn(conn);
    let request = Request::get(target)
        .header(header::HOST, &url.authority)
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, agent)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("building the request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("the answer is larger than {} MiB", MAX_BODY_BYTES >> 20)
            } else {
                format!("reading the answer: {e}")
            }
        })?
        .to_bytes();
    conn.abort();
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// The fleet's migration report from the per-client series in the Prometheus at `url`
/// (`edge::migration::queries` over `range`, each answer read by `parse_vector`, the
/// three given to `from_prometheus`): what the page's fleet view and `protogate report
/// --prometheus` both show. An error says what failed (and which query), without the URL.
pub async fn fleet_report(
    url: &HttpUrl,
    range: Option<&str>,
    agent: &str,
    timeout: Duration,
) -> Result<crate::migration::Report, String> {
    use crate::migration::{Origin, from_prometheus, parse_vector, queries};
    let mut answers = Vec::with_capacity(3);
    for query in queries(range) {
        let target = format!("{}/api/v1/query?query={}", url.path, query_encode(&query));
        let answer = get(url, &target, agent, timeout).await?;
        // Prometheus answers a query it refuses with 400 or 422 and an error in the body.
        if !matches!(answer.status.as_u16(), 200 | 400 | 422) {
            return Err(format!("answered {}", answer.status));
        }
        answers.push(parse_vector(&answer.body).map_err(|e| format!("{e} (query {query})"))?);
    }
    Ok(from_prometheus(
        &answers[0],
        &answers[1],
        &answers[2],
        std::time::SystemTime::now(),
        Origin::Prometheus {
            url: url.text.clone(),
            range: range.map(str::to_owned),
        },
    ))
}

/// A query parameter's value: RFC 3986's unreserved characters and `*` as they are, every
/// other byte percent-encoded (`+` too, which a form decoder reads as a space).
pub fn query_encode(value: &str) -> String {
    use std::fmt::Write as _;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        let u = HttpUrl::parse("http://[::1]:9091/prom/").unwrap();
        assert_eq!(
            (&*u.authority, &*u.host, u.port, &*u.path),
            ("[::1]:9091", "::1", 9091, "/prom")
        );
        assert_eq!(HttpUrl::parse("http://p").unwrap().port, 80);
        for (bad, why) in [
            ("https://p", "https"),
            ("ftp://p", "expected"),
            ("http://u:pw@p", "user"),
            ("http://p/?q=1", "query"),
            ("p:9090", "expected"),
        ] {
            let e = HttpUrl::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(query_encode("a/b c+d&e=é"), "a%2Fb%20c%2Bd%26e%3D%C3%A9");
    }
}

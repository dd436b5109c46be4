//! Request and response headers the gRPC mapping reads and writes: the client's deadline
//! (`grpc-timeout`, `X-Timeout`), metadata both ways (`grpc-metadata-*`), `grpc-status` and
//! `grpc-message`, and the HTTP/1.1 head size the header limit is held to.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::error::{Code, EdgeError};
pub(crate) use crate::reserved::is_reserved_metadata;

/// The size of an HTTP/1.1 request head as written with single spaces: request line, one
/// `name: value` line per header, the empty line.
pub(crate) fn http1_head_size(head: &http::request::Parts) -> usize {
    let target = head.uri.scheme_str().map_or(0, |s| s.len() + 3)
        + head.uri.authority().map_or(0, |a| a.as_str().len())
        + head.uri.path_and_query().map_or(1, |p| p.as_str().len());
    let request_line = head.method.as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let fields: usize = head
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    request_line + fields + 2
}

/// What RFC 9112 asks a server to refuse in an HTTP/1.1 request head that hyper lets through:
/// a transfer coding other than one final `chunked` (`gzip, chunked`: 501, as §6.1 says for a
/// coding the server does not apply; `chunked, chunked`: 400), and a missing or repeated Host
/// (§3.2: 400). (Content-Length beside Transfer-Encoding never reaches here: hyper drops the
/// Content-Length, reads by the chunked framing and closes the connection after the answer,
/// as §6.3 allows.)
pub(crate) fn http1_framing(head: &http::request::Parts) -> Result<(), EdgeError> {
    let headers = &head.headers;
    let mut codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|c| c.trim_ascii());
    if let Some(first) = codings.next() {
        let mut chunked = 0;
        for coding in std::iter::once(first).chain(codings) {
            if coding.eq_ignore_ascii_case(b"chunked") {
                chunked += 1;
            } else {
                return Err(EdgeError::NotImplemented(format!(
                    "Transfer-Encoding {:?} is not supported (only chunked)",
                    String::from_utf8_lossy(coding)
                )));
            }
        }
        if chunked > 1 {
            return Err(EdgeError::BadHeader(
                "Transfer-Encoding names chunked more than once".into(),
            ));
        }
    }
    if head.version == http::Version::HTTP_11 {
        let mut hosts = headers.get_all(header::HOST).iter();
        match (hosts.next(), hosts.next()) {
            (None, _) => {
                return Err(EdgeError::BadHeader(
                    "an HTTP/1.1 request needs a Host header".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(EdgeError::BadHeader("more than one Host header".into()));
            }
            (Some(_), None) => {}
        }
    }
    Ok(())
}

pub(crate) fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The client's deadline: `grpc-timeout` (gRPC's `1*8DIGIT unit`) or `X-Timeout` in seconds.
pub(crate) fn client_timeout(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    // A name made once: a `&str` name is parsed again on every lookup.
    const X_TIMEOUT: HeaderName = HeaderName::from_static("x-timeout");
    if let Some(timeout) = grpc_timeout(headers)? {
        return Ok(Some(timeout));
    }
    if let Some(v) = headers.get(X_TIMEOUT) {
        let s = v.to_str().unwrap_or("").trim();
        let secs: f64 = s
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x < 1e9)
            .ok_or_else(|| {
                EdgeError::BadHeader(format!(
                    "X-Timeout {s:?} is not a positive number of seconds"
                ))
            })?;
        return Ok(Some(Duration::from_secs_f64(secs)));
    }
    Ok(None)
}

/// `grpc-timeout` (gRPC's `1*8DIGIT unit`), when the client sent one.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    // A name made once: a `&str` name is parsed again on every lookup.
    const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
    let Some(v) = headers.get(GRPC_TIMEOUT) else {
        return Ok(None);
    };
    let s = v.to_str().unwrap_or("");
    let bad = || {
        EdgeError::BadHeader(format!(
            "grpc-timeout {s:?} is not 1-8 digits followed by H, M, S, m, u or n"
        ))
    };
    if s.len() < 2 || s.len() > 9 {
        return Err(bad());
    }
    let (digits, unit) = s.split_at(s.len() - 1);
    let n: u64 = if digits.bytes().all(|c| c.is_ascii_digit()) {
        digits.parse().map_err(|_| bad())?
    } else {
        return Err(bad());
    };
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(bad()),
    };
    Ok(Some(d))
}

/// Headers forwarded upstream as gRPC metadata: `authorization`, `x-request-id`, the trace
/// context (W3C `traceparent` and `tracestate`, gRPC's `grpc-trace-bin`), and every
/// `grpc-metadata-*` with the prefix stripped (names reserved by gRPC are not forwarded).
/// A binary (`-bin`) value must be base64, as gRPC sends it: anything else is the client's
/// error (400 naming the header), not the upstream's (which would fail the call as INTERNAL).
/// `made_request_id`: the id the gateway gave a request that came without one.
pub(crate) fn upstream_metadata(
    headers: &HeaderMap,
    made_request_id: Option<&HeaderValue>,
) -> Result<HeaderMap, EdgeError> {
    let mut out = HeaderMap::new();
    if let Some(id) = made_request_id {
        out.insert(X_REQUEST_ID, id.clone());
    }
    for (name, value) in headers {
        let n = name.as_str();
        if *name == X_REQUEST_ID {
            out.append(name.clone(), unindexed(value));
        } else if matches!(n, "authorization" | "traceparent" | "tracestate") {
            out.append(name.clone(), value.clone());
        } else if n == "grpc-trace-bin" {
            if crate::upstream::decode_binary_header(value.as_bytes()).is_none() {
                return Err(EdgeError::BadHeader(format!(
                    "{n}: a binary metadata value (-bin) must be base64"
                )));
            }
            out.append(name.clone(), value.clone());
        } else if let Some(rest) = n.strip_prefix("grpc-metadata-") {
            if rest.is_empty() || is_reserved_metadata(rest) {
                continue;
            }
            if rest.ends_with("-bin")
                && crate::upstream::decode_binary_header(value.as_bytes()).is_none()
            {
                return Err(EdgeError::BadHeader(format!(
                    "{n}: a binary metadata value (-bin) must be base64"
                )));
            }
            if let Ok(key) = HeaderName::from_bytes(rest.as_bytes()) {
                out.append(key, value.clone());
            }
        }
    }
    Ok(out)
}

pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A request id for a request that came without one: 32 hex digits, unique per process and
/// unlikely to repeat across processes. A counter and two random keys drawn once per process,
/// mixed by SplitMix64's finaliser (a bijection of u64: the first half of the id is unique for
/// every count). Not a secret: SplitMix64 can be inverted, so one id tells the next — as a
/// client's own `x-request-id`, which passes as it is, tells nothing either; an id traces, it
/// authorises nothing. Hashing the count with SipHash twice, as before, cost about 100 more
/// instructions per request (`make bench-ir`, at the edge of its repeatability).
pub(crate) fn new_request_id() -> HeaderValue {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: LazyLock<[u64; 2]> = LazyLock::new(|| {
        let random = || {
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        [random(), random()]
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let [k1, k2] = *KEYS;
    let a = splitmix(n.wrapping_add(k1));
    let b = splitmix(a ^ k2);
    let mut text = [0u8; 32];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in a
        .to_be_bytes()
        .into_iter()
        .chain(b.to_be_bytes())
        .enumerate()
    {
        text[2 * i] = HEX[usize::from(byte >> 4)];
        text[2 * i + 1] = HEX[usize::from(byte & 15)];
    }
    // Hex digits are always a valid header value. Made from an owner (one allocation; the
    // copies sent upstream and back share it), never indexed (see `unindexed`).
    let mut id = HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(text))
        .unwrap_or(HeaderValue::from_static("0"));
    id.set_sensitive(true);
    id
}

/// SplitMix64's output function: a bijection of u64 whose every output bit depends on every
/// input bit.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A request id as HPACK should send it: never indexed. A value that differs on every request
/// only churns the dynamic table, and h2 compares each new one with every id still in it (a
/// memcmp per entry: 3 % of the gateway's CPU per small request over HTTP/2 when indexed).
pub(crate) fn unindexed(id: &HeaderValue) -> HeaderValue {
    let mut id = id.clone();
    id.set_sensitive(true);
    id
}

/// Upstream metadata (headers and trailers) as `grpc-metadata-*` response headers, the names
/// `forward` matches (`forward_response_headers`) as they are.
pub(crate) fn metadata_headers(
    metadata: &HeaderMap,
    forward: &crate::forwarding::HeaderPatterns,
) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in metadata {
        let n = name.as_str();
        if is_reserved_metadata(n) {
            continue;
        }
        if forward.matches(name) {
            out.append(name.clone(), value.clone());
        } else if let Ok(key) = HeaderName::from_bytes(format!("grpc-metadata-{n}").as_bytes()) {
            out.append(key, value.clone());
        }
    }
    out
}

/// `grpc-status` and `grpc-message` (headers of an error answer, trailers of a stream).
pub(crate) fn put_status_headers(headers: &mut HeaderMap, code: Code, message: &str) {
    headers.insert("grpc-status", HeaderValue::from(code as i32));
    if let Ok(v) = HeaderValue::from_str(&crate::error::encode_grpc_message(message)) {
        headers.insert("grpc-message", v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_request_ids_are_hex_unique_and_never_indexed() {
        let ids: std::collections::HashSet<HeaderValue> = (0..1000)
            .map(|_| {
                let id = new_request_id();
                assert!(id.is_sensitive());
                let text = id.to_str().unwrap();
                assert!(text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()));
                id
            })
            .collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn timeouts() {
        let mut h = HeaderMap::new();
        assert_eq!(client_timeout(&h).unwrap(), None);
        h.insert("grpc-timeout", HeaderValue::from_static("250m"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(250))
        );
        h.insert("grpc-timeout", HeaderValue::from_static("2S"));
        assert_eq!(client_timeout(&h).unwrap(), Some(Duration::from_secs(2)));
        for bad in ["", "m", "123456789S", "1x", "-1S", "1.5S"] {
            h.insert("grpc-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
        let mut h = HeaderMap::new();
        h.insert("x-timeout", HeaderValue::from_static("1.5"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in ["0", "-1", "abc", "inf", "NaN"] {
            h.insert("x-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_both_ways() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("x-request-id", HeaderValue::from_static("r1"));
        h.insert("grpc-metadata-tenant", HeaderValue::from_static("acme"));
        h.insert("grpc-metadata-grpc-timeout", HeaderValue::from_static("1S"));
        h.insert("cookie", HeaderValue::from_static("secret"));
        let md = upstream_metadata(&h, None).unwrap();
        assert_eq!(md.get("authorization").unwrap(), "Bearer x");
        assert_eq!(md.get("x-request-id").unwrap(), "r1");
        assert_eq!(md.get("tenant").unwrap(), "acme");
        assert!(md.get("grpc-timeout").is_none() && md.get("cookie").is_none());
        let mut up = HeaderMap::new();
        up.insert("content-type", HeaderValue::from_static("application/grpc"));
        up.insert("grpc-status", HeaderValue::from_static("0"));
        up.insert("x-trace", HeaderValue::from_static("t"));
        let back = metadata_headers(&up, &Default::default());
        assert_eq!(back.len(), 1);
        assert_eq!(back.get("grpc-metadata-x-trace").unwrap(), "t");
    }
}

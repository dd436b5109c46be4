//! One gRPC call's exchange on an endpoint's `h2` connection (endpoint.rs), for unary calls
//! (unary.rs), streams (stream.rs) and the health check (health.rs): the request head, the
//! stream opened, and a unary answer read as gRPC specifies: the status from trailers or a
//! trailers-only answer, the HTTP-status mapping when there is no gRPC status, the response
//! size limit, one message, metadata from headers and trailers; a status the upstream sends
//! malformed is an error, never a panic. A [`Failure`] says whether the call may be sent again.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::client::ResponseFuture;
use h2::{Reason, RecvStream};
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, Uri, header};
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::Answer;
use super::endpoint::{Conn, Endpoint, Frame};

pub(super) const APPLICATION_GRPC: HeaderValue = HeaderValue::from_static("application/grpc");
pub(super) const TRAILERS: HeaderValue = HeaderValue::from_static("trailers");
pub(super) const USER_AGENT: HeaderValue =
    HeaderValue::from_static(concat!("protogate/", env!("CARGO_PKG_VERSION")));
pub(super) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
/// The upstream's say on when (or whether) to retry, in its trailers (gRFC A6): kept in an
/// error status's metadata for a retry policy (retry.rs) to read.
pub(super) const PUSHBACK: &str = "grpc-retry-pushback-ms";
pub(super) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

const NO_MESSAGE: &str = "the upstream answered OK without a message";

/// Why a call failed, and whether it may be sent again.
pub(super) enum Failure {
    /// The endpoint could not be reached (no connection): the call may go to another one.
    Unreachable(Status),
    /// The upstream provably did not process the call: it may go again, on any endpoint.
    NotSent(Status),
    Final(Status),
}

impl Failure {
    pub(super) fn into_status(self) -> Status {
        match self {
            Failure::Unreachable(s) | Failure::NotSent(s) | Failure::Final(s) => s,
        }
    }
}

/// The request head of a call to `endpoint`.
pub(super) fn call_uri(endpoint: &Endpoint, path: &http::uri::PathAndQuery) -> Result<Uri, Status> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(endpoint.scheme());
    parts.authority = Some(endpoint.authority.clone());
    parts.path_and_query = Some(path.clone());
    // Scheme, authority and path are all set: this cannot fail.
    Uri::from_parts(parts).map_err(|e| Status::internal(e.to_string()))
}

/// A unary call without metadata on a given connection of `endpoint` (the active health
/// check's).
pub(super) async fn call_on(
    endpoint: &Arc<Endpoint>,
    conn: Conn,
    path: &str,
    message: Bytes,
    timeout: Duration,
    max_response_bytes: usize,
) -> Result<Answer, Status> {
    let mut request = Request::new(());
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = call_uri(endpoint, &super::method_path(path)?)?;
    let headers = request.headers_mut();
    headers.insert(header::CONTENT_TYPE, APPLICATION_GRPC);
    headers.insert(header::TE, TRAILERS);
    headers.insert(header::USER_AGENT, USER_AGENT);
    headers.insert(GRPC_TIMEOUT, grpc_timeout(timeout));
    let mut prefix = [0u8; 5];
    prefix[1..].copy_from_slice(&(message.len() as u32).to_be_bytes());
    send(
        endpoint,
        conn,
        request,
        Cursor::new(prefix).chain(message),
        max_response_bytes,
    )
    .await
    .map_err(Failure::into_status)
}

/// Sends the call on `conn` and reads its answer.
pub(super) async fn send(
    endpoint: &Endpoint,
    conn: Conn,
    request: Request<()>,
    frame: Frame,
    max_response_bytes: usize,
) -> Result<Answer, Failure> {
    let authority = &endpoint.authority;
    let (response, mut send) = open(endpoint, &conn, request).await?;
    conn.opened(endpoint.options.max_streams_per_connection);
    if send.send_data(frame, true).is_err() {
        // The stream is over (the upstream reset it, or the connection went): its answer
        // tells why, and whether the call may go again. Reset in case it is not.
        send.send_reset(Reason::CANCEL);
    }
    read_answer(response, max_response_bytes, authority).await
}

/// Opens a stream for `request` on `conn` (waiting for the upstream's stream limit).
pub(super) async fn open(
    endpoint: &Endpoint,
    conn: &Conn,
    request: Request<()>,
) -> Result<(ResponseFuture, h2::SendStream<Frame>), Failure> {
    let lost = |e: h2::Error| {
        conn.state
            .closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Failure::NotSent(super::unreached(format!(
            "upstream {} connection lost: {e}",
            endpoint.authority
        )))
    };
    // `ready` fails only for the connection's reasons.
    let mut sender = conn.sender.clone().ready().await.map_err(lost)?;
    sender.send_request(request, false).map_err(|e| {
        if e.is_io() || e.is_go_away() || e.reason().is_some() {
            lost(e)
        } else {
            // h2 refused this request's head; the connection is fine.
            Failure::Final(Status::internal(format!(
                "the call could not be sent upstream: {e}"
            )))
        }
    })
}

/// The answer of one call: its status, its one message, its metadata.
async fn read_answer(
    response: ResponseFuture,
    max_response_bytes: usize,
    authority: &Authority,
) -> Result<Answer, Failure> {
    let response = response.await.map_err(|e| stream_failure(&e, authority))?;
    let (head, mut body) = response.into_parts();
    let mut metadata = head.headers;
    // A trailers-only answer carries its status in the headers.
    if let Some(status) = grpc_status(&metadata, &HeaderMap::new()) {
        return Err(Failure::Final(if status.code() == Code::Ok {
            Status::internal(NO_MESSAGE)
        } else {
            status
        }));
    }
    if head.status != StatusCode::OK {
        return Err(Failure::Final(from_http_status(head.status)));
    }
    let content_type = metadata
        .get(header::CONTENT_TYPE)
        .map(HeaderValue::as_bytes);
    if !content_type.is_some_and(is_grpc_content_type) {
        return Err(Failure::Final(Status::unknown(format!(
            "the upstream answered HTTP 200 with content-type {}, not gRPC",
            content_type.map_or("(none)".into(), String::from_utf8_lossy)
        ))));
    }
    let encoding = metadata.get(GRPC_ENCODING);
    let gzipped = match encoding.map(HeaderValue::as_bytes) {
        None | Some(b"identity") => false,
        Some(b"gzip") => true,
        Some(other) => {
            return Err(Failure::Final(Status::internal(format!(
                "the upstream answered in grpc-encoding {:?}, which the gateway did not offer (it accepts gzip)",
                String::from_utf8_lossy(other)
            ))));
        }
    };
    let message = read_message(&mut body, max_response_bytes, gzipped, authority).await?;
    let trailers = body
        .trailers()
        .await
        .map_err(|e| stream_failure(&e, authority))?
        .unwrap_or_default();
    // The usual end, `grpc-status: 0`, is read without building a Status.
    if trailers.get(GRPC_STATUS).map(HeaderValue::as_bytes) != Some(b"0") {
        let Some(status) = grpc_status(&trailers, &metadata) else {
            return Err(Failure::Final(Status::internal(
                "the upstream ended its answer without a grpc-status",
            )));
        };
        if status.code() != Code::Ok {
            return Err(Failure::Final(status));
        }
    }
    let Some(body) = message else {
        return Err(Failure::Final(Status::internal(NO_MESSAGE)));
    };
    merge_metadata(&mut metadata, &trailers);
    Ok(Answer { body, metadata })
}

/// `application/grpc`, alone or with a `+codec` suffix or parameters (not grpc-web).
fn is_grpc_content_type(t: &[u8]) -> bool {
    t.len() >= 16
        && t[..16].eq_ignore_ascii_case(b"application/grpc")
        && matches!(t.get(16), None | Some(b'+' | b';' | b' '))
}

/// Adds the trailers' metadata to the headers' (gRPC's own `grpc-*` trailers stay out but
/// for `grpc-retry-pushback-ms`, which a retry policy reads from the status; no client is
/// answered a `grpc-*` name from it).
fn merge_metadata(metadata: &mut HeaderMap, trailers: &HeaderMap) {
    for (name, value) in trailers {
        let n = name.as_str();
        if !n.starts_with("grpc-") || n == PUSHBACK {
            metadata.append(name.clone(), value.clone());
        }
    }
}

/// The status in `fields` (trailers, or the headers of a trailers-only answer), its metadata
/// `headers` + `fields`. Whatever the upstream sends, this does not panic (tonic's
/// `Status::from_header_map` does on a `grpc-status-details-bin` that is not base64): a
/// status that is not a number is UNKNOWN, undecodable details are dropped.
pub(super) fn grpc_status(fields: &HeaderMap, headers: &HeaderMap) -> Option<Status> {
    let code = fields.get(GRPC_STATUS)?;
    let (code, message) = match std::str::from_utf8(code.as_bytes())
        .ok()
        .and_then(|c| c.trim().parse::<i32>().ok())
    {
        Some(code) => (
            Code::from_i32(code),
            fields
                .get(GRPC_MESSAGE)
                .map(|m| crate::error::decode_grpc_message(m.as_bytes()))
                .unwrap_or_default(),
        ),
        None => (
            Code::Unknown,
            format!(
                "the upstream sent an invalid grpc-status {:?}",
                String::from_utf8_lossy(code.as_bytes())
            ),
        ),
    };
    let details = fields
        .get(GRPC_STATUS_DETAILS)
        .and_then(|d| super::decode_binary_header(d.as_bytes()))
        .map(Bytes::from)
        .unwrap_or_default();
    let mut metadata = headers.clone();
    merge_metadata(&mut metadata, fields);
    Some(Status::with_details_and_metadata(
        code,
        message,
        details,
        MetadataMap::from_headers(metadata),
    ))
}

/// Reads the body's gRPC messages: none or one (a second is a protocol error for a unary
/// call). The usual answer, one DATA frame holding the whole message, is sliced, not copied.
/// A compressed message (`gzipped`: the answer's `grpc-encoding` is gzip) is decoded, held
/// to `max` decoded bytes too.
async fn read_message(
    body: &mut RecvStream,
    max: usize,
    gzipped: bool,
    authority: &Authority,
) -> Result<Option<Bytes>, Failure> {
    let internal = |message: String| Failure::Final(Status::internal(message));
    // Bytes not yet taken: one chunk as it came (`held`), or several joined in `joined`;
    // never both.
    let mut held: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    let mut message = None;
    loop {
        let pending: &[u8] = held.as_deref().unwrap_or(&joined);
        if let [flag, a, b, c, d, ..] = *pending {
            if message.is_some() {
                return Err(internal(
                    "the upstream answered a unary call with more than one message".into(),
                ));
            }
            match flag {
                0 => {}
                1 if gzipped => {}
                1 => {
                    return Err(internal(
                        "the upstream sent a compressed message without naming its grpc-encoding"
                            .into(),
                    ));
                }
                _ => {
                    return Err(internal(format!(
                        "the upstream sent a message with an invalid flag byte {flag}"
                    )));
                }
            }
            let len = u32::from_be_bytes([a, b, c, d]) as usize;
            if len > max {
                return Err(internal(format!(
                    "the upstream's answer of {len} bytes is over the gateway's limit of {max} bytes"
                )));
            }
            if pending.len() >= 5 + len {
                let mut all = held.take().unwrap_or_else(|| joined.split().freeze());
                let bytes = all.slice(5..5 + len);
                message = Some(if flag == 1 {
                    gunzip(&bytes, max).map_err(internal)?
                } else {
                    bytes
                });
                all.advance(5 + len);
                held = (!all.is_empty()).then_some(all);
                continue;
            }
            // Incomplete: gathered in `joined`, sized once.
            if let Some(first) = held.take() {
                joined.reserve(5 + len);
                joined.extend_from_slice(&first);
            }
        }
        let Some(chunk) = body.data().await else {
            break;
        };
        let chunk = chunk.map_err(|e| stream_failure(&e, authority))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        match held.take() {
            None if joined.is_empty() => held = Some(chunk),
            Some(first) => {
                joined.extend_from_slice(&first);
                joined.extend_from_slice(&chunk);
            }
            None => joined.extend_from_slice(&chunk),
        }
    }
    let left = held.as_ref().map_or(joined.len(), Bytes::len);
    if left > 0 {
        return Err(internal(format!(
            "the upstream's answer ended inside a message ({left} bytes left over)"
        )));
    }
    Ok(message)
}

/// An answer's gzip-compressed message, decoded and held to `max` bytes.
fn gunzip(data: &[u8], max: usize) -> Result<Bytes, String> {
    use std::io::Read;
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(max));
    flate2::read::GzDecoder::new(data)
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("the upstream's gzip-compressed answer does not decode: {e}"))?;
    if out.len() > max {
        return Err(format!(
            "the upstream's answer decodes to over the gateway's limit of {max} bytes"
        ));
    }
    Ok(Bytes::from(out))
}

/// A stream's error as the gRPC status the spec gives it; refused streams may be retried.
pub(super) fn stream_failure(e: &h2::Error, authority: &Authority) -> Failure {
    let reason = e.reason();
    if e.is_reset() && e.is_remote() && reason == Some(Reason::REFUSED_STREAM) {
        return Failure::NotSent(super::unreached(format!(
            "upstream {authority} refused the call"
        )));
    }
    // The upstream's GOAWAY fails a stream only when it is above the last stream the
    // upstream took: it did not process the call.
    if e.is_go_away() && e.is_remote() {
        return Failure::NotSent(super::unreached(format!(
            "upstream {authority} closed the connection before taking the call: {e}"
        )));
    }
    if e.is_io() || e.is_go_away() {
        return Failure::Final(super::unreached(format!(
            "upstream {authority} connection lost: {e}"
        )));
    }
    // https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md#errors
    let code = match reason {
        Some(Reason::CANCEL) => Code::Cancelled,
        Some(Reason::REFUSED_STREAM) => Code::Unavailable,
        Some(Reason::ENHANCE_YOUR_CALM) => Code::ResourceExhausted,
        Some(Reason::INADEQUATE_SECURITY) => Code::PermissionDenied,
        _ => Code::Internal,
    };
    Failure::Final(Status::new(code, format!("upstream {authority}: {e}")))
}

/// The status of an answer without `grpc-status`, from its HTTP status, as gRPC specifies
/// (https://github.com/grpc/grpc/blob/master/doc/http-grpc-status-mapping.md).
fn from_http_status(status: StatusCode) -> Status {
    let code = match status {
        StatusCode::BAD_REQUEST => Code::Internal,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(
        code,
        format!(
            "the upstream answered HTTP {} without a gRPC status",
            status.as_u16()
        ),
    )
}

/// `grpc-timeout`: the most precise unit whose value fits the protocol's eight digits. A
/// first attempt sends the whole deadline, usually the configured one: the last value made
/// is kept per thread and cloned (a reference count) while the deadline stays the same.
pub(super) fn grpc_timeout(timeout: Duration) -> HeaderValue {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(Duration, HeaderValue)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((made_for, value)) if *made_for == timeout => value.clone(),
        _ => {
            let value = format_grpc_timeout(timeout);
            *last = Some((timeout, value.clone()));
            value
        }
    })
}

fn format_grpc_timeout(timeout: Duration) -> HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    let (value, unit) = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60_000_000_000, b'M'),
        (3_600_000_000_000, b'H'),
    ]
    .into_iter()
    .map(|(per, unit)| (nanos / per, unit))
    .find(|&(value, _)| value <= MAX)
    .unwrap_or((MAX, b'H'));
    let mut text = [0u8; 24];
    let mut cursor = Cursor::new(&mut text[..]);
    let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{value}{}", unit as char));
    let len = cursor.position() as usize;
    HeaderValue::from_bytes(&text[..len]).unwrap_or_else(|_| HeaderValue::from_static("99999999H"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_takes_the_most_precise_unit_that_fits() {
        let cases = [
            (Duration::from_nanos(0), "0n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_secs(3), "3000000u"),
            (Duration::from_secs(30), "30000000u"),
            (Duration::from_secs(300), "300000m"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(100_000_000), "1666666M"),
            (Duration::from_secs(u64::MAX), "99999999H"),
        ];
        for (timeout, expected) in cases {
            assert_eq!(grpc_timeout(timeout), expected, "{timeout:?}");
            // Again: the kept value, the same.
            assert_eq!(grpc_timeout(timeout), expected, "{timeout:?}");
        }
    }

    #[test]
    fn http_statuses_map_as_grpc_specifies() {
        let cases = [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (500, Code::Unknown),
            (302, Code::Unknown),
        ];
        for (status, code) in cases {
            let s = from_http_status(StatusCode::from_u16(status).unwrap());
            assert_eq!(s.code(), code, "{status}");
            assert!(s.message().contains(&status.to_string()), "{}", s.message());
        }
    }
}

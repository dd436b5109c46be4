//! Connect, protocol version 1 ([`super::Protocol::Connect`]): what connect-es, connect-go,
//! connect-kotlin and connect-swift clients speak. Messages are converted as REST/HTTP's are
//! (JSON through the transcoder, protobuf byte for byte); what differs is written here:
//!
//! - recognising it: a unary call says `Connect-Protocol-Version: 1` (a POST of
//!   `application/json` or `application/proto`) or, as a GET, `?connect=v1`; a stream's
//!   Content-Type is `application/connect+json` or `application/connect+proto`;
//! - a unary GET's message in the query (`encoding`, `message`, `base64`, `compression`),
//!   for methods marked `NO_SIDE_EFFECTS` only;
//! - the deadline, `Connect-Timeout-Ms`; metadata as plain headers both ways;
//! - errors: unary ones as Connect's error JSON under the HTTP status of the code; a
//!   stream's (whatever its shape) in its end-of-stream message, under 200.
//!
//! The reference is the Connect protocol specification (connectrpc.com/docs/protocol).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::http::header::{self, HeaderName};
use ::http::{HeaderMap, HeaderValue, Response};
use base64::Engine as _;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use transcode::stream::{Framing, InFraming};
use transcode::{Format, StreamingKind};

use super::{Plan, essence};
use crate::body::ResponseBody;
use crate::coding::Coding;
use crate::error::{Code, EdgeError};

const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("connect-protocol-version");
const TIMEOUT_MS: HeaderName = HeaderName::from_static("connect-timeout-ms");
const CONTENT_ENCODING: HeaderName = HeaderName::from_static("connect-content-encoding");

/// The Connect POST a head makes, if it is one (its Content-Type, `content_type`, is an
/// `application/…` one): `Some(true)` for the streaming protocol (`application/connect+…`),
/// `Some(false)` for a unary call (`Connect-Protocol-Version` with JSON or proto). A GET is
/// [`is_get`]'s.
pub(super) fn recognise(head: &::http::request::Parts, content_type: &[u8]) -> Option<bool> {
    let essence = essence(content_type);
    if essence.len() > 20 && essence[..20].eq_ignore_ascii_case(b"application/connect+") {
        return Some(true);
    }
    let unary_type = essence.eq_ignore_ascii_case(b"application/json")
        || essence.eq_ignore_ascii_case(b"application/proto");
    (unary_type && head.headers.contains_key(PROTOCOL_VERSION)).then_some(false)
}

/// The HTTP verb a Connect request is routed under: a Connect GET (`?connect=v1`) is the
/// method's POST (whether the method may be called so is `negotiate`'s to say).
pub(super) fn route_verb(head: &::http::request::Parts) -> &str {
    if is_get(head) {
        "POST"
    } else {
        head.method.as_str()
    }
}

/// A GET that says it is Connect's (`connect=v1` in its query).
pub(super) fn is_get(head: &::http::request::Parts) -> bool {
    head.method == ::http::Method::GET
        && head
            .uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "connect=v1"))
}

/// negotiate: the codec from the Content-Type (a GET's from `encoding`); the answer in the
/// request's codec. A unary method takes the unary protocol, any other the streaming one.
pub(super) fn negotiate(
    streaming: bool,
    head: &::http::request::Parts,
    method: &transcode::Method,
) -> Result<Plan, EdgeError> {
    let version = head.headers.get(PROTOCOL_VERSION);
    if version.is_some_and(|v| v.as_bytes() != b"1") {
        return Err(EdgeError::BadHeader(format!(
            "Connect-Protocol-Version {:?} is not 1, the version served",
            String::from_utf8_lossy(version.map_or(&b""[..], |v| v.as_bytes()))
        )));
    }
    let unary = method.streaming == StreamingKind::Unary;
    if streaming == unary {
        return Err(EdgeError::UnsupportedMediaType(format!(
            "{} is a {} method: Connect calls it with {}",
            method.full_name,
            if unary { "unary" } else { "streaming" },
            if unary {
                "application/json or application/proto"
            } else {
                "application/connect+json or application/connect+proto"
            }
        )));
    }
    let format = if is_get(head) {
        if !method.no_side_effects {
            return Err(EdgeError::MethodNotAllowed {
                what: format!(
                    "method {} (a Connect GET needs idempotency_level = NO_SIDE_EFFECTS)",
                    method.full_name
                ),
                allow: "POST".into(),
            });
        }
        let query = GetQuery::parse(head.uri.query().unwrap_or(""))?;
        query.format
    } else {
        codec(head, streaming)?
    };
    let (in_framing, out_framing) = if streaming {
        let (inf, outf) = match format {
            Format::Protobuf => (InFraming::ConnectProto, Framing::ConnectProto),
            _ => (InFraming::ConnectJson, Framing::ConnectJson),
        };
        let streams_in = matches!(
            method.streaming,
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional
        );
        if method.streaming == StreamingKind::Bidirectional
            && head.version < ::http::Version::HTTP_2
        {
            return Err(EdgeError::NotImplemented(
                "a bidirectional stream needs HTTP/2".into(),
            ));
        }
        (streams_in.then_some(inf), Some(outf))
    } else {
        (None, None)
    };
    // The coding of a stream's messages flagged compressed (an unknown one refused).
    let message_coding = match head.headers.get(CONTENT_ENCODING) {
        Some(coding) if streaming && coding.as_bytes() != b"identity" => {
            let name = coding.to_str().unwrap_or("");
            Some(Coding::parse(name).ok_or_else(|| {
                EdgeError::NotImplemented(format!(
                    "Connect-Content-Encoding {name:?} is not one the gateway reads (gzip, br, zstd, deflate, identity)"
                ))
            })?)
        }
        _ => None,
    };
    Ok(Plan {
        request: format,
        body_type: Some(format),
        in_framing,
        response: format,
        out_framing,
        fallback: false,
        deadline: None,
        enveloped_request: streaming && in_framing.is_none(),
        message_coding,
    })
}

/// The codec a Connect POST's Content-Type names.
fn codec(head: &::http::request::Parts, streaming: bool) -> Result<Format, EdgeError> {
    let content_type = head
        .headers
        .get(header::CONTENT_TYPE)
        .map_or(&b""[..], |t| t.as_bytes());
    let essence = essence(content_type);
    let is = |t: &str| essence.eq_ignore_ascii_case(t.as_bytes());
    match streaming {
        false if is("application/json") => Ok(Format::Json),
        false if is("application/proto") => Ok(Format::Protobuf),
        true if is("application/connect+json") => Ok(Format::Json),
        true if is("application/connect+proto") => Ok(Format::Protobuf),
        _ => Err(EdgeError::UnsupportedMediaType(format!(
            "Content-Type {:?}: Connect's codecs are json and proto",
            String::from_utf8_lossy(content_type)
        ))),
    }
}

/// A unary GET's query: `connect=v1&encoding=json|proto&message=…[&base64=1][&compression=…]`.
struct GetQuery {
    format: Format,
    message: Vec<u8>,
    coding: Option<Coding>,
}

impl GetQuery {
    fn parse(query: &str) -> Result<GetQuery, EdgeError> {
        let (mut format, mut message, mut base64, mut coding) = (None, None, false, None);
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "encoding" => {
                    format = Some(match value {
                        "json" => Format::Json,
                        "proto" => Format::Protobuf,
                        _ => {
                            return Err(EdgeError::BadRequest(format!(
                                "query parameter encoding={value}: Connect's codecs are json and proto"
                            )));
                        }
                    })
                }
                "message" => {
                    message = Some(
                        transcode::rest::percent_decode_bytes(value, false, true).map_err(|e| {
                            EdgeError::BadRequest(format!("query parameter message: {e}"))
                        })?,
                    )
                }
                "base64" => base64 = value == "1",
                "compression" if value != "identity" => {
                    coding = Some(Coding::parse(value).ok_or_else(|| {
                        EdgeError::NotImplemented(format!(
                            "query parameter compression={value}: not a coding the gateway reads"
                        ))
                    })?)
                }
                _ => {}
            }
        }
        let format = format.ok_or_else(|| {
            EdgeError::BadRequest("a Connect GET needs the query parameter encoding".into())
        })?;
        let mut message = message.ok_or_else(|| {
            EdgeError::BadRequest("a Connect GET needs the query parameter message".into())
        })?;
        if base64 {
            let engine = base64::engine::GeneralPurpose::new(
                &base64::alphabet::URL_SAFE,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
            );
            message = engine.decode(&message).map_err(|e| {
                EdgeError::BadRequest(format!(
                    "query parameter message is not base64url (base64=1): {e}"
                ))
            })?;
        }
        Ok(GetQuery {
            format,
            message,
            coding,
        })
    }
}

/// A Connect GET's body: the query's message (its coding, `compression`, applied by the
/// content-coding step as a body's `Content-Encoding` is).
pub(super) fn get_message(
    head: &::http::request::Parts,
) -> Result<(Bytes, Option<Coding>), EdgeError> {
    let query = GetQuery::parse(head.uri.query().unwrap_or(""))?;
    Ok((Bytes::from(query.message), query.coding))
}

/// The client's deadline: `Connect-Timeout-Ms`, at most 10 digits.
pub(super) fn client_deadline(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    let Some(value) = headers.get(TIMEOUT_MS) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EdgeError::BadHeader(format!(
            "Connect-Timeout-Ms {text:?} is not 1 to 10 digits"
        )));
    }
    Ok(Some(Duration::from_millis(
        text.parse().unwrap_or(u64::MAX),
    )))
}

/// Headers of the request that are Connect's or HTTP's, not the call's metadata.
fn not_metadata(name: &str) -> bool {
    crate::reserved::is_reserved_metadata(name)
        || name.starts_with("connect-")
        || matches!(
            name,
            "accept" | "accept-encoding" | "content-encoding" | "origin" | "referer" | "cookie"
        )
}

/// The metadata sent upstream: every request header that is not Connect's, HTTP's or
/// gRPC's own (binary `-bin` values must be base64, as Connect sends them), the request id
/// the gateway made when the client sent none, and the trace context.
pub(super) fn upstream_metadata(
    headers: &HeaderMap,
    made_request_id: Option<&HeaderValue>,
) -> Result<HeaderMap, EdgeError> {
    let mut out = HeaderMap::new();
    if let Some(id) = made_request_id {
        out.insert(crate::headers::X_REQUEST_ID, id.clone());
    }
    for (name, value) in headers {
        let n = name.as_str();
        if n == "grpc-trace-bin" || !not_metadata(n) {
            if n.ends_with("-bin")
                && crate::upstream::decode_binary_header(value.as_bytes()).is_none()
            {
                return Err(EdgeError::BadHeader(format!(
                    "{n}: a binary metadata value (-bin) must be base64"
                )));
            }
            out.append(name.clone(), value.clone());
        }
    }
    Ok(out)
}

/// The upstream's metadata as the answer's headers, as it sent them (less gRPC's own).
pub(super) fn answer_metadata(metadata: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in metadata {
        if !crate::reserved::is_reserved_metadata(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The content type of a unary answer in `format`.
pub(super) fn content_type(format: Format) -> &'static str {
    match format {
        Format::Protobuf => transcode::media::PROTO[0],
        _ => transcode::media::JSON[0],
    }
}

/// Connect's name of a code.
fn code_name(code: Code) -> &'static str {
    use Code::*;
    match code {
        Ok => "ok",
        Cancelled => "canceled",
        Unknown => "unknown",
        InvalidArgument => "invalid_argument",
        DeadlineExceeded => "deadline_exceeded",
        NotFound => "not_found",
        AlreadyExists => "already_exists",
        PermissionDenied => "permission_denied",
        ResourceExhausted => "resource_exhausted",
        FailedPrecondition => "failed_precondition",
        Aborted => "aborted",
        OutOfRange => "out_of_range",
        Unimplemented => "unimplemented",
        Internal => "internal",
        Unavailable => "unavailable",
        DataLoss => "data_loss",
        Unauthenticated => "unauthenticated",
    }
}

/// A google.rpc.Status's details, as far as Connect needs them: each Any's type URL and
/// value.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(message, repeated, tag = "3")]
    details: Vec<RpcAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RpcAny {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// Connect's error object: `code`, `message`, and the upstream's details — each its type
/// (the Any's type URL without its prefix), its value (base64, unpadded) and, where the
/// schema renders it (`rendered`, google.rpc.Status in JSON), `debug`.
pub(super) fn error_object(err: &EdgeError, code: Code, rendered: &[u8]) -> serde_json::Value {
    let mut object = serde_json::json!({
        "code": code_name(code),
        "message": err.to_string(),
    });
    let details = match err {
        EdgeError::Upstream(u) => u.details.as_deref(),
        _ => None,
    };
    let Some(details) = details.and_then(|d| <RpcStatus as prost::Message>::decode(d).ok()) else {
        return object;
    };
    let debug: Vec<serde_json::Value> = serde_json::from_slice::<serde_json::Value>(rendered)
        .ok()
        .and_then(|s| s.get("details").and_then(|d| d.as_array().cloned()))
        .unwrap_or_default();
    let list: Vec<serde_json::Value> = details
        .details
        .iter()
        .enumerate()
        .map(|(i, any)| {
            let type_name = any
                .type_url
                .rsplit_once('/')
                .map_or(&*any.type_url, |(_, t)| t);
            let mut detail = serde_json::json!({
                "type": type_name,
                "value": base64::engine::general_purpose::STANDARD_NO_PAD.encode(&any.value),
            });
            if let Some(mut debug) = debug.get(i).cloned() {
                if let Some(fields) = debug.as_object_mut() {
                    fields.remove("@type");
                }
                detail["debug"] = debug;
            }
            detail
        })
        .collect();
    object["details"] = serde_json::Value::Array(list);
    object
}

/// An error answer. Unary: the error object as JSON under the code's HTTP status. A stream:
/// 200 and an end-of-stream message holding the error and the upstream's metadata.
pub(super) fn error_answer(
    streaming: bool,
    err: &EdgeError,
    code: Code,
    rendered: &[u8],
    content_type: Option<&HeaderValue>,
) -> Response<ResponseBody> {
    let error = error_object(err, code, rendered);
    let metadata = match err {
        EdgeError::Upstream(u) => answer_metadata(&u.metadata),
        _ => HeaderMap::new(),
    };
    if streaming {
        let mut out = Vec::new();
        end_of_stream(Some(error), &metadata, &mut out);
        let mut response = Response::new(ResponseBody::full(Bytes::from(out)));
        let content_type = content_type
            .filter(|t| essence(t.as_bytes()).eq_ignore_ascii_case(b"application/connect+proto"))
            .map_or("application/connect+json", |_| "application/connect+proto");
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        return response;
    }
    let mut body = Vec::new();
    write_json(&error, &mut body);
    let mut response = Response::new(ResponseBody::full(Bytes::from(body)));
    *response.status_mut() = err.code_and_status().1;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.extend(metadata);
    err.put_headers(headers);
    if let EdgeError::MethodNotAllowed { allow, .. } = err
        && let Ok(v) = HeaderValue::from_str(allow)
    {
        headers.insert(header::ALLOW, v);
    }
    response
}

/// The end-of-stream message: an envelope flagged `0x02` holding `{"error": …, "metadata":
/// {name: [values]}}` (either left out when there is none).
pub(super) fn end_of_stream(
    error: Option<serde_json::Value>,
    metadata: &HeaderMap,
    out: &mut Vec<u8>,
) {
    let mut end = serde_json::Map::new();
    if let Some(error) = error {
        end.insert("error".into(), error);
    }
    if !metadata.is_empty() {
        let mut fields = serde_json::Map::new();
        for name in metadata.keys() {
            let values = metadata
                .get_all(name)
                .iter()
                .map(|v| serde_json::Value::String(String::from_utf8_lossy(v.as_bytes()).into()))
                .collect();
            fields.insert(name.as_str().into(), serde_json::Value::Array(values));
        }
        end.insert("metadata".into(), serde_json::Value::Object(fields));
    }
    let mut json = Vec::new();
    write_json(&serde_json::Value::Object(end), &mut json);
    transcode::stream::envelope(0x02, &json, out);
}

/// JSON with the protocol's keys in the specification's order (`code`, `message`,
/// `details`; `type`, `value`, `debug`; `error`, `metadata`), the others after them sorted.
fn write_json(value: &serde_json::Value, out: &mut Vec<u8>) {
    const ORDER: [&str; 8] = [
        "code", "message", "details", "type", "value", "debug", "error", "metadata",
    ];
    let serde_json::Value::Object(map) = value else {
        let _ = serde_json::to_writer(&mut *out, value);
        return;
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| (ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()), *k));
    out.push(b'{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        match &map[key] {
            serde_json::Value::Array(items) => {
                out.push(b'[');
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_json(item, out);
                }
                out.push(b']');
            }
            other => write_json(other, out),
        }
    }
    out.push(b'}');
}

/// A server stream's request: one message in an envelope, taken out of it as the body is read
/// (decoded when flagged compressed, in `coding`, under `limit` decoded bytes).
pub(crate) fn one_message(
    body: Bytes,
    coding: Option<Coding>,
    limit: usize,
) -> Result<Bytes, EdgeError> {
    let bad = |what: &str| EdgeError::BadRequest(format!("the Connect request stream {what}"));
    let Some(&[flags, a, b, c, d]) = body.get(..5) else {
        return Err(bad("ends inside its envelope's 5-byte prefix"));
    };
    let coding = match (flags, coding) {
        (0, _) => None,
        (1, Some(coding)) => Some(coding),
        (1, None) => {
            return Err(bad(
                "has a message flagged compressed (0x01) but no Connect-Content-Encoding",
            ));
        }
        _ => {
            return Err(bad(&format!(
                "has envelope flags {flags:#04x}: only a message (0x00, 0x01 compressed) is taken"
            )));
        }
    };
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    let message = match body.len() - 5 {
        n if n < len => return Err(bad(&format!("ends inside its message: {n} of {len} bytes"))),
        n if n > len => return Err(bad("holds more than the one message a server stream takes")),
        _ => body.slice(5..),
    };
    match coding {
        Some(coding) => Ok(Bytes::from(crate::coding::decode::decode_message(
            coding, &message, limit,
        )?)),
        None => Ok(message),
    }
}

/// A request's body: the client's, or a Connect GET's message from the query.
pub(crate) enum Source<B> {
    Body(B),
    Query(Option<Bytes>),
}

impl<B> Body for Source<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.get_mut() {
            Source::Body(body) => Pin::new(body).poll_frame(cx),
            Source::Query(message) => Poll::Ready(message.take().map(|m| Ok(Frame::data(m)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Source::Body(body) => body.is_end_stream(),
            Source::Query(message) => message.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Source::Body(body) => body.size_hint(),
            Source::Query(message) => {
                SizeHint::with_exact(message.as_ref().map_or(0, |m| m.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, uri: &str, headers: &[(&str, &str)]) -> ::http::request::Parts {
        let mut req = ::http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn connect_requests_are_recognised_and_others_are_not() {
        let connect = [
            head(
                "POST",
                "/a.S/M",
                &[
                    ("connect-protocol-version", "1"),
                    ("content-type", "application/json"),
                ],
            ),
            head("GET", "/a.S/M?connect=v1&encoding=json&message=%7B%7D", &[]),
        ];
        use super::super::Protocol;
        for h in &connect {
            let unary = Protocol::Connect { streaming: false };
            assert_eq!(Protocol::recognise(h), unary, "{h:?}");
        }
        let stream = head(
            "POST",
            "/a.S/M",
            &[("content-type", "application/connect+proto")],
        );
        let streaming = Protocol::Connect { streaming: true };
        assert_eq!(Protocol::recognise(&stream), streaming);
        for h in [
            head("POST", "/a.S/M", &[("content-type", "application/json")]),
            head("GET", "/v1/things?connect=v2", &[]),
            head(
                "POST",
                "/a.S/M",
                &[("content-type", "application/connectx")],
            ),
            head(
                "POST",
                "/a.S/M",
                &[
                    ("content-type", "application/x-protobuf"),
                    ("connect-protocol-version", "1"),
                ],
            ),
        ] {
            assert_eq!(Protocol::recognise(&h), Protocol::Http, "{h:?}");
        }
    }

    #[test]
    fn get_queries_decode_every_form() {
        let q =
            GetQuery::parse("connect=v1&encoding=json&message=%7B%22id%22%3A%227%22%7D").unwrap();
        assert_eq!(q.format, Format::Json);
        assert_eq!(q.message, br#"{"id":"7"}"#);
        let q = GetQuery::parse("encoding=proto&base64=1&message=CAc").unwrap();
        assert_eq!((q.format, q.message), (Format::Protobuf, vec![8, 7]));
        for (bad, words) in [
            ("encoding=xml&message=x", "encoding=xml"),
            ("message=x", "needs the query parameter encoding"),
            ("encoding=json", "needs the query parameter message"),
            ("encoding=json&message=%zz", "bad percent-encoding"),
            ("encoding=proto&base64=1&message=***", "base64url"),
            (
                "encoding=json&message=x&compression=lzma",
                "compression=lzma",
            ),
        ] {
            let err = GetQuery::parse(bad).err().unwrap().to_string();
            assert!(err.contains(words), "{bad}: {err}");
        }
    }

    #[test]
    fn deadlines_are_milliseconds() {
        let mut h = HeaderMap::new();
        assert_eq!(client_deadline(&h).unwrap(), None);
        h.insert(TIMEOUT_MS, HeaderValue::from_static("1500"));
        assert_eq!(
            client_deadline(&h).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in ["", "-1", "1.5", "12345678901"] {
            h.insert(TIMEOUT_MS, HeaderValue::from_str(bad).unwrap());
            assert!(client_deadline(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_server_streams_request_is_one_enveloped_message() {
        let mut body = Vec::new();
        transcode::stream::envelope(0, b"\x08\x07", &mut body);
        assert_eq!(
            one_message(Bytes::from(body.clone()), None, 100)
                .unwrap()
                .as_ref(),
            b"\x08\x07"
        );
        for (cut, words) in [(3, "5-byte prefix"), (6, "1 of 2 bytes")] {
            let err = one_message(Bytes::copy_from_slice(&body[..cut]), None, 100).unwrap_err();
            assert!(err.to_string().contains(words), "{err}");
        }
        body.push(0);
        assert!(one_message(Bytes::from(body), None, 100).is_err());
    }

    #[test]
    fn end_of_stream_carries_error_and_metadata() {
        let mut md = HeaderMap::new();
        md.append("x-a", HeaderValue::from_static("1"));
        md.append("x-a", HeaderValue::from_static("2"));
        let mut out = Vec::new();
        end_of_stream(
            Some(serde_json::json!({"code": "not_found"})),
            &md,
            &mut out,
        );
        assert_eq!(out[0], 2);
        let json: serde_json::Value = serde_json::from_slice(&out[5..]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"error": {"code": "not_found"}, "metadata": {"x-a": ["1", "2"]}})
        );
        let mut out = Vec::new();
        end_of_stream(None, &HeaderMap::new(), &mut out);
        assert_eq!(&out[5..], b"{}");
    }
}
